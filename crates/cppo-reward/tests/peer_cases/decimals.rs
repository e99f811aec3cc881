//! A decimal printed to many digits (a floating-point result, `0.0833333333333333`) equals the value it
//! rounds; a short decimal is exact (`0.333333` is not 1/3: a rounding is the answer to another
//! question), and so are two decimals both written to many digits.

use super::{check, Case::*};

#[test]
fn long_decimals_against_fractions() {
    let cases = [
        Same("0.0833333333333333", r"\frac{1}{12}"),
        Same("0.333333333333333333", r"\frac13"),
        Same("0.6666666666666666", r"\frac{2}{3}"),
        Same("0.6666666666666667", "2/3"),
        Same("(1, 4.5)", r"(1, \frac92)"),
        Same("3.3333333333", r"\frac{10}{3}"),
        Same("4.123105625617661", r"\sqrt{17}"),
        Same("0.30000000000000004", "0.3"),
        Same("1.4285714285714286", r"\frac{10}{7}"),
        Same("-0.1111111111111111", r"-\frac19"),
        Math { completion: r"\boxed{0.0833333333333333}", reference: r"\frac{1}{12}", correct: true },
        Differ("0.333333", r"\frac13"),
        Differ("0.0833", r"\frac1{12}"),
        Differ("0.083333333", r"\frac{1}{12}"),
        Differ("0.0833333343333", r"\frac{1}{12}"),
        Differ("1234567.891", "1234567.892"),
        Differ("0.6666666666666666", r"\frac{2}{3}+\frac{1}{10^{6}}"),
        Differ("3.3333333333", r"\frac{7}{2}"),
        Differ("0.30000000000000004", "0.4"),
        Differ("0.1428571428571428", r"\frac{1}{8}"),
        // Deliberate: a gold rounded to a few digits ("to the nearest cent") is the answer asked for; the
        // exact value is another answer (Math-Verify would round the prediction to the gold's digits).
        Differ("7.78", r"\frac{70}{9}"),
    ];
    check("decimals", &cases);
}
