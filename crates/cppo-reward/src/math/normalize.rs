//! LaTeX answer normalisation: one canonical spelling for the many ways of writing the same answer.
//!
//! Modelled on what the Hendrycks MATH `is_equiv`, the Qwen2.5-Math grader and math-verify undo
//! (without their code): `\dfrac`/`\tfrac` -> `\frac`, `\frac12` -> `\frac{1}{2}`, `\sqrt2` ->
//! `\sqrt{2}`, no `\left`/`\right`, no spacing commands (`\!`, `\,`, `\;`, `\quad`, `~`), no spaces, no
//! `$`, `\%`, `^\circ` (a spacing command run into the letters after it, `\quadx`, is the letters); `\text{...}` unwrapped (a trailing one after other content is a unit and dropped:
//! `5\text{ cm}` -> `5`); trailing unit words dropped (known ones like `cm`, or any word of three or more
//! letters after a number: `18 apples` -> `18`); `or` / `and` between items (plain or in `\text{}`) -> `,`;
//! thousands separators removed (`1,\!000`, `1{,}000` and `1 000` anywhere; `1,000` when it is the whole
//! answer), while other spaces between digits keep two numbers apart (`12 34`); `\mathbb{R}` -> `(-\infty,\infty)`; trailing full stop dropped; redundant outer braces
//! dropped. Set braces `\{ \}` are kept: they mean an unordered set.

use super::latex::{parse, Node, TreeError};

/// Text commands whose argument is plain text; unwrapped, or dropped as a trailing unit.
const TEXT_COMMANDS: &[&str] = &[
    "text", "textbf", "textit", "textrm", "textsf", "texttt", "textnormal", "textup", "mbox", "hbox", "mathrm",
    "mathbf", "mathit", "mathsf", "mathtt", "mathnormal", "operatorname", "emph", "boldsymbol", "bm",
];

/// Words that, at the end of an answer after a number, are a unit rather than part of the answer.
const UNIT_WORDS: &[&str] = &[
    "cm", "m", "km", "mm", "in", "inch", "inches", "ft", "feet", "foot", "yd", "yard", "yards", "mi", "mile", "miles",
    "meter", "meters", "metre", "metres", "units", "unit", "degree", "degrees", "deg", "dollars", "dollar", "cents",
    "cent", "hours", "hour", "hr", "minutes", "minute", "min", "seconds", "second", "sec", "days", "day", "weeks",
    "years", "kg", "g", "lb", "lbs", "pounds", "ounces", "oz", "mph", "sq", "square", "cubic", "percent", "points",
];

/// Spacing and sizing commands with no mathematical meaning.
const IGNORED_COMMANDS: &[&str] = &[
    "displaystyle", "textstyle", "scriptstyle", "limits", "nolimits", "quad", "qquad", "enspace", "thinspace",
    "negthinspace", "medspace", "thickspace", "hfill", "allowbreak", "nobreak", "hline", "circ", "degree",
    "degrees", "relax", "cr",
];

/// Sizing commands that precede a delimiter (`\left(`, `\bigl[`); `\left.` also drops its dot.
const DELIMITER_SIZES: &[&str] =
    &["left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr", "Biggl", "Biggr"];

const MATRIX_ENVS: &[&str] = &["pmatrix", "bmatrix", "Bmatrix", "matrix", "smallmatrix", "array"];

/// Normalises one answer. Fails only on unbalanced or too deeply nested braces.
pub fn normalize(answer: &str) -> Result<String, TreeError> {
    let pre = replace_unicode(answer.trim());
    let nodes = connectives_to_commas(&parse(&pre)?);
    let nodes = drop_trailing_unit(&nodes);
    let mut w = Writer::default();
    w.seq(nodes);
    Ok(w.finish())
}

fn replace_unicode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\u{2212}' | '\u{2013}' => out.push('-'),
            '\u{221e}' => out.push_str("\\infty "),
            '\u{03c0}' => out.push_str("\\pi "),
            '\u{00b0}' => out.push_str("^\\circ "),
            '\u{221a}' => out.push_str("\\sqrt "),
            '\u{00d7}' | '\u{22c5}' | '\u{00b7}' => out.push_str("\\cdot "),
            '\u{2264}' | '\u{2a7d}' => out.push_str("\\le "),
            '\u{2265}' | '\u{2a7e}' => out.push_str("\\ge "),
            '\u{2260}' => out.push_str("\\ne "),
            '\u{222a}' => out.push_str("\\cup "),
            c => out.push(c),
        }
    }
    out
}

