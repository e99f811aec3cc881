//! Sets of tuples (the points or solutions of a system) compare as sets: in any order, a tuple repeated
//! on one side is the same element, and a tuple's coordinates may be separated by `;` where no comma
//! separates them. Tuples themselves stay ordered, and every element must appear on both sides.

use super::{check, Case::*};

#[test]
fn sets_of_tuples_compare_as_sets() {
    let cases = [
        Same(r"\{(0,1),(2,-3)\}", "(2,-3), (0,1)"),
        Same("(2,-3), (0,1), (2,-3)", r"\{(0,1),(2,-3)\}"),
        Same(r"(1;\frac12), (4;-2)", r"(4,-2),(1,0.5)"),
        Same("(3;5)", "(3,5)"),
        Same(r"[-1;2]", r"[-1,2]"),
        Same(r"(1,1,2), (1,2,1), (1,1,2)", r"(1,2,1),(1,1,2)"),
        Math { completion: r"The solutions are $\boxed{(5,-1),(-1,5),(5,-1)}$.", reference: r"\{(-1,5),(5,-1)\}", correct: true },
        Math { completion: r"\boxed{(2; 7), (7; 2)}", reference: "(7,2),(2,7)", correct: true },
        Differ(r"(2,-3), (0,1)", r"\{(0,1),(-3,2)\}"),
        Differ("(2,-3), (2,-3)", r"\{(0,1),(2,-3)\}"),
        Differ("(2,-3)", r"\{(0,1),(2,-3)\}"),
        Differ("(3;5)", "(5,3)"),
        Differ("(3;5)", "3, 5"),
        Differ("(1,1,2), (1,2,1)", "(1,2,1),(1,1,2),(2,1,1)"),
        Differ(r"(1,2), (3,4), (5,6)", r"(1,2),(3,4)"),
        // Numbers keep their multiplicity: `2, 2` (a double root) is not `2`.
        Differ("2, 2, 3", "2, 3"),
        Math { completion: r"\boxed{(5,-1),(5,-1)}", reference: r"\{(-1,5),(5,-1)\}", correct: false },
    ];
    check("sets of tuples", &cases);
}
