//! An inequality in one variable is the interval (or union) of its solutions: domain and range answers
//! are written both ways.

use super::{check, Case::*};

#[test]
fn inequalities_against_intervals() {
    let cases = [
        Same(r"-2 \le x \le 7", "[-2,7]"),
        Same("0<f(x)<1", "(0,1)"),
        Same(r"x \ge 3", r"[3,\infty)"),
        Same("x < -1", r"(-\infty,-1)"),
        Same("x > 2", r"(2, \infty)"),
        Same(r"-1 < x \leq 4", "(-1,4]"),
        Same(r"7 \ge x \ge -2", "[-2, 7]"),
        Same(r"-2 \le x \le 7", r"x \in [-2,7]"),
        Same(r"x \neq 3", r"(-\infty,3)\cup(3,\infty)"),
        Same(r"x < -1 \text{ or } x > 3", r"(-\infty,-1)\cup(3,\infty)"),
        Same(r"y \geq 0", r"[0, \infty)"),
        Same(r"\frac{1}{2} < x < 5", r"\left(\frac12, 5\right)"),
        Math { completion: "The range is $0 < f(x) < 1$.", reference: r"so the range is $\boxed{(0,1)}$.", correct: true },
        Differ(r"-2 < x \le 7", "[-2,7]"),
        Differ("x > 3", r"[3,\infty)"),
        Differ(r"x \ge 3", r"(-\infty,3]"),
        Differ("0 < x < 1", "[0,1]"),
        Differ("x < 3", r"(3, \infty)"),
        Differ(r"x \le -1 \text{ or } x > 3", r"(-\infty,-1)\cup(3,\infty)"),
        Differ(r"-2 \le x \le 7", "[-2, 8]"),
        Differ(r"x \neq 3", r"(-\infty, 3)"),
        Differ(r"x > 2", r"x > 2 \text{ or } x < 0"),
    ];
    check("inequalities and intervals", &cases);
}