fn is_text_cmd(n: &Node) -> bool {
    matches!(n, Node::Cmd(c) if TEXT_COMMANDS.contains(&c.as_str()))
}

fn prev_non_space(nodes: &[Node], end: usize) -> Option<usize> {
    (0..end).rev().find(|&i| nodes[i] != Node::Space)
}

/// Drops a trailing unit: `\text{...}` (optionally raised to a power, `\text{ cm}^2`) or a known unit
/// word after a space, when something else precedes it.
fn drop_trailing_unit(nodes: &[Node]) -> &[Node] {
    // A final full stop (`7\text{ hours}.`) does not hide the unit.
    let mut nodes = nodes;
    while let Some(last) = prev_non_space(nodes, nodes.len()) {
        if nodes[last] != Node::Char('.') {
            break;
        }
        nodes = &nodes[..last];
    }
    let Some(mut last) = prev_non_space(nodes, nodes.len()) else { return nodes };
    // `...^2` / `...^{2}` after the unit.
    if let Some(caret) = prev_non_space(nodes, last) {
        if nodes[caret] == Node::Char('^') {
            if let Some(before) = prev_non_space(nodes, caret) {
                if matches!(nodes[before], Node::Group(_)) {
                    last = before;
                }
            }
        }
    }
    if matches!(nodes[last], Node::Group(_)) {
        if let Some(cmd) = prev_non_space(nodes, last) {
            if is_text_cmd(&nodes[cmd]) && has_content(&nodes[..cmd]) {
                return &nodes[..cmd];
            }
        }
    }
    // Plain unit words after a space, at the very end: known units (`8 cm`), or any word of three or more
    // letters after a number or a group (`18 apples`, `\frac{1}{2} cup`), up to three of them.
    for _ in 0..3 {
        let end = prev_non_space(nodes, nodes.len()).map_or(0, |i| i + 1);
        let mut start = end;
        while start > 0 && matches!(nodes[start - 1], Node::Char(c) if c.is_ascii_alphabetic()) {
            start -= 1;
        }
        if start == end || start == 0 || nodes[start - 1] != Node::Space {
            break;
        }
        let word: String = nodes[start..end].iter().filter_map(|n| if let Node::Char(c) = n { Some(*c) } else { None }).collect();
        let after_number = prev_non_space(nodes, start - 1)
            .is_some_and(|p| matches!(&nodes[p], Node::Char(c) if c.is_ascii_digit() || *c == ')') || matches!(nodes[p], Node::Group(_)));
        let is_unit = UNIT_WORDS.contains(&word.as_str()) && has_content(&nodes[..start - 1]);
        if !(is_unit || word.len() >= 3 && after_number) {
            break;
        }
        nodes = &nodes[..start - 1];
    }
    nodes
}

/// ` or ` and ` and ` between items, written without `\text{}`, separate list items; so do `or` and
/// `and` run into the brackets or math delimiters around them (`(11,7)or(7,11)`, `$1$and$2$`).
fn connectives_to_commas(nodes: &[Node]) -> Vec<Node> {
    let mut out = Vec::with_capacity(nodes.len());
    let mut i = 0;
    while i < nodes.len() {
        let closes = |n: Option<&Node>| matches!(n, Some(Node::Char(')' | ']' | '$') | Node::Sym('}')));
        let opens = |n: Option<&Node>| matches!(n, Some(Node::Char('(' | '[' | '$') | Node::Sym('{')));
        let word_at = |w: &str| {
            let n = w.len();
            let spaced = nodes.get(i) == Some(&Node::Space) && nodes.get(i + n + 1) == Some(&Node::Space);
            let letters = |at: usize| w.chars().enumerate().all(|(k, c)| nodes.get(at + k) == Some(&Node::Char(c)));
            if spaced && letters(i + 1) {
                return Some(n + 2);
            }
            (closes(i.checked_sub(1).and_then(|p| nodes.get(p))) && letters(i) && opens(nodes.get(i + n))).then_some(n)
        };
        if let Some(len) = ["or", "and"].into_iter().find_map(word_at) {
            out.push(Node::Char(','));
            i += len;
            continue;
        }
        out.push(nodes[i].clone());
        i += 1;
    }
    out
}

