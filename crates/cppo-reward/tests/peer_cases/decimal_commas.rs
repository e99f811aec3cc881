//! A decimal comma (`1,22`, `1000,99`, `0,111`) equals the same number written with a decimal point,
//! where nothing else can be meant: the answer is that one number, the comma cannot separate thousands
//! (no group of exactly three digits after it, or a leading 0 before it), and the other side writes a
//! decimal point. A comma with a space, or before a group of three, keeps its usual meaning.

use super::{check, Case::*};

#[test]
fn decimal_commas_against_decimal_points() {
    let cases = [
        Same("3,75", "3.75"),
        Same("-0,5", "-0.5"),
        Same("2048,125", "2048.125"),
        Same("0,375", "0.375"),
        Same("12,50", "12.5"),
        Math { completion: r"\boxed{6.25}", reference: "6,25", correct: true },
        Math { completion: r"so the mass is $\boxed{6,25}$ kg", reference: "6.25", correct: true },
        Differ("3,75", "3.76"),
        Differ("3,75", "375"),
        Differ("3,750", "3.75"),
        Differ("3, 75", "3.75"),
        Differ("0,375", "375"),
        Differ("-0,5", "0.5"),
        Differ("3,75", "3.75, 1"),
        Same("3,75", "75, 3"),
        Math { completion: r"\boxed{6.25}", reference: "6,52", correct: false },
    ];
    check("decimal commas", &cases);
}
