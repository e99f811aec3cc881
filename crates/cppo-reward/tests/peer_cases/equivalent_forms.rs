//! The same expression written differently: terms reordered inside exponents and fractions, a
//! quadratic in vertex form against its expanded form (as a value or as an equation in `y`), and an
//! inequality on an absolute value against the union of intervals that solves it (`|u| < h` is
//! `(-h, h)`; `|u| > l` is the two rays outside `[-l, l]`; a chain is the two pieces between, each
//! carried back through a linear `u`). Changing any coefficient, sign, bound or bracket is wrong.

use super::{check, Case::*};

#[test]
fn reordered_terms_and_vertex_forms() {
    let cases = [
        Same(r"7^{\frac{\sqrt{5}-3}{4}}", r"7^{\frac{-3+\sqrt{5}}{4}}"),
        Same(r"\frac{\sqrt{7}+2}{3}", r"\frac{2+\sqrt7}{3}"),
        Same(r"e^{x^2+5x}", r"e^{5x+x^2}"),
        Same(r"3^{\frac{2-t}{5}}", r"3^{\frac{-t+2}{5}}"),
        Same(r"\frac{q+p}{r+s}", r"\frac{p+q}{s+r}"),
        Same(r"y = 3(x+2)^2 - 7", r"y = 3x^2 + 12x + 5"),
        Same(r"f(x) = -\frac{1}{2}(x-6)^2 + 1", r"-\frac12x^2 + 6x - 17"),
        Same(r"y - 5 = 2(x - 3)^2", r"y = 2x^2 - 12x + 23"),
        Same(r"(x+1)^2 = 4(y-2)", r"y = \frac{1}{4}x^2 + \frac12 x + \frac94"),
        Differ(r"7^{\frac{\sqrt{5}-3}{4}}", r"7^{\frac{3-\sqrt{5}}{4}}"),
        Differ(r"e^{x^2+5x}", r"e^{x^2+6x}"),
        Differ(r"\frac{q+p}{r+s}", r"\frac{p+q}{r-s}"),
        Differ(r"y = 3(x+2)^2 - 7", r"y = 3x^2 + 12x + 6"),
        Differ(r"y = 3(x+2)^2 - 7", r"y = 3x^2 - 12x + 5"),
        Differ(r"y - 5 = 2(x - 3)^2", r"y = 2x^2 - 12x + 13"),
    ];
    check("reordered terms and vertex forms", &cases);
}

#[test]
fn absolute_value_inequalities() {
    let cases = [
        Same(r"2 \le |w| \le \frac52", r"[-\frac{5}{2},-2] \cup [2,\frac{5}{2}]"),
        Same(r"|x| < 4", "(-4,4)"),
        Same(r"|x - 3| \le 1", "[2,4]"),
        Same(r"|2x + 1| > 5", r"(-\infty,-3) \cup (2,\infty)"),
        Same(r"5 < |2x+1|", r"x < -3 \text{ or } x > 2"),
        Same(r"1 < |3 - x| < 2", r"(1,2) \cup (4,5)"),
        Same(r"|x| \ge 3", r"(-\infty,-3] \cup [3,\infty)"),
        Same(r"0 < |x| \le 1", r"[-1,0) \cup (0,1]"),
        Math { completion: r"so the answer is $\boxed{1 \leq |t| \leq 2}$", reference: r"[-2,-1]\cup[1,2]", correct: true },
        Differ(r"2 \le |w| \le \frac52", r"[2,\frac{5}{2}]"),
        Differ(r"2 \le |w| \le \frac52", r"[-\frac{5}{2},\frac{5}{2}]"),
        Differ(r"2 \le |w| \le \frac52", r"(-\frac{5}{2},-2] \cup [2,\frac{5}{2}]"),
        Differ(r"|x| < 4", "(-4,4]"),
        Differ(r"|x - 3| \le 1", "[-4,-2]"),
        Differ(r"|2x + 1| > 5", r"(-\infty,-2) \cup (3,\infty)"),
        Differ(r"|x| \ge 3", r"[3,\infty)"),
        Differ(r"0 < |x| \le 1", "[-1,1]"),
        Differ(r"|x| < 4", r"|x| \le 4"),
    ];
    check("absolute value inequalities", &cases);
}