fn has_content(nodes: &[Node]) -> bool {
    nodes.iter().any(|n| !matches!(n, Node::Space | Node::Sym('$') | Node::Char('$') | Node::Sym('!' | ',' | ';')))
}

/// The plain characters of a group, for text comparisons (`\text{ or }`).
fn plain_text(nodes: &[Node]) -> String {
    let mut s = String::new();
    for n in nodes {
        match n {
            Node::Char(c) => s.push(*c),
            Node::Space => s.push(' '),
            _ => s.push('\u{0}'),
        }
    }
    s.trim().to_string()
}

fn env_name(nodes: &[Node]) -> String {
    plain_text(nodes).replace('*', "")
}

#[derive(Default)]
struct Writer {
    out: String,
    /// The last thing written was a command name: a following letter needs a separating space.
    after_cmd: bool,
    /// A comma was followed by a space somewhere: commas separate items, not thousands.
    comma_space: bool,
    /// Where the digit group after the last space joined as a thousands separator starts.
    joined_group: Option<usize>,
}

/// One macro argument: a group's contents, or a single node.
fn arg(nodes: &[Node], i: usize) -> (&[Node], usize) {
    let mut j = i;
    while j < nodes.len() && nodes[j] == Node::Space {
        j += 1;
    }
    match nodes.get(j) {
        Some(Node::Group(g)) => (g.as_slice(), j + 1),
        Some(_) => (std::slice::from_ref(&nodes[j]), j + 1),
        None => (&[], j),
    }
}

fn skip_spaces(nodes: &[Node], mut i: usize) -> usize {
    while i < nodes.len() && nodes[i] == Node::Space {
        i += 1;
    }
    i
}

impl Writer {
    fn push(&mut self, c: char) {
        if self.after_cmd && c.is_ascii_alphabetic() {
            self.out.push(' ');
        }
        self.after_cmd = false;
        self.out.push(c);
    }

    fn push_str(&mut self, s: &str) {
        for c in s.chars() {
            self.push(c);
        }
    }

    fn cmd(&mut self, name: &str) {
        self.after_cmd = false;
        self.out.push('\\');
        self.out.push_str(name);
        self.after_cmd = true;
    }

    fn braced(&mut self, nodes: &[Node]) {
        self.push('{');
        self.seq(nodes);
        self.push('}');
    }

    fn seq(&mut self, nodes: &[Node]) {
        let mut i = 0;
        while i < nodes.len() {
            i = self.node(nodes, i);
        }
    }

    /// Writes the node at `i` (and whatever arguments it consumes); returns the next index.
    fn node(&mut self, nodes: &[Node], i: usize) -> usize {
        match &nodes[i] {
            Node::Space => {
                if self.out.ends_with(',') {
                    self.comma_space = true;
                }
                let digit_at = |k: usize| matches!(nodes.get(k), Some(Node::Char(d)) if d.is_ascii_digit());
                if self.out.ends_with(|c: char| c.is_ascii_digit()) && digit_at(i + 1) {
                    if self.thousands_space(nodes, i) {
                        self.joined_group = Some(self.out.len());
                    } else {
                        // `1 2`, `12 34`: two numbers, not one.
                        self.out.push(' ');
                    }
                }
                i + 1
            }
            Node::Group(g) => {
                if g.iter().any(|n| *n != Node::Space) {
                    self.braced(g);
                }
                i + 1
            }
            Node::Sym(c) => {
                if *c == '!' && self.out.ends_with(',') {
                    // `1,\!000`: a comma tied to the next digit group separates thousands. A space may
                    // follow the `\!` (`11,\! 111`): the `\!` alone already says the comma is no list
                    // separator.
                    let before_digit = self.out[..self.out.len() - 1].ends_with(|d: char| d.is_ascii_digit());
                    let digit_at = |k: usize| matches!(nodes.get(k), Some(Node::Char(d)) if d.is_ascii_digit());
                    let g = skip_spaces(nodes, i + 1);
                    let group_after = (0..3).all(|k| digit_at(g + k)) && !digit_at(g + 3);
                    if before_digit && group_after {
                        self.out.pop();
                    }
                }
                match c {
                    '{' => self.cmd_sym("\\{"),
                    '}' => self.cmd_sym("\\}"),
                    '!' | ',' | ';' | ':' | ' ' | '>' | '%' | '$' => {}
                    '\\' => self.cmd_sym("\\\\"),
                    c => {
                        self.out.push('\\');
                        self.out.push(*c);
                        self.after_cmd = false;
                    }
                }
                i + 1
            }
            Node::Char(c) => self.char_node(nodes, i, *c),
            Node::Cmd(name) => self.command(nodes, i, name),
        }
    }

