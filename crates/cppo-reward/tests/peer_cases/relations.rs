//! Relations written in ASCII (`<=`, `>=`, `!=`) or flipped (`5 \geq x`) mean the same relation.

use super::{check, Case::*};

#[test]
fn relations_in_any_spelling_and_direction() {
    let cases = [
        Same(r"x <= 2", r"x \leq 2"),
        Same(r"x >= 5", r"x \geq 5"),
        Same(r"x != 3", r"x \neq 3"),
        Same(r"x \lt 3", "x < 3"),
        Same(r"x \gt 5", "x>5"),
        Same(r"5 \geq x", r"x \leq 5"),
        Same(r"5 \leq x", r"x \geq 5"),
        Same("3 > y", "y < 3"),
        Same("x ≤ 2", r"x \le 2"),
        Same("x ⩽ 4", r"x \leqslant 4"),
        Same("a ≠ 0", r"a \ne 0"),
        Same(r"t \geqslant 0", "t>=0"),
        Same("-x > -1", "x < 1"),
        Same(r"2x + 1 \le 7", r"x \le 3"),
        Math { completion: "Thus $x <= 2$ is our answer.", reference: r"$x \leq 2$", correct: true },
        Math { completion: r"so \boxed{-1 \geq y}", reference: r"\boxed{y \le -1}", correct: true },
        Differ("x > 5", "x < 5"),
        Differ(r"x \geq 5", r"x \leq 5"),
        Differ("x < 1", "x > -1"),
        Differ(r"x \le 5", "x < 5"),
        Differ(r"x \ne 3", "x = 3"),
        Differ("x <= 2", "x <= 3"),
        Differ(r"5 \geq x", r"x \geq 5"),
        Differ(r"2x+1\le 7", r"x \le 4"),
        Math { completion: "Thus $x >= 2$ is our answer.", reference: r"$x \leq 2$", correct: false },
    ];
    check("relations", &cases);
}
