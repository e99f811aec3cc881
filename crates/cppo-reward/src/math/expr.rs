//! A bounded parser for LaTeX arithmetic, producing a postfix program for [`super::eval`].
//!
//! Grammar (on normalised text): `+ - * / ^`, `\cdot`, `\times`, `\div`, implicit multiplication
//! (`2x`, `2\sqrt{3}`, `(a)(b)`), `\frac{a}{b}`, mixed numbers (`3\frac{1}{2}` = 3.5, as MATH writes them),
//! `\sqrt{x}`, `\sqrt[n]{x}`, `\binom{n}{k}`, `n!`, `|x|`, `\pi`, `e` (Euler's number), Greek letters and
//! single letters (optionally subscripted: `a_1`) as variables, and `\sin \cos \tan \cot \sec \csc
//! \arcsin \arccos \arctan \sinh \cosh \tanh \exp \ln \log` (`\log` is natural; `\log_b x` has base b;
//! `\sin^2 x` is (sin x)^2, `\sin^{-1} x` is arcsin x). A function without parentheses takes the
//! implicit product that follows (`\sin 2x` = sin(2x)). `^` followed by digits takes them all (`2^10` is
//! 1024, the plain-text reading). `i` is an ordinary variable (no complex arithmetic).
//!
//! Text is not an expression: three or more letters in a row (`May`, `Wednesday`) fail to parse, so
//! words are only ever compared as strings. Nesting is capped at [`MAX_DEPTH`], size at [`MAX_NODES`];
//! since the output is a flat postfix program, evaluating and dropping it needs no recursion.

use crate::limits::{MAX_DEPTH, MAX_NODES};

use super::value::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Sin,
    Cos,
    Tan,
    Cot,
    Sec,
    Csc,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Exp,
    Ln,
}

impl Func {
    fn from_name(name: &str) -> Option<Func> {
        Some(match name {
            "sin" => Func::Sin,
            "cos" => Func::Cos,
            "tan" => Func::Tan,
            "cot" => Func::Cot,
            "sec" => Func::Sec,
            "csc" => Func::Csc,
            "arcsin" => Func::Asin,
            "arccos" => Func::Acos,
            "arctan" => Func::Atan,
            "sinh" => Func::Sinh,
            "cosh" => Func::Cosh,
            "tanh" => Func::Tanh,
            "exp" => Func::Exp,
            "ln" | "log" => Func::Ln,
            _ => return None,
        })
    }

    fn inverse(self) -> Option<Func> {
        match self {
            Func::Sin => Some(Func::Asin),
            Func::Cos => Some(Func::Acos),
            Func::Tan => Some(Func::Atan),
            _ => None,
        }
    }

    pub fn apply(self, x: f64) -> f64 {
        match self {
            Func::Sin => x.sin(),
            Func::Cos => x.cos(),
            Func::Tan => x.tan(),
            Func::Cot => 1.0 / x.tan(),
            Func::Sec => 1.0 / x.cos(),
            Func::Csc => 1.0 / x.sin(),
            Func::Asin => x.asin(),
            Func::Acos => x.acos(),
            Func::Atan => x.atan(),
            Func::Sinh => x.sinh(),
            Func::Cosh => x.cosh(),
            Func::Tanh => x.tanh(),
            Func::Exp => x.exp(),
            Func::Ln => {
                if x > 0.0 {
                    x.ln()
                } else {
                    f64::NAN
                }
            }
        }
    }
}

/// One instruction of the postfix program.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Num(Value),
    /// Index into [`Expr::vars`].
    Var(usize),
    Pi,
    E,
    Neg,
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    /// Pops the index `n`, then the radicand.
    Root,
    Fact,
    Binom,
    /// Pops the argument, then the base.
    LogBase,
    Abs,
    Func(Func),
}

/// A parsed expression: its program and the names of its variables.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub ops: Vec<Op>,
    pub vars: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Not arithmetic: an unknown command, a stray symbol, text.
    NotAnExpression,
    TooDeep,
    TooLarge,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(String),
    Letter(char),
    Cmd(String),
    Op(char),
}

