//! Matrices written as arithmetic inside one answer: sums, differences, scalar multiples and products
//! (`\begin{pmatrix}1\\2\end{pmatrix} + 2\begin{pmatrix}3\\4\end{pmatrix}`), read as the matrix they
//! make. Cells are kept as text (`(1)+(2)*(3)`), so that symbolic entries stay symbolic and each cell
//! is then compared like any value.

use crate::limits::{MAX_ANSWER_BYTES, MAX_ITEMS};

use super::expr;
use super::structure::{balanced, delta, split_top, units};

const OPEN: &str = "\\begin{pmatrix}";
const CLOSE: &str = "\\end{pmatrix}";

/// Longest the cells of a computed matrix may get, in all (a product of two n×n matrices writes n
/// products per cell).
const MAX_CELL_BYTES: usize = 4 * MAX_ANSWER_BYTES;

/// Most products one matrix product may write (16×16 times 16×16): larger ones are not read.
const MAX_PRODUCT_TERMS: usize = 4096;

type Cells = Vec<Vec<String>>;

/// The cells of one `\begin{pmatrix}...\end{pmatrix}` (the whole of `s`), trailing empty rows dropped.
pub(crate) fn cells(s: &str) -> Option<Vec<Vec<&str>>> {
    let inner = s.strip_prefix(OPEN)?.strip_suffix(CLOSE)?;
    let us = units(inner);
    if !balanced(inner, &us) {
        return None;
    }
    let mut rows: Vec<&str> = split_top(inner, &us, "\\\\");
    while rows.len() > 1 && rows.last().is_some_and(|r| r.trim().is_empty()) {
        rows.pop();
    }
    if rows.len() > MAX_ITEMS {
        return None;
    }
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let cells = split_top(row, &units(row), "&");
        if cells.len() > MAX_ITEMS {
            return None;
        }
        out.push(cells);
    }
    Some(out)
}

/// The matrix that a sum of products of matrices and scalars makes; `None` unless `s` (normalised) is
/// such an expression with at least one operation, and every sum and product has matching dimensions.
pub fn arithmetic(s: &str) -> Option<Cells> {
    let us = units(s);
    if !balanced(s, &us) {
        return None;
    }
    // Terms between top-level `+` and `-`, with their signs.
    let mut terms: Vec<(bool, &str)> = Vec::new();
    let (mut depth, mut start, mut negative) = (0i32, 0usize, false);
    for &(a, b) in &us {
        let u = &s[a..b];
        if depth == 0 && (u == "+" || u == "-") {
            if !s[start..a].trim().is_empty() {
                terms.push((negative, &s[start..a]));
            } else if !terms.is_empty() {
                return None;
            }
            negative = u == "-";
            start = b;
        }
        depth += delta(u);
    }
    terms.push((negative, &s[start..]));
    let mut total: Option<Cells> = None;
    let mut operations = terms.len() - 1;
    for (negative, text) in terms {
        let (product, products) = term(text)?;
        operations += products;
        total = Some(match total {
            None if negative => scale("-1", &product),
            None => product,
            Some(sum) => add(&sum, &product, if negative { "-" } else { "+" })?,
        });
    }
    let total = total?;
    let size: usize = total.iter().flatten().map(String::len).sum();
    (operations > 0 && size <= MAX_CELL_BYTES).then_some(total)
}

/// One term: matrices and scalar factors, multiplied in order; and how many products it holds.
fn term(text: &str) -> Option<(Cells, usize)> {
    let mut scalars: Vec<&str> = Vec::new();
    let mut matrices: Vec<Cells> = Vec::new();
    let mut rest = text;
    while let Some(p) = rest.find(OPEN) {
        push_scalar(&mut scalars, &rest[..p]);
        let span = matrix_span(&rest[p..])?;
        let m = cells(&rest[p..p + span])?;
        matrices.push(m.iter().map(|row| row.iter().map(|c| c.trim().to_string()).collect()).collect());
        rest = &rest[p + span..];
    }
    push_scalar(&mut scalars, rest);
    // A factor that is no expression (`[`, a word) makes this no arithmetic.
    if scalars.iter().any(|c| expr::parse(c).is_err()) {
        return None;
    }
    let products = (matrices.len() + scalars.len()).checked_sub(1)?;
    let mut it = matrices.into_iter();
    let mut m = it.next()?;
    for next in it {
        m = multiply(&m, &next)?;
        if m.iter().flatten().map(String::len).sum::<usize>() > MAX_CELL_BYTES {
            return None;
        }
    }
    for c in scalars {
        m = scale(c, &m);
    }
    Some((m, products))
}

