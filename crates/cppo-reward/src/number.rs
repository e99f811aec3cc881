//! Decimal numbers as they appear in word-problem answers: `1,000`, `$18`, `18%`, `-3.50`, `.5`.
//!
//! Numbers are kept as exact decimal digit strings, so `1000` = `1,000` = `1000.0` and no float rounding
//! can make two different answers equal.

use std::borrow::Cow;
use std::fmt;

use crate::math::value::gcd;

/// An exact decimal: sign, integer digits without leading zeros, fraction digits without trailing zeros.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Decimal {
    negative: bool,
    int: String,
    frac: String,
}

impl Decimal {
    fn new(negative: bool, int: &str, frac: &str) -> Self {
        let int = int.trim_start_matches('0');
        let frac = frac.trim_end_matches('0');
        let zero = int.is_empty() && frac.is_empty();
        Decimal { negative: negative && !zero, int: int.to_string(), frac: frac.to_string() }
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.negative {
            f.write_str("-")?;
        }
        f.write_str(if self.int.is_empty() { "0" } else { &self.int })?;
        if !self.frac.is_empty() {
            write!(f, ".{}", self.frac)?;
        }
        Ok(())
    }
}

fn is_minus(c: char) -> bool {
    c == '-' || c == '\u{2212}'
}

/// Parses a string that is one number and nothing else, up to decoration: surrounding whitespace, a
/// currency sign (`$`, `\$`), a trailing `%` / `\%` or full stop, thousands separators (`1,000`, `1{,}000`,
/// `1,\!000`).
pub fn parse_number(s: &str) -> Option<Decimal> {
    let cleaned = s.replace("{,}", ",").replace("\\!", "").replace("\\$", "$").replace("\\%", "%");
    let mut t = cleaned.trim();
    t = t.trim_end_matches('.').trim_end();
    t = t.strip_suffix('%').unwrap_or(t).trim_end();
    let mut negative = false;
    if let Some(c) = t.chars().next().filter(|&c| is_minus(c)) {
        negative = true;
        t = t[c.len_utf8()..].trim_start();
    }
    t = t.strip_prefix('$').unwrap_or(t).trim_start();
    if !negative {
        if let Some(c) = t.chars().next().filter(|&c| is_minus(c)) {
            negative = true;
            t = t[c.len_utf8()..].trim_start();
        }
    }
    let (found, len) = scan_number(t.as_bytes(), 0)?;
    if len != t.len() {
        return None;
    }
    Some(Decimal { negative: negative && found.to_string() != "0", ..found })
}

/// Scans an unsigned number starting at `start`: digits with optional `,ddd` groups, then an optional
/// `.digits` fraction; or `.digits`. Returns the number and the end position.
fn scan_number(b: &[u8], start: usize) -> Option<(Decimal, usize)> {
    let mut i = start;
    let mut int = String::new();
    while i < b.len() && b[i].is_ascii_digit() {
        int.push(b[i] as char);
        i += 1;
    }
    if !int.is_empty() && int.len() <= 3 {
        // Thousands groups: a comma followed by exactly three digits.
        while i < b.len()
            && b[i] == b','
            && b.get(i + 1..i + 4).is_some_and(|g| g.iter().all(u8::is_ascii_digit))
            && !b.get(i + 4).is_some_and(u8::is_ascii_digit)
        {
            int.extend(b[i + 1..i + 4].iter().map(|&c| c as char));
            i += 4;
        }
    }
    let mut frac = String::new();
    if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            frac.push(b[i] as char);
            i += 1;
        }
    }
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    Some((Decimal::new(false, &int, &frac), i))
}