fn lex(s: &str) -> Result<Vec<Tok>, ParseError> {
    let chars: Vec<char> = s.chars().collect();
    let mut toks = Vec::new();
    let mut letters_in_a_row = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphabetic() {
            letters_in_a_row += 1;
            if letters_in_a_row >= 3 {
                return Err(ParseError::NotAnExpression);
            }
            toks.push(Tok::Letter(c));
            i += 1;
            continue;
        }
        letters_in_a_row = 0;
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            if i + 1 < chars.len() && chars[i] == '.' && chars[i + 1].is_ascii_digit() {
                i += 1;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if matches!(toks.last(), Some(Tok::Num(_))) {
                return Err(ParseError::NotAnExpression);
            }
            toks.push(Tok::Num(chars[start..i].iter().collect()));
            continue;
        }
        if c == '\\' {
            let start = i + 1;
            let mut j = start;
            while j < chars.len() && chars[j].is_ascii_alphabetic() {
                j += 1;
            }
            if j == start {
                return Err(ParseError::NotAnExpression);
            }
            toks.push(Tok::Cmd(chars[start..j].iter().collect()));
            i = j;
            continue;
        }
        if !c.is_whitespace() {
            toks.push(Tok::Op(c));
        }
        i += 1;
    }
    Ok(toks)
}

pub(crate) const GREEK: &[&str] = &[
    "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta", "iota", "kappa",
    "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon", "phi", "varphi", "chi", "psi", "omega", "Gamma",
    "Delta", "Theta", "Lambda", "Xi", "Sigma", "Phi", "Psi", "Omega",
];

/// Parses a normalised answer as an arithmetic expression.
pub fn parse(s: &str) -> Result<Expr, ParseError> {
    let toks = lex(s)?;
    if toks.is_empty() {
        return Err(ParseError::NotAnExpression);
    }
    if toks.len() > MAX_NODES {
        return Err(ParseError::TooLarge);
    }
    let mut p = Parser { toks: &toks, pos: 0, depth: 0, out: Vec::new(), vars: Vec::new() };
    p.sum()?;
    if p.pos != toks.len() {
        return Err(ParseError::NotAnExpression);
    }
    Ok(Expr { ops: p.out, vars: p.vars })
}

struct Parser<'a> {
    toks: &'a [Tok],
    pos: usize,
    depth: usize,
    out: Vec<Op>,
    vars: Vec<String>,
}