/// A scalar factor between matrices, without the `\cdot` or `*` that joins it to them.
fn push_scalar<'a>(scalars: &mut Vec<&'a str>, text: &'a str) {
    let mut t = text.trim();
    loop {
        let before = t;
        for op in ["\\cdot", "*"] {
            t = t.strip_prefix(op).unwrap_or(t).trim();
            t = t.strip_suffix(op).unwrap_or(t).trim();
        }
        if t == before {
            break;
        }
    }
    if !t.is_empty() {
        scalars.push(t);
    }
}

/// The length of the matrix that starts `s` (which starts with [`OPEN`]), through its [`CLOSE`].
fn matrix_span(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < s.len() {
        if s[i..].starts_with(OPEN) {
            depth += 1;
            i += OPEN.len();
        } else if s[i..].starts_with(CLOSE) {
            depth = depth.checked_sub(1)?;
            i += CLOSE.len();
            if depth == 0 {
                return Some(i);
            }
        } else {
            i += s[i..].chars().next()?.len_utf8();
        }
    }
    None
}

fn dims(m: &Cells) -> Option<(usize, usize)> {
    let cols = m.first()?.len();
    m.iter().all(|r| r.len() == cols).then_some((m.len(), cols))
}

fn add(a: &Cells, b: &Cells, op: &str) -> Option<Cells> {
    (dims(a)? == dims(b)?).then(|| a.iter().zip(b).map(|(x, y)| x.iter().zip(y).map(|(p, q)| format!("({p}){op}({q})")).collect()).collect())
}

fn scale(c: &str, m: &Cells) -> Cells {
    m.iter().map(|row| row.iter().map(|x| format!("({c})*({x})")).collect()).collect()
}

fn multiply(a: &Cells, b: &Cells) -> Option<Cells> {
    let ((n, k), (k2, p)) = (dims(a)?, dims(b)?);
    if k != k2 || n.saturating_mul(p).saturating_mul(k) > MAX_PRODUCT_TERMS {
        return None;
    }
    let cell = |i: usize, j: usize| (0..k).map(|t| format!("({})*({})", a[i][t], b[t][j])).collect::<Vec<_>>().join("+");
    Some((0..n).map(|i| (0..p).map(|j| cell(i, j)).collect()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(rows: &[&[&str]]) -> String {
        let rows: Vec<String> = rows.iter().map(|r| r.join("&")).collect();
        format!("{OPEN}{}{CLOSE}", rows.join("\\\\"))
    }

    #[test]
    fn sums_scalings_and_products() {
        let (a, b) = (m(&[&["1", "2"], &["3", "4"]]), m(&[&["x"], &["1"]]));
        assert_eq!(arithmetic(&format!("{a}+{a}")).unwrap()[1][0], "(3)+(3)");
        assert_eq!(arithmetic(&format!("2{a}")).unwrap()[0][1], "(2)*(2)");
        assert_eq!(arithmetic(&format!("{a}{b}")).unwrap(), [["(1)*(x)+(2)*(1)"], ["(3)*(x)+(4)*(1)"]]);
        assert_eq!(arithmetic(&format!("-{a}\\cdot{b}")).unwrap()[1][0], "(-1)*((3)*(x)+(4)*(1))");
        assert!(arithmetic(&format!("{a}+{b}")).is_none());
        assert!(arithmetic(&format!("{b}{b}")).is_none());
        assert!(arithmetic(&a).is_none());
        assert!(arithmetic("1+2").is_none());
        assert!(arithmetic(&format!("{a}+1")).is_none());
        assert!(arithmetic(&format!("{a}+")).is_none());
        assert!(arithmetic(&format!("{a}+-{a}")).is_none());
        assert!(arithmetic(&format!("[{a}]")).is_none());
    }
}