    /// Whether the space at `i`, between digits, separates thousands: three digits follow it (and no
    /// fourth), and the digits before it are the 1 to 3 that start a number or the group that the
    /// previous such space joined (`12 345 678`, `1 000.5`).
    fn thousands_space(&self, nodes: &[Node], i: usize) -> bool {
        let digit_at = |k: usize| matches!(nodes.get(k), Some(Node::Char(d)) if d.is_ascii_digit());
        if !(1..=3).all(|k| digit_at(i + k)) || digit_at(i + 4) {
            return false;
        }
        let run = self.out.bytes().rev().take_while(u8::is_ascii_digit).count();
        let start = self.out.len() - run;
        let continues = self.joined_group.is_some_and(|g| g + 3 == self.out.len() && start < g);
        let starts = run <= 3 && !self.out[..start].ends_with('.');
        continues || starts
    }

    fn cmd_sym(&mut self, s: &str) {
        self.out.push_str(s);
        self.after_cmd = false;
    }

    fn char_node(&mut self, nodes: &[Node], i: usize, c: char) -> usize {
        // ASCII relations: `<=`, `>=`, and `!=` (the `!` touching the `=`, so `5! = 120` stays a factorial).
        if nodes.get(i + 1) == Some(&Node::Char('=')) {
            let relation = match c {
                '<' => Some("le"),
                '>' => Some("ge"),
                '!' => Some("ne"),
                _ => None,
            };
            if let Some(name) = relation {
                self.cmd(name);
                return i + 2;
            }
        }
        match c {
            '$' | '%' | '~' => i + 1,
            '^' | '_' => {
                let j = skip_spaces(nodes, i + 1);
                if c == '^' {
                    let is_circ = match nodes.get(j) {
                        Some(Node::Cmd(n)) => n == "circ",
                        Some(Node::Group(g)) => {
                            let inner: Vec<&Node> = g.iter().filter(|n| **n != Node::Space).collect();
                            matches!(inner.as_slice(), [Node::Cmd(n)] if n == "circ")
                        }
                        _ => false,
                    };
                    if is_circ {
                        return j + 1;
                    }
                }
                self.push(c);
                // `x^{2}` -> `x^2`, `1010_{2}` -> `1010_2`: a one-character group needs no braces.
                if let Some(Node::Group(g)) = nodes.get(j) {
                    if let [Node::Char(d)] = g.as_slice() {
                        self.push(*d);
                        return j + 1;
                    }
                }
                i + 1
            }
            c => {
                self.push(c);
                i + 1
            }
        }
    }