/// Every number in running text, in order. A `-` is a sign only where it cannot be a binary minus (not
/// after a letter, digit or closing bracket), so `10-5` holds 10 and 5, while `is -5` holds -5. Digits
/// inside a word (`AZYUK2A`, `H2O`) are no number.
pub fn numbers_in(text: &str) -> Vec<Decimal> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = b[i].is_ascii_digit() || (b[i] == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit));
        if starts && inside_word(b, i) {
            i = skip_word_digits(b, i);
            continue;
        }
        // A digit run glued to a preceding digit is never a fresh start (we resume after a number).
        if starts {
            if let Some((mut d, end)) = scan_number(b, i) {
                if sign_before(text, i) {
                    d.negative = !(d.int.is_empty() && d.frac.is_empty());
                }
                out.push(d);
                i = end;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// Whether the digit (or decimal point) at byte `i` continues a word: a letter touches it on the left
/// (`AZYUK2A`, `H2O`, `B12`), and that letter does not end a LaTeX command (`\approx18` is 18). A number
/// followed by letters (`5th`, `18km`) is still a number.
fn inside_word(b: &[u8], i: usize) -> bool {
    if i == 0 || !b[i - 1].is_ascii_alphabetic() {
        return false;
    }
    let mut j = i - 1;
    while j > 0 && b[j - 1].is_ascii_alphabetic() {
        j -= 1;
    }
    !(j > 0 && b[j - 1] == b'\\')
}

/// Past the digits (and decimal points) of a word's digit run starting at `i`.
fn skip_word_digits(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
        i += 1;
    }
    i
}

/// Joins digit groups whose separator is not a plain comma: `1,\! 000` (`,\!` and spaces, as MATH
/// writes thousands), a non-breaking or thin space (`2 500`), and, when `plain_spaces`, an ordinary
/// space (`1 000`: only inside an answer span, since in running text `2 100-dollar bills` are two
/// numbers). A group is exactly three digits after a first group of one to three, so `1 00` and
/// `12 3456` are left apart. Linear; borrows when there is nothing to join.
pub fn join_digit_groups(text: &str, plain_spaces: bool) -> Cow<'_, str> {
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        let fresh = b[i].is_ascii_digit() && (i == 0 || !(b[i - 1].is_ascii_digit() || b[i - 1] == b'.' || b[i - 1] == b','));
        if !fresh {
            i += 1;
            continue;
        }
        let mut end = i;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
        let mut groups = Vec::new();
        let mut k = end;
        if end - i <= 3 {
            while let Some(g) = separator_end(b, k, plain_spaces) {
                let three = b.get(g..g + 3).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
                if !three || b.get(g + 3).is_some_and(u8::is_ascii_digit) {
                    break;
                }
                groups.push(g..g + 3);
                k = g + 3;
            }
        }
        if groups.is_empty() {
            i = end;
            continue;
        }
        let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
        o.push_str(&text[copied..end]);
        for g in groups {
            o.push_str(&text[g]);
        }
        copied = k;
        i = k;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut o) => {
            o.push_str(&text[copied..]);
            Cow::Owned(o)
        }
    }
}

/// Where a digit-group separator starting at `k` ends (see [`join_digit_groups`]).
fn separator_end(b: &[u8], k: usize, plain_spaces: bool) -> Option<usize> {
    const WIDE: [&[u8]; 3] = ["\u{a0}".as_bytes(), "\u{2009}".as_bytes(), "\u{202f}".as_bytes()];
    let rest = b.get(k..)?;
    if rest.starts_with(b",\\!") {
        return Some(k + 3 + rest[3..].iter().take_while(|&&c| c == b' ').count());
    }
    if plain_spaces && rest.first() == Some(&b' ') {
        return Some(k + 1);
    }
    WIDE.iter().find(|w| rest.starts_with(w)).map(|w| k + w.len())
}

/// Whether the number starting at byte `i` carries a minus sign written just before it (`-5`, `$-5`,
/// `- 5` is not).
fn sign_before(text: &str, i: usize) -> bool {
    let before = &text[..i];
    let before = before.strip_suffix('$').unwrap_or(before);
    let Some(c) = before.chars().next_back() else { return false };
    if !is_minus(c) {
        return false;
    }
    let rest = &before[..before.len() - c.len_utf8()];
    match rest.chars().next_back() {
        None => true,
        Some(p) => !(p.is_alphanumeric() || p == ')' || p == ']' || p == '}'),
    }
}

/// The last number in the text, if any.
pub fn last_number(text: &str) -> Option<Decimal> {
    numbers_in(text).pop()
}

/// The first number in the text, if any.
pub fn first_number(text: &str) -> Option<Decimal> {
    numbers_in(text).into_iter().next()
}

/// A number read from an answer span: a finite decimal, or a fraction that has none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// Every integer and decimal, and every fraction whose decimal expansion ends (`\frac{1}{2}` = 0.5).
    Finite(Decimal),
    /// A reduced fraction whose decimal expansion never ends (`1/3`), or one over zero: it equals no
    /// decimal, so it is never a correct GSM8K answer.
    Ratio { negative: bool, num: u128, den: u128 },
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Finite(d) => d.fmt(f),
            Value::Ratio { negative, num, den } => write!(f, "{}{num}/{den}", if *negative { "-" } else { "" }),
        }
    }
}

