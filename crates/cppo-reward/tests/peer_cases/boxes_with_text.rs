//! Answers spread over several boxes with a few words between them: a unit or a label for the box
//! before (`\boxed{3} cups and \boxed{5} spoons`, `\boxed{a} for part (a) and \boxed{b}`) followed by
//! a connective (`and`, `or`, a comma) joins the boxes into one list, as plain connectives already did.
//! A sentence between them, words after the connective, or no connective at all keeps them separate
//! statements, where the last box is the answer.

use super::{check, Case::*};

#[test]
fn boxes_with_words_between_them() {
    let cases = [
        Math { completion: r"We need \boxed{3} cups and \boxed{5} spoons.", reference: "3, 5", correct: true },
        Math { completion: r"The rate is \boxed{12} for part (a) and \boxed{\frac{3}{4}} for part (b).", reference: r"12, \frac34", correct: true },
        Math { completion: r"$\boxed{-4} \qquad \text{and} \qquad \boxed{9}$", reference: "9, -4", correct: true },
        Math { completion: r"So $m = \boxed{8}$ hours, and $n = \boxed{2}$ hours.", reference: "8, 2", correct: true },
        Math { completion: r"\boxed{4} red, \boxed{6} blue", reference: "4, 6", correct: true },
        Math { completion: r"\boxed{(1,2)} in case one, or \boxed{(2,1)}", reference: r"\{(1,2),(2,1)\}", correct: true },
        Math { completion: r"We need \boxed{3} cups and \boxed{5} spoons.", reference: "5", correct: true },
        Math { completion: r"We need \boxed{3} cups and \boxed{5} spoons.", reference: "3, 6", correct: false },
        Math { completion: r"We need \boxed{3} cups and \boxed{5} spoons.", reference: "3", correct: false },
        Math { completion: r"\boxed{3} cups. Then the spoons: \boxed{5}", reference: "3, 5", correct: false },
        Math { completion: r"\boxed{3} or maybe \boxed{5}", reference: "3, 5", correct: false },
        Math { completion: r"\boxed{3} is what we had before we doubled it and \boxed{5}", reference: "3, 5", correct: false },
        Math { completion: r"\boxed{3} cups \boxed{5}", reference: "3, 5", correct: false },
        Math { completion: r"\boxed{3} and 7 more than \boxed{5}", reference: "3, 5", correct: false },
    ];
    check("boxes with words between them", &cases);
}