    fn command(&mut self, nodes: &[Node], i: usize, name: &str) -> usize {
        let next = i + 1;
        match name {
            n if DELIMITER_SIZES.contains(&n) => {
                let j = skip_spaces(nodes, next);
                if nodes.get(j) == Some(&Node::Char('.')) {
                    j + 1
                } else {
                    next
                }
            }
            n if IGNORED_COMMANDS.contains(&n) => next,
            "frac" | "dfrac" | "tfrac" | "cfrac" | "binom" | "dbinom" | "tbinom" => {
                self.cmd(if name.ends_with("frac") { "frac" } else { "binom" });
                let (a, j) = arg(nodes, next);
                let (b, k) = arg(nodes, j);
                self.braced(a);
                self.braced(b);
                k
            }
            "sqrt" => {
                self.cmd("sqrt");
                let mut j = skip_spaces(nodes, next);
                if nodes.get(j) == Some(&Node::Char('[')) {
                    if let Some(close) = (j + 1..nodes.len()).find(|&k| nodes[k] == Node::Char(']')) {
                        self.push('[');
                        self.seq(&nodes[j + 1..close]);
                        self.push(']');
                        j = skip_spaces(nodes, close + 1);
                    }
                }
                // `\sqrt12` means the square root of 12 to a reader, though TeX would take only the `1`.
                let digits = nodes[j.min(nodes.len())..].iter().take_while(|n| matches!(n, Node::Char(c) if c.is_ascii_digit())).count();
                if digits > 0 {
                    self.braced(&nodes[j..j + digits]);
                    return j + digits;
                }
                let (a, k) = arg(nodes, j);
                self.braced(a);
                k
            }
            n if TEXT_COMMANDS.contains(&n) => {
                let (a, j) = arg(nodes, next);
                let text = plain_text(a);
                if matches!(text.as_str(), "or" | "and" | "," | "or," | ", or" | ", and") {
                    self.push(',');
                } else {
                    self.seq(a);
                }
                j
            }
            "mathbb" => {
                let (a, j) = arg(nodes, next);
                if plain_text(a) == "R" {
                    self.push_str("(-");
                    self.cmd("infty");
                    self.push_str(",");
                    self.cmd("infty");
                    self.push(')');
                } else {
                    self.cmd("mathbb");
                    self.braced(a);
                }
                j
            }
            "phantom" | "hphantom" | "vphantom" => arg(nodes, next).1,
            "begin" | "end" => {
                let (a, mut j) = arg(nodes, next);
                let env = env_name(a);
                self.cmd(name);
                if MATRIX_ENVS.contains(&env.as_str()) {
                    self.push_str("{pmatrix}");
                    if name == "begin" && env == "array" {
                        j = arg(nodes, j).1; // the column specification
                    }
                } else {
                    self.braced(a);
                }
                j
            }
            "le" | "leq" | "leqslant" => self.named(next, "le"),
            "ge" | "geq" | "geqslant" => self.named(next, "ge"),
            "ne" | "neq" => self.named(next, "ne"),
            "lt" => self.plain(next, '<'),
            "gt" => self.plain(next, '>'),
            "varnothing" => self.named(next, "emptyset"),
            "infin" | "infinity" => self.named(next, "infty"),
            "lbrace" => {
                self.cmd_sym("\\{");
                next
            }
            "rbrace" => {
                self.cmd_sym("\\}");
                next
            }
            "vert" | "lvert" | "rvert" => self.plain(next, '|'),
            "cdot" | "times" | "ast" => self.named(next, "cdot"),
            "dots" | "ldots" | "cdots" => self.named(next, "dots"),
            other => match ["qquad", "quad"].iter().find_map(|q| other.strip_prefix(q)) {
                // `\quadx_2`: a spacing command run into the letters after it.
                Some(letters) => {
                    self.push_str(letters);
                    next
                }
                None => self.named(next, other),
            },
        }
    }

    fn named(&mut self, next: usize, name: &str) -> usize {
        self.cmd(name);
        next
    }

    fn plain(&mut self, next: usize, c: char) -> usize {
        self.push(c);
        next
    }

    fn finish(self) -> String {
        let mut s = thousands_braces(&self.out);
        loop {
            let t = s.trim_end_matches(['.', ',']).trim();
            let t = strip_outer_braces(t);
            if t.len() == s.len() {
                break;
            }
            s = t.to_string();
        }
        if !self.comma_space && is_grouped_number(&s) {
            s.retain(|c| c != ',');
        }
        plus_infinity(&s)
    }
}

/// `1{,}000` -> `1000` (the `{,}` idiom between digits); any other `{,}` is a comma.
fn thousands_braces(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(p) = rest.find("{,}") {
        let before = &rest[..p];
        out.push_str(before);
        let after = &rest[p + 3..];
        let digit_before = out.ends_with(|d: char| d.is_ascii_digit());
        let b = after.as_bytes();
        let group_after = b.len() >= 3 && b[..3].iter().all(u8::is_ascii_digit) && !b.get(3).is_some_and(u8::is_ascii_digit);
        if !(digit_before && group_after) {
            out.push(',');
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `{x}` -> `x` when the first brace closes at the very end (not `{a}{b}`).
fn strip_outer_braces(s: &str) -> &str {
    if !s.starts_with('{') || !s.ends_with('}') {
        return s;
    }
    let b = s.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return if i == b.len() - 1 { &s[1..s.len() - 1] } else { s };
                }
            }
            _ => {}
        }
        i += 1;
    }
    s
}