impl Decimal {
    /// The digits as an integer and the power of ten that divides it (`3.25` is (325, 2)); `None` past
    /// 38 digits.
    fn scaled(&self) -> Option<(u128, u32)> {
        let digits = format!("{}{}", self.int, self.frac);
        let m = if digits.is_empty() { 0 } else { digits.parse::<u128>().ok()? };
        Some((m, u32::try_from(self.frac.len()).ok()?))
    }

    fn from_scaled(negative: bool, m: u128, scale: u32) -> Decimal {
        let digits = format!("{m:0>width$}", width = scale as usize + 1);
        let (int, frac) = digits.split_at(digits.len() - scale as usize);
        Decimal::new(negative, int, frac)
    }
}

/// `a / b` exactly: a [`Value::Finite`] when the quotient has a finite decimal expansion, else the
/// reduced [`Value::Ratio`]. `None` when the parts are too long to compute with (over 38 digits).
pub fn quotient(a: &Decimal, b: &Decimal) -> Option<Value> {
    let negative = a.negative != b.negative;
    let ((ma, sa), (mb, sb)) = (a.scaled()?, b.scaled()?);
    // a / b = (ma * 10^sb) / (mb * 10^sa).
    let num = ma.checked_mul(10u128.checked_pow(sb)?)?;
    let den = mb.checked_mul(10u128.checked_pow(sa)?)?;
    let g = gcd(num, den).max(1);
    let (num, den) = (num / g, den / g);
    let negative = negative && num != 0;
    if den == 0 {
        return Some(Value::Ratio { negative, num, den });
    }
    // Finite exactly when den = 2^p 5^q; then a / b = num * (10^max(p, q) / den) / 10^max(p, q).
    let (mut rest, mut p2, mut p5) = (den, 0u32, 0u32);
    while rest % 2 == 0 {
        rest /= 2;
        p2 += 1;
    }
    while rest % 5 == 0 {
        rest /= 5;
        p5 += 1;
    }
    if rest != 1 {
        return Some(Value::Ratio { negative, num, den });
    }
    let scale = p2.max(p5);
    let m = num.checked_mul(10u128.checked_pow(scale)? / den)?;
    Some(Value::Finite(Decimal::from_scaled(negative, m, scale)))
}

/// What an answer span (the content of `<answer>` or `\boxed{}`) states.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reading {
    /// Exactly one number.
    One(Value),
    /// No number at all (`eighteen`).
    NoNumber,
    /// More than one number (`18 - 3`, `5 hours 30 minutes`), or a `\frac` / `\sqrt` that is not a plain
    /// number: not a single answer.
    NotSingle,
}

/// Longest `\frac` argument read as a number; longer arguments are not plain numbers in an answer.
const MAX_FRAC_ARG: usize = 64;

/// Reads an answer span as one number (see [`Reading`]). Only the part after the last `=` counts
/// (`3 \times 6 = 18`). Decoration is ignored: words (`18 apples`, `The answer is 18.`), `$`, `\$`, `%`,
/// `\%`, `\text{...}` and other commands, braces, `\!`, `\,` and spaces, unit exponents (`\text{m}^2`,
/// `ft^{2}`), digits inside words (`C4`). Thousands separators join groups (`1,000`, `1{,}000`,
/// `1,\!000`, `1,\! 000`, `1\,000`, `1 000`). A fraction is
/// one number: `\frac{a}{b}`, `\dfrac`, `\tfrac`, `\frac12`, `a/b`, `a / b`, each part a plain number. A
/// minus is a sign where it cannot be a binary minus (as in [`numbers_in`]).
pub fn read_answer(span: &str) -> Reading {
    let span = span.rfind('=').map_or(span, |p| &span[p + 1..]);
    let span = join_digit_groups(span, true);
    let cleaned = span.replace("{,}", ",").replace(",\\!", ",").replace("\\,", ",").replace("\\!", "").replace("\\$", "$");
    let text = cleaned.as_str();
    let b = text.as_bytes();
    let mut found: Option<Value> = None;
    let mut i = 0;
    while i < b.len() {
        let value = if b[i] == b'\\' {
            let name_end = i + 1 + b[i + 1..].iter().take_while(|c| c.is_ascii_alphabetic()).count();
            match &text[i + 1..name_end] {
                "frac" | "dfrac" | "tfrac" => match latex_fraction(text, name_end) {
                    Some((v, end)) => {
                        let v = with_sign(v, sign_before(text, i));
                        i = end;
                        v
                    }
                    None => return Reading::NotSingle,
                },
                "sqrt" => return Reading::NotSingle,
                _ => {
                    i = name_end.max(i + 1);
                    continue;
                }
            }
        } else if b[i] == b'^' && unit_before(text, i) {
            i = skip_exponent(b, i + 1);
            continue;
        } else if b[i].is_ascii_digit() || (b[i] == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            if inside_word(b, i) {
                i = skip_word_digits(b, i);
                continue;
            }
            let Some((d, end)) = scan_number(b, i) else { return Reading::NotSingle };
            let negative = sign_before(text, i);
            let (v, end) = match slash_denominator(b, end) {
                Some((den, end2)) => match quotient(&d, &den) {
                    Some(v) => (v, end2),
                    None => return Reading::NotSingle,
                },
                None => (Value::Finite(d), end),
            };
            i = end;
            with_sign(v, negative)
        } else {
            i += 1;
            continue;
        };
        if found.replace(value).is_some() {
            return Reading::NotSingle;
        }
    }
    found.map_or(Reading::NoNumber, Reading::One)
}