type R = Result<(), ParseError>;

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn peek_op(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Op(c))
    }

    fn eat_op(&mut self, c: char) -> bool {
        let hit = self.peek_op(c);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn expect_op(&mut self, c: char) -> R {
        if self.eat_op(c) {
            Ok(())
        } else {
            Err(ParseError::NotAnExpression)
        }
    }

    fn peek_cmd(&self) -> Option<&str> {
        match self.peek() {
            Some(Tok::Cmd(c)) => Some(c.as_str()),
            _ => None,
        }
    }

    fn emit(&mut self, op: Op) -> R {
        if self.out.len() >= MAX_NODES {
            return Err(ParseError::TooLarge);
        }
        self.out.push(op);
        Ok(())
    }

    fn enter(&mut self) -> R {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(ParseError::TooDeep)
        } else {
            Ok(())
        }
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn var(&mut self, name: String) -> R {
        let idx = match self.vars.iter().position(|v| *v == name) {
            Some(i) => i,
            None => {
                self.vars.push(name);
                self.vars.len() - 1
            }
        };
        self.emit(Op::Var(idx))
    }

    fn sum(&mut self) -> R {
        self.enter()?;
        self.product()?;
        loop {
            if self.eat_op('+') {
                self.product()?;
                self.emit(Op::Add)?;
            } else if self.eat_op('-') {
                self.product()?;
                self.emit(Op::Sub)?;
            } else {
                break;
            }
        }
        self.leave();
        Ok(())
    }

    fn starts_factor(&self) -> bool {
        match self.peek() {
            Some(Tok::Num(_) | Tok::Letter(_)) => true,
            Some(Tok::Op(c)) => matches!(c, '(' | '[' | '{'),
            Some(Tok::Cmd(c)) => is_atom_cmd(c),
            None => false,
        }
    }

    fn product(&mut self) -> R {
        self.unary()?;
        loop {
            if self.eat_op('*') || self.eat_cmd(&["cdot", "times"]) {
                self.unary()?;
                self.emit(Op::Mul)?;
            } else if self.eat_op('/') || self.eat_cmd(&["div"]) {
                self.unary()?;
                self.emit(Op::Div)?;
            } else if self.starts_factor() {
                self.power()?;
                self.emit(Op::Mul)?;
            } else {
                return Ok(());
            }
        }
    }

    fn eat_cmd(&mut self, names: &[&str]) -> bool {
        let hit = self.peek_cmd().is_some_and(|c| names.contains(&c));
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn unary(&mut self) -> R {
        if self.eat_op('-') {
            self.enter()?;
            self.unary()?;
            self.leave();
            return self.emit(Op::Neg);
        }
        if self.eat_op('+') {
            self.enter()?;
            self.unary()?;
            self.leave();
            return Ok(());
        }
        self.power()
    }

    fn power(&mut self) -> R {
        self.postfix()?;
        if self.eat_op('^') {
            self.exponent()?;
            self.emit(Op::Pow)?;
        }
        Ok(())
    }

    /// What follows `^`: a group, a signed exponent, a whole digit run, or one atom; right-associative.
    fn exponent(&mut self) -> R {
        self.enter()?;
        if self.eat_op('{') {
            self.sum()?;
            self.expect_op('}')?;
        } else if self.eat_op('-') {
            self.exponent()?;
            self.emit(Op::Neg)?;
            self.leave();
            return Ok(());
        } else if self.eat_op('+') {
            self.exponent()?;
            self.leave();
            return Ok(());
        } else if let Some(Tok::Num(n)) = self.peek() {
            let v = Value::from_decimal(n).map_err(|_| ParseError::TooLarge)?;
            self.pos += 1;
            self.emit(Op::Num(v))?;
        } else {
            self.postfix()?;
        }
        if self.eat_op('^') {
            self.exponent()?;
            self.emit(Op::Pow)?;
        }
        self.leave();
        Ok(())
    }

    fn postfix(&mut self) -> R {
        self.atom()?;
        while self.eat_op('!') {
            self.emit(Op::Fact)?;
        }
        Ok(())
    }

    fn group_arg(&mut self) -> R {
        self.expect_op('{')?;
        self.sum()?;
        self.expect_op('}')
    }

    fn atom(&mut self) -> R {
        let Some(tok) = self.peek().cloned() else { return Err(ParseError::NotAnExpression) };
        self.pos += 1;
        match tok {
            Tok::Num(n) => {
                let v = Value::from_decimal(&n).map_err(|_| ParseError::TooLarge)?;
                self.emit(Op::Num(v))?;
                if !n.contains('.') {
                    if let Some((num, den)) = self.mixed_fraction() {
                        self.emit(Op::Num(num))?;
                        self.emit(Op::Num(den))?;
                        self.emit(Op::Div)?;
                        self.emit(Op::Add)?;
                    }
                }
                Ok(())
            }
            Tok::Letter('e') => self.emit(Op::E),
            Tok::Letter(c) => {
                let mut name = c.to_string();
                if self.eat_op('_') {
                    name.push('_');
                    name.push_str(&self.subscript()?);
                }
                self.var(name)
            }
            Tok::Op('(') => self.bracketed(')'),
            Tok::Op('[') => self.bracketed(']'),
            Tok::Op('{') => self.bracketed('}'),
            Tok::Op('|') => {
                self.bracketed('|')?;
                self.emit(Op::Abs)
            }
            Tok::Cmd(c) => self.command(&c),
            Tok::Op(_) => Err(ParseError::NotAnExpression),
        }
    }

    fn bracketed(&mut self, close: char) -> R {
        self.sum()?;
        self.expect_op(close)
    }

    /// `_1`, `_x`, `_{12}`: the subscript of a variable name, as text.
    fn subscript(&mut self) -> Result<String, ParseError> {
        match self.peek().cloned() {
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Ok(n)
            }
            Some(Tok::Letter(c)) => {
                self.pos += 1;
                Ok(c.to_string())
            }
            Some(Tok::Op('{')) => {
                self.pos += 1;
                let mut s = String::new();
                loop {
                    match self.peek().cloned() {
                        Some(Tok::Op('}')) => {
                            self.pos += 1;
                            return Ok(s);
                        }
                        Some(Tok::Num(n)) => s.push_str(&n),
                        Some(Tok::Letter(c)) | Some(Tok::Op(c)) if c != '{' => s.push(c),
                        _ => return Err(ParseError::NotAnExpression),
                    }
                    self.pos += 1;
                }
            }
            _ => Err(ParseError::NotAnExpression),
        }
    }

    /// After an integer: `\frac{a}{b}` with integer literals makes a mixed number (`2\frac{1}{3}`).
    fn mixed_fraction(&mut self) -> Option<(Value, Value)> {
        let t = self.toks.get(self.pos..self.pos + 7)?;
        match t {
            [Tok::Cmd(f), Tok::Op('{'), Tok::Num(a), Tok::Op('}'), Tok::Op('{'), Tok::Num(b), Tok::Op('}')]
                if f == "frac" && !a.contains('.') && !b.contains('.') =>
            {
                let (a, b) = (Value::from_decimal(a).ok()?, Value::from_decimal(b).ok()?);
                self.pos += 7;
                Some((a, b))
            }
            _ => None,
        }
    }

    fn command(&mut self, name: &str) -> R {
        match name {
            "frac" => {
                self.group_arg()?;
                self.group_arg()?;
                self.emit(Op::Div)
            }
            "binom" => {
                self.group_arg()?;
                self.group_arg()?;
                self.emit(Op::Binom)
            }
            "sqrt" => {
                // The index is emitted after the radicand, so parse it into a side buffer first.
                let index = if self.eat_op('[') {
                    let saved = std::mem::take(&mut self.out);
                    let r = self.bracketed(']');
                    let index = std::mem::replace(&mut self.out, saved);
                    r?;
                    index
                } else {
                    vec![Op::Num(Value::int(2))]
                };
                self.group_arg()?;
                self.append(index)?;
                self.emit(Op::Root)
            }
            "pi" => self.emit(Op::Pi),
            g if GREEK.contains(&g) => self.var(format!("\\{g}")),
            f => match Func::from_name(f) {
                Some(func) => self.function(func, f == "log"),
                None => Err(ParseError::NotAnExpression),
            },
        }
    }

    fn append(&mut self, ops: Vec<Op>) -> R {
        for op in ops {
            self.emit(op)?;
        }
        Ok(())
    }

    /// Parses into a side buffer (for parts that must be emitted after what follows them).
    fn side(&mut self, f: impl FnOnce(&mut Self) -> R) -> Result<Vec<Op>, ParseError> {
        let saved = std::mem::take(&mut self.out);
        let r = f(self);
        let side = std::mem::replace(&mut self.out, saved);
        r.map(|_| side)
    }

    fn function(&mut self, mut func: Func, is_log: bool) -> R {
        self.enter()?;
        let mut base = None;
        let mut power = None;
        for _ in 0..2 {
            if is_log && base.is_none() && self.eat_op('_') {
                base = Some(self.side(|p| p.exponent())?);
            } else if power.is_none() && self.eat_op('^') {
                power = Some(self.side(|p| p.exponent())?);
            }
        }
        if power.as_deref() == Some(&[Op::Num(Value::int(1)), Op::Neg][..]) {
            if let Some(inv) = func.inverse() {
                func = inv;
                power = None;
            }
        }
        let has_base = base.is_some();
        if let Some(b) = base {
            self.append(b)?;
        }
        if self.eat_op('(') {
            self.bracketed(')')?;
        } else if self.eat_op('{') {
            self.bracketed('}')?;
        } else {
            // Without parentheses the argument is the implicit product that follows: `\sin 2x`.
            self.power()?;
            while self.starts_factor() && self.peek_cmd().is_none_or(|c| Func::from_name(c).is_none()) {
                self.power()?;
                self.emit(Op::Mul)?;
            }
        }
        self.emit(if has_base { Op::LogBase } else { Op::Func(func) })?;
        if let Some(pw) = power {
            self.append(pw)?;
            self.emit(Op::Pow)?;
        }
        self.leave();
        Ok(())
    }
}

fn is_atom_cmd(c: &str) -> bool {
    matches!(c, "frac" | "sqrt" | "binom" | "pi") || GREEK.contains(&c) || Func::from_name(c).is_some()
}