/// `-1,234,567.5`: digits in groups of three separated by commas.
fn is_grouped_number(s: &str) -> bool {
    let s = s.strip_prefix('-').unwrap_or(s);
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s, None),
    };
    if frac.is_some_and(|f| f.is_empty() || !f.bytes().all(|c| c.is_ascii_digit())) {
        return false;
    }
    let mut groups = int.split(',');
    let first = groups.next().unwrap_or("");
    let rest: Vec<&str> = groups.collect();
    !rest.is_empty()
        && (1..=3).contains(&first.len())
        && !first.starts_with('0')
        && first.bytes().all(|c| c.is_ascii_digit())
        && rest.iter().all(|g| g.len() == 3 && g.bytes().all(|c| c.is_ascii_digit()))
}

/// `1,22` -> `1.22`: a normalised answer that is one number written with a decimal comma, where the
/// comma cannot separate thousands (the digits after it are not a group of three, or those before it
/// start with 0: `1000,99`, `0,111`). `None` for anything else.
pub fn decimal_comma(s: &str) -> Option<String> {
    let unsigned = s.strip_prefix('-').unwrap_or(s);
    let (int, frac) = unsigned.split_once(',')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit());
    if !digits(int) || !digits(frac) || is_grouped_number(unsigned) {
        return None;
    }
    Some(format!("{}{int}.{frac}", &s[..s.len() - unsigned.len()]))
}

/// A number written with a decimal point: `1.22`, `-.5`.
pub fn is_point_decimal(s: &str) -> bool {
    let unsigned = s.strip_prefix('-').unwrap_or(s);
    unsigned.split_once('.').is_some_and(|(int, frac)| {
        int.bytes().all(|c| c.is_ascii_digit()) && !frac.is_empty() && frac.bytes().all(|c| c.is_ascii_digit())
    })
}

