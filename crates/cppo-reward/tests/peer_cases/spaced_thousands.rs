//! A thousands separator written as a space (`1 000`, `12 345 678`, `2 500.75`), in a box, a list, a
//! tuple or a final sentence, is one number. Only groups of exactly three digits after a first group of
//! one to three join: `1 00`, `12 34`, `1234 567` and `1 2` are two numbers, never the number their
//! digits would make.

use super::{check, Case::*};

#[test]
fn spaces_between_digit_groups() {
    let cases = [
        Same("4 096", "2^{12}"),
        Same("12 345 678", "12345678"),
        Same("3 500.25", r"3500\frac14"),
        Same("-7 000", "-7000"),
        Same("(2 000, 15)", "(2000,15)"),
        Same(r"\{1 024, 2 048\}", "2048, 1024"),
        Same(r"x = 65 536", "2^{16}"),
        Math { completion: r"The total is $\boxed{40 320}$ ways.", reference: "8!", correct: true },
        Math { completion: "Final Answer: The number of arrangements is 40 320.", reference: "40320", correct: true },
        Math { completion: r"\boxed{\$2 750}", reference: r"\$2,\!750", correct: true },
        Differ("4 096", "496"),
        Differ("1 00", "100"),
        Differ("12 34", "1234"),
        Differ("1 2", "12"),
        Differ("1234 567", "1234567"),
        Differ("1 0000", "10000"),
        Differ("4 096", "4, 96"),
        Math { completion: r"\boxed{3 5}", reference: "35", correct: false },
    ];
    check("spaces between digit groups", &cases);
}
