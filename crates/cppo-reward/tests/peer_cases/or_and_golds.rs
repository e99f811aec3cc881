//! Golds written with "or" / "and". Items joined by either word are a list, matched whatever the
//! spelling (`\text{ or }`, `\quad\text{and}\quad`, plain words, or the word run into the brackets
//! around it: `(8,5)or(5,8)`). A gold that offers one tuple in
//! several orders joined by "or" (`(11,7) or (7,11)`: the problem does not fix the order) also accepts
//! each order alone; any other "or" list (the solutions of an equation, several points) is one answer
//! that a single item does not match, and "and" always asks for all items.

use super::{check, Case::*};

#[test]
fn golds_with_or_and_and() {
    let cases = [
        Math { completion: r"\boxed{(4,9)}", reference: r"(9,4) or (4,9)", correct: true },
        Math { completion: r"so the pair is $\boxed{(9,4)}$", reference: r"$(9,4)$ or $(4,9)$", correct: true },
        Math { completion: r"\boxed{(2,3,6)}", reference: r"(6,3,2) \text{ or } (2,3,6)", correct: true },
        Math { completion: r"\boxed{\left(\frac12, 3\right)}", reference: r"(3,\frac{1}{2})\text{ or }(\frac{1}{2},3)", correct: true },
        Math { completion: r"\boxed{(4,9), (9,4)}", reference: r"(9,4) or (4,9)", correct: true },
        Math { completion: r"\boxed{\{(4,9),(9,4)\}}", reference: r"(9,4) \text{ and } (4,9)", correct: true },
        Math { completion: r"\boxed{-1, 6}", reference: r"x=6 \quad\text{or}\quad x=-1", correct: true },
        Math { completion: r"\boxed{x = 6 \text{ or } x = -1}", reference: "-1, 6", correct: true },
        Math { completion: r"\boxed{(5,8), (8,5)}", reference: "(8,5)or(5,8)", correct: true },
        Math { completion: r"\boxed{(5,8)}", reference: "$(8,5)$or$(5,8)$", correct: true },
        Math { completion: r"\boxed{(5,9)}", reference: "(8,5)or(5,8)", correct: false },
        Math { completion: r"\boxed{(4,10)}", reference: r"(9,4) or (4,9)", correct: false },
        Math { completion: r"\boxed{(4,9)}", reference: r"(9,4) and (4,9)", correct: false },
        Math { completion: r"\boxed{(4,9)}", reference: r"(4,9) or (1,2)", correct: false },
        Math { completion: r"\boxed{6}", reference: r"x=6 \quad\text{or}\quad x=-1", correct: false },
        Math { completion: r"\boxed{(9,4)}", reference: r"(9,4,1) or (4,9,1)", correct: false },
        Math { completion: r"\boxed{(4,9), (9,5)}", reference: r"(9,4) or (4,9)", correct: false },
        Math { completion: r"\boxed{[4,9]}", reference: r"(9,4) or (4,9)", correct: false },
    ];
    check("golds with or / and", &cases);
}