/// `+\infty` is `\infty` where the plus is a sign (at the start, after a bracket or comma).
fn plus_infinity(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(p) = rest.find("+\\infty") {
        let before = &rest[..p];
        let is_sign = match out.chars().chain(before.chars()).next_back() {
            None => true,
            Some(c) => matches!(c, '(' | '[' | ','),
        };
        out.push_str(before);
        if !is_sign {
            out.push('+');
        }
        out.push_str("\\infty");
        rest = &rest[p + "+\\infty".len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::normalize;

    fn n(s: &str) -> String {
        normalize(s).unwrap()
    }

    #[test]
    fn fractions_roots_and_spacing() {
        assert_eq!(n(r"\dfrac{1}{2}"), r"\frac{1}{2}");
        assert_eq!(n(r"\tfrac 94"), r"\frac{9}{4}");
        assert_eq!(n(r"\frac12"), r"\frac{1}{2}");
        assert_eq!(n(r"\frac1{72}"), r"\frac{1}{72}");
        assert_eq!(n(r"\sqrt2"), r"\sqrt{2}");
        assert_eq!(n(r"\sqrt 10"), r"\sqrt{10}");
        assert_eq!(n(r"\sqrt[3]{4}"), r"\sqrt[3]{4}");
        assert_eq!(n(r"10 \sqrt{2}"), r"10\sqrt{2}");
        assert_eq!(n(r"\left( 3, \frac{\pi}{2} \right)"), r"(3,\frac{\pi}{2})");
        assert_eq!(n(r"135,\!000"), "135000");
        assert_eq!(n(r"\dfrac{1}{29,\!322,\!216}"), r"\frac{1}{29322216}");
        assert_eq!(n(r"\frac{2469}{20{,}000}"), r"\frac{2469}{20000}");
        assert_eq!(n(r"(1{,}2)"), "(1,2)");
        assert_eq!(n(r"(1,\!2)"), "(1,2)");
        assert_eq!(n(r"1{,}000"), "1000");
        assert_eq!(n("1, 000"), "1,000");
        assert_eq!(n("12 345 678"), "12345678");
        assert_eq!(n("1 000.5"), "1000.5");
        assert_eq!(n("1 00"), "1 00");
        assert_eq!(n("12 34"), "12 34");
        assert_eq!(n("1234 567"), "1234 567");
        assert_eq!(n("1 0000"), "1 0000");
        assert_eq!(n("0.123 456"), "0.123 456");
        assert_eq!(n(r"\pi r"), r"\pi r");
        assert_eq!(n(r"a=1,\quadb=2"), "a=1,b=2");
        assert_eq!(n(r"\qquadx"), "x");
    }

    #[test]
    fn units_degrees_percent_and_text() {
        assert_eq!(n(r"5\text{ cm}"), "5");
        assert_eq!(n(r"5\text{ cm}^2"), "5");
        assert_eq!(n(r"480 + 480\sqrt{3}\text{ feet}"), r"480+480\sqrt{3}");
        assert_eq!(n(r"125\textnormal{ miles}"), "125");
        assert_eq!(n("8 cm"), "8");
        assert_eq!(n(r"7\text{ hours}."), "7");
        assert_eq!(n("18 apples"), "18");
        assert_eq!(n(r"\frac{1}{2} cup"), r"\frac{1}{2}");
        assert_eq!(n("5 square feet"), "5");
        assert_eq!(n("New York"), "NewYork");
        assert_eq!(n("2 x"), "2x");
        assert_eq!(n("x = 2 or x = 3"), "x=2,x=3");
        assert_eq!(n("1 and 2"), "1,2");
        assert_eq!(n("(1,2)or(2,1)"), "(1,2),(2,1)");
        assert_eq!(n("$1$and$2$"), "1,2");
        assert_eq!(n("x=2orx=3"), "x=2orx=3");
        assert_eq!(n(r"75^\circ"), "75");
        assert_eq!(n(r"22.5^{\circ}"), "22.5");
        assert_eq!(n(r"64\%"), "64");
        assert_eq!(n(r"\$306,\!956.63"), "306956.63");
        assert_eq!(n(r"\text{(A)}"), "(A)");
        assert_eq!(n(r"\textbf{(B)}"), "(B)");
        assert_eq!(n(r"\text{Wednesday}"), "Wednesday");
        assert_eq!(n(r"-2 \text{ or } -12"), "-2,-12");
        assert_eq!(n(r"\mbox{May}"), "May");
    }

    #[test]
    fn sets_matrices_infinity() {
        assert_eq!(n(r"\{1\pm\sqrt{5},-2\}"), r"\{1\pm\sqrt{5},-2\}");
        assert_eq!(n(r"\left\{ 1, 2 \right\}"), r"\{1,2\}");
        assert_eq!(n(r"\mathbb{R}"), r"(-\infty,\infty)");
        assert_eq!(n(r"[0, +\infty)"), r"[0,\infty)");
        assert_eq!(n(r"\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}."), r"\begin{pmatrix}1&2\\3&4\end{pmatrix}");
        assert_eq!(n(r"\begin{array}{cc} 1 & 2 \end{array}"), r"\begin{pmatrix}1&2\end{pmatrix}");
        assert_eq!(n("{5}"), "5");
        assert_eq!(n("{a}{b}"), "{a}{b}");
        assert_eq!(n(r"x^{2}"), "x^2");
        assert_eq!(n(r"20412_{5}"), "20412_5");
        assert_eq!(n(r"\left. x \right|"), "x|");
    }

    #[test]
    fn decimal_commas() {
        use super::{decimal_comma, is_point_decimal};
        assert_eq!(decimal_comma("1,22").as_deref(), Some("1.22"));
        assert_eq!(decimal_comma("-1000,99").as_deref(), Some("-1000.99"));
        assert_eq!(decimal_comma("0,111").as_deref(), Some("0.111"));
        for s in ["1,220", "1,2,3", "1,", ",5", "x,2", "12"] {
            assert_eq!(decimal_comma(s), None, "{s}");
        }
        assert_eq!(n("0,111"), "0,111");
        assert!(is_point_decimal("1.22") && is_point_decimal("-.5"));
        assert!(!is_point_decimal("122") && !is_point_decimal("1.") && !is_point_decimal("1.2.3"));
    }

    #[test]
    fn relations_and_spaced_separators() {
        assert_eq!(n("x <= 2"), r"x\le2");
        assert_eq!(n("t>=0"), r"t\ge0");
        assert_eq!(n("x != 3"), r"x\ne3");
        assert_eq!(n("5! = 120"), "5!=120");
        assert_eq!(n("a \u{2260} 0"), r"a\ne0");
        assert_eq!(n("x \u{2a7d} 4"), r"x\le4");
        assert_eq!(n(r"11,\! 111,\! 100"), "11111100");
        assert_eq!(n(r"(1,\! 2)"), "(1,2)");
    }
}
