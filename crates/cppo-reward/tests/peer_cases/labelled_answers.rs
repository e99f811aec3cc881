//! `left side = value`: a name on the left (not only one variable) labels a constant value, and a chain
//! `x = 3 + 3 = 6` is graded by its last right-hand side. A left side that is an expression to solve
//! (`2x + z = 1`) or a number (`7 = 11a + c`) is an equation, not a label.

use super::{check, Case::*};

#[test]
fn left_sides_that_name_the_value() {
    let cases = [
        Same("(p,q)=(3,2)", "(3,2)"),
        Same("|AB|=1", "1"),
        Same("A:B=1:2", "1:2"),
        Same(r"\frac{NO}{BO}=\frac{1}{2}", r"\frac12"),
        Same("x = 3 + 3 = 6", "6"),
        Same(r"x \approx 11", "11"),
        Same(r"AB = 5\sqrt{2}", r"5\sqrt2"),
        Same(r"m\angle ABC = 30^\circ", "30"),
        Same("f(2) = 7", "7"),
        Same(r"(t,u) = \left(\frac45, \frac15\right)", "(0.8, 0.2)"),
        Same("z = 1 + 1 = 2", "z = 3 + 3 = 2"),
        Same("x = 5+5+1 = 11", "11"),
        Same("BC = 12", "12"),
        Same("xy = 6", "6"),
        Same(r"\overline{AB} = 4", "4"),
        Math { completion: r"Hence \boxed{(a,b) = (1,2)}.", reference: r"so the pair is $\boxed{(1,2)}$", correct: true },
        Math { completion: "We get $x = 2 + 2 = 4$", reference: "4", correct: true },
        Differ("7 = 11a+c", "11a+c"),
        Differ("a + 3z = 0", "0"),
        Differ("2x + z = 1", "1"),
        Differ("a^2 + b = 0", "0"),
        Differ("|AB| = 1", "2"),
        Differ("x = 3 + 3 = 6", "3"),
        Differ("(p,q) = (3,2)", "(2,3)"),
        Differ("2x = 6", "6"),
        Differ("1 + x = 3 + 3 = 6", "6"),
        Differ(r"x \approx 11", "12"),
        // A name other than a variable labels only a constant: `x^2 = 4y` is a parabola, not `4y`.
        Differ("x^2 = 4y", "4y"),
        Same("x^2 = 4y", r"y = \frac{x^2}{4}"),
    ];
    check("labelled answers and chains", &cases);
}
