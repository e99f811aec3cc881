//! Several answers: a list written with `or`, `and`, `;`, as assignments, or as several boxes next to
//! each other (in the completion or in the reference), read both as the last box and as all of them.
//! Boxes with prose between them are separate statements (the last one is the answer).

use super::{check, Case::*};

#[test]
fn several_answers_in_one_response() {
    let cases = [
        Math { completion: r"$\boxed{1}\boxed{2}$", reference: "1,2", correct: true },
        Math { completion: r"The integers are \boxed{-2} and \boxed{1}.", reference: "1,-2", correct: true },
        Math { completion: r"the points are $\boxed{(-2,18)}$ and $\boxed{(8,38)}$.", reference: "(8,38), (-2,18)", correct: true },
        Math { completion: r"\boxed{-5, 3}", reference: r"so $x = \boxed{3}$ or $x = \boxed{-5}$.", correct: true },
        Math { completion: r"\boxed{\frac{639}{40}}", reference: r"$d = \boxed{15\frac{39}{40}},$ or $\boxed{\frac{639}{40}}$ inches.", correct: true },
        Math { completion: r"$x = \boxed{2}$, $y = \boxed{7}$", reference: "2, 7", correct: true },
        Same(r"x = 2 \text{ or } x = -3", "-3, 2"),
        Same(r"1 \text{ and } 5", "5, 1"),
        Same("2; 7", "7, 2"),
        Same("AB = 4, CD = 5", "CD = 5, AB = 4"),
        Same(r"x=2 \quad\text{or}\quad x=-3", "2,-3"),
        Same(r"x = \pm 3", "3, -3"),
        // Deliberate: a list is unordered, as the roots or solutions it usually lists are (the MATH
        // dataset's `is_equiv` compares lists in order); tuples and intervals stay ordered.
        Same("10, 4, -2", "4, 10, -2"),
        Differ("(10, 4, -2)", "(4, 10, -2)"),
        Math { completion: r"\boxed{5} or \boxed{6}", reference: "5", correct: false },
        // Deliberate: the reference's last box alone stays a gold (MATH's convention; references also end
        // with alternative forms of one answer, `$\boxed{28}$ or $\boxed{28_9}$`), so only the first of
        // two boxed answers is wrong on its own.
        Math { completion: r"\boxed{(8,38)}", reference: r"$\boxed{(-2,18)}$ and $\boxed{(8,38)}$", correct: true },
        Math { completion: r"\boxed{(-2,18)}", reference: r"$\boxed{(-2,18)}$ and $\boxed{(8,38)}$", correct: false },
        Math { completion: r"$\boxed{1}\boxed{2}$", reference: "1,3", correct: false },
        Math { completion: r"First \boxed{3}. Then we check it: \boxed{4}", reference: "3", correct: false },
        Differ("AB = 4, CD = 5", "AB = 5, CD = 4"),
        Differ("AB=4, CD=5", "4, 5"),
        Differ(r"x = 2 \text{ or } x = -3", "2, 3"),
    ];
    check("several answers", &cases);
}