fn with_sign(v: Value, minus: bool) -> Value {
    if !minus {
        return v;
    }
    match v {
        Value::Finite(d) => Value::Finite(Decimal::new(!d.negative, &d.int, &d.frac)),
        Value::Ratio { negative, num, den } => Value::Ratio { negative: !negative && num != 0, num, den },
    }
}

/// The two arguments of a `\frac` whose name ends at `at`, each a plain number: `{3}{4}`, `{-1}{2}`,
/// `12` (two one-digit arguments). Returns the quotient and where the command ends.
fn latex_fraction(text: &str, at: usize) -> Option<(Value, usize)> {
    let (num, at) = frac_argument(text, at)?;
    let (den, at) = frac_argument(text, at)?;
    Some((quotient(&num, &den)?, at))
}

fn frac_argument(text: &str, at: usize) -> Option<(Decimal, usize)> {
    let b = text.as_bytes();
    let at = at + b[at..].iter().take_while(|&&c| c == b' ').count();
    match b.get(at)? {
        b'{' => {
            let len = b[at + 1..].iter().take(MAX_FRAC_ARG).position(|&c| c == b'}' || c == b'{')?;
            let end = at + 1 + len;
            (b[end] == b'}').then_some(())?;
            Some((parse_number(&text[at + 1..end])?, end + 1))
        }
        c if c.is_ascii_digit() => Some((Decimal::new(false, &text[at..at + 1], ""), at + 1)),
        _ => None,
    }
}

/// After a number ending at `at`: `/ d` or `/d` with d a plain unsigned number, read as a denominator.
fn slash_denominator(b: &[u8], at: usize) -> Option<(Decimal, usize)> {
    let skip = |i: usize| i + b[i..].iter().take_while(|&&c| c == b' ').count();
    let slash = skip(at);
    (b.get(slash) == Some(&b'/')).then_some(())?;
    let start = skip(slash + 1);
    let starts = b.get(start).is_some_and(u8::is_ascii_digit) || (b.get(start) == Some(&b'.') && b.get(start + 1).is_some_and(u8::is_ascii_digit));
    if !starts {
        return None;
    }
    scan_number(b, start)
}

/// Whether the `^` at byte `i` raises a unit (`m^2`, `\text{ft}^{2}`): it follows a letter, or a closing
/// brace right after a letter.
fn unit_before(text: &str, i: usize) -> bool {
    let before = text[..i].trim_end().as_bytes();
    match before.last() {
        Some(c) if c.is_ascii_alphabetic() => true,
        Some(b'}') => before[..before.len() - 1].iter().rev().find(|&&c| c != b' ').is_some_and(u8::is_ascii_alphabetic),
        _ => false,
    }
}

