//! Decimal numbers as they appear in word-problem answers: `1,000`, `$18`, `18%`, `-3.50`, `.5`.
//!
//! Numbers are kept as exact decimal digit strings, so `1000` = `1,000` = `1000.0` and no float rounding
//! can make two different answers equal.

use std::fmt;

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
/// after a letter, digit or closing bracket), so `10-5` holds 10 and 5, while `is -5` holds -5.
pub fn numbers_in(text: &str) -> Vec<Decimal> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = b[i].is_ascii_digit() || (b[i] == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit));
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
    fn numbers_in_text_and_signs() {
        let all: Vec<String> = numbers_in("10-5=5, it is -3 or $-4 and 1,234.5 then 7.").iter().map(|d| d.to_string()).collect();
        assert_eq!(all, ["10", "5", "5", "-3", "-4", "1234.5", "7"]);
        assert_eq!(last_number("The answer is 18 apples.").unwrap().to_string(), "18");
        assert_eq!(first_number("#### 1,000\n").unwrap().to_string(), "1000");
        assert!(last_number("no digits").is_none());
        assert_eq!(numbers_in("x-2").iter().map(|d| d.to_string()).collect::<Vec<_>>(), ["2"]);
    }
}
