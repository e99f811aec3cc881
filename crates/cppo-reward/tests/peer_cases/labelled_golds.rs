//! A labelled gold (`AB=4, CD=5`, `x = -5, p = 14/3`, groups `p=5, q=2; p=7, q=2`) against an answer
//! that gives the bare values: right when they come in the labels' order (one tuple), or, for several
//! groups, as the set of their tuples; the values may be boxed one by one. Comparing the two forms as answers stays strict (a list of
//! assignments is not a list of numbers: `several_answers`); only grading against a labelled gold
//! reads the order.

use super::{check, Case::*};

#[test]
fn labelled_golds_against_bare_values() {
    let cases = [
        Math { completion: r"\boxed{6, 10}", reference: "PQ = 6, QR = 10", correct: true },
        Math { completion: r"\boxed{(6, 10)}", reference: "PQ = 6, QR = 10", correct: true },
        Math { completion: r"\boxed{-3, \frac{7}{2}}", reference: "a = -3, k = 7/2", correct: true },
        Math { completion: r"\boxed{1, 2, 3}", reference: "a=1, b=2, c=3", correct: true },
        Math { completion: r"\boxed{(3,1),(5,3)}", reference: "m=3, n=1; m=5, n=3", correct: true },
        Math { completion: r"\boxed{\{(5,3),(3,1)\}}", reference: "m=3, n=1; m=5, n=3", correct: true },
        Math { completion: r"\boxed{a = 1, c = 3, b = 2}", reference: "a=1, b=2, c=3", correct: true },
        // The values may come in several boxes, and a spacing command may run into the next label.
        Math { completion: r"$\boxed{3+\sqrt{2}} \quad\text{and}\quad \boxed{3-\sqrt{2}}$", reference: r"t_1=3+\sqrt{2},\quadt_2=3-\sqrt{2}", correct: true },
        Math { completion: r"$\boxed{(x+1)^2-4}$ and $\boxed{2(x-3)^2+1}$", reference: "f_1 = x^2+2x-3, f_2 = 2x^2-12x+19", correct: true },
        Same(r"a=1,\quadb=2", "b = 2, a = 1"),
        Math { completion: r"$\boxed{3+\sqrt{2}} \quad\text{and}\quad \boxed{3+\sqrt{3}}$", reference: r"t_1=3+\sqrt{2},\quadt_2=3-\sqrt{2}", correct: false },
        Math { completion: r"$\boxed{(x+1)^2-4}$ and $\boxed{2(x-3)^2-1}$", reference: "f_1 = x^2+2x-3, f_2 = 2x^2-12x+19", correct: false },
        Math { completion: r"\boxed{10, 6}", reference: "PQ = 6, QR = 10", correct: false },
        Math { completion: r"\boxed{6}", reference: "PQ = 6, QR = 10", correct: false },
        Math { completion: r"\boxed{6, 10, 8}", reference: "PQ = 6, QR = 10", correct: false },
        Math { completion: r"\boxed{3, -\frac{7}{2}}", reference: "a = -3, k = 7/2", correct: false },
        Math { completion: r"\boxed{(1,3),(5,3)}", reference: "m=3, n=1; m=5, n=3", correct: false },
        Math { completion: r"\boxed{(3,1)}", reference: "m=3, n=1; m=5, n=3", correct: false },
        Math { completion: r"\boxed{a = 2, b = 1, c = 3}", reference: "a=1, b=2, c=3", correct: false },
        Math { completion: r"\boxed{6, 10}", reference: "x = 6, x = 10", correct: true },
        Math { completion: r"\boxed{[6, 10]}", reference: "PQ = 6, QR = 10", correct: false },
    ];
    check("labelled golds", &cases);
}