/// Past a unit exponent starting at `i`: digits, or a brace group of up to a few characters.
fn skip_exponent(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(b'{') => b[i + 1..].iter().take(8).position(|&c| c == b'}').map_or(i, |p| i + 2 + p),
        Some(c) if c.is_ascii_digit() => i + 1,
        _ => i,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> String {
        parse_number(s).map(|d| d.to_string()).unwrap_or_else(|| "none".into())
    }

    #[test]
    fn whole_numbers_parse_in_many_formats() {
        for s in ["1000", "1,000", "1000.0", "1000.000", "$1,000", "\\$1000", "1000%", "1000.", " 1000 ", "01000"] {
            assert_eq!(n(s), "1000", "{s}");
        }
        assert_eq!(n("1{,}000"), "1000");
        assert_eq!(n("1,\\!000,\\!000"), "1000000");
        assert_eq!(n("-5"), "-5");
        assert_eq!(n("\u{2212}5"), "-5");
        assert_eq!(n("-$5"), "-5");
        assert_eq!(n("$-5"), "-5");
        assert_eq!(n(".5"), "0.5");
        assert_eq!(n("-0"), "0");
        assert_eq!(n("3.50"), "3.5");
    }

    #[test]
    fn non_numbers_do_not_parse() {
        for s in ["", "abc", "1,00", "12 apples", "1.2.3", "--5", "1,0000", "$", "."] {
            assert_eq!(n(s), "none", "{s}");
        }
    }

    #[test]
    fn quotients_are_exact() {
        let q = |a: &str, b: &str| quotient(&parse_number(a).unwrap(), &parse_number(b).unwrap()).map(|v| v.to_string());
        assert_eq!(q("1", "2").as_deref(), Some("0.5"));
        assert_eq!(q("-3", "8").as_deref(), Some("-0.375"));
        assert_eq!(q("2.5", "0.05").as_deref(), Some("50"));
        assert_eq!(q("36", "2").as_deref(), Some("18"));
        assert_eq!(q("2", "-6").as_deref(), Some("-1/3"));
        assert_eq!(q("0", "-7").as_deref(), Some("0"));
        assert_eq!(q("5", "0").as_deref(), Some("1/0"));
        assert_eq!(q(&"9".repeat(40), "3"), None);
    }

    #[test]
    fn answer_spans_read_as_one_number() {
        let r = |s: &str| match read_answer(s) {
            Reading::One(v) => v.to_string(),
            other => format!("{other:?}"),
        };
        assert_eq!(r("The answer is $1{,}000.00."), "1000");
        assert_eq!(r("3 \\times 6 = 18 \\text{ m}^2"), "18");
        assert_eq!(r("-\\dfrac{3}{4}"), "-0.75");
        assert_eq!(r("eighteen"), "NoNumber");
        assert_eq!(r("18 - 3"), "NotSingle");
        assert_eq!(r("\\frac{a}{2}"), "NotSingle");
    }

    #[test]
    fn numbers_in_text_and_signs() {
        let all: Vec<String> = numbers_in("10-5=5, it is -3 or $-4 and 1,234.5 then 7.").iter().map(|d| d.to_string()).collect();
        assert_eq!(all, ["10", "5", "5", "-3", "-4", "1234.5", "7"]);
        assert_eq!(last_number("The answer is 18 apples.").unwrap().to_string(), "18");
        assert_eq!(first_number("#### 1,000\n").unwrap().to_string(), "1000");
        assert!(last_number("no digits").is_none());
        assert_eq!(numbers_in("x-2").iter().map(|d| d.to_string()).collect::<Vec<_>>(), ["2"]);
        let words: Vec<String> = numbers_in("AZYUK2A H2O 5th 18km \\approx18 x2.5").iter().map(|d| d.to_string()).collect();
        assert_eq!(words, ["5", "18", "18"]);
    }

    #[test]
    fn digit_groups_with_other_separators() {
        let j = |s: &str, spaces: bool| join_digit_groups(s, spaces).into_owned();
        assert_eq!(j(r"11,\! 111,\! 100 and 1,\!000", false), "11111100 and 1000");
        assert_eq!(j("2\u{202f}500 or 3\u{a0}000\u{a0}000", false), "2500 or 3000000");
        assert_eq!(j("1 000 and 2 100-dollar bills", false), "1 000 and 2 100-dollar bills");
        assert_eq!(j("1 000.5 and 12 500", true), "1000.5 and 12500");
        assert_eq!(j("1 00, 1234 567, 1 0000, 0.123 456", true), "1 00, 1234 567, 1 0000, 0.123 456");
        assert!(matches!(join_digit_groups("no groups 12 34", true), Cow::Borrowed(_)));
    }
}
