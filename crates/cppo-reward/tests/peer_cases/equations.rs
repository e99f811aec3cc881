//! Two equations are the same answer when one is the other rearranged or multiplied by a non-zero
//! constant (an implicit line against `y = ...`).

use super::{check, Case::*};

#[test]
fn equations_up_to_a_factor_or_rearranged() {
    let cases = [
        Same("2x-y+3=0", "4x-2y+6=0"),
        Same("2x+4y-3=0", r"y=-\frac{1}{2}x+\frac{3}{4}"),
        Same("34x+45y-20z+100=0", "-34x-45y+20z-100=0"),
        Same(r"\frac{x^2}{4}+\frac{y^2}{3}=1", r"\frac{x^2}{16}+\frac{y^2}{12}=\frac14"),
        Same("y = 2x + 1", "2x - y + 1 = 0"),
        Same("x - 2y + z - 1 = 0", "x - 2y + z = 1"),
        Same("y - 3 = 2(x - 1)", "y = 2x + 1"),
        Same("3x + 6y = 9", "x + 2y = 3"),
        Same("x^2 + y^2 = 25", "2x^2 + 2y^2 - 50 = 0"),
        Math { completion: r"The plane is $\boxed{2x - 4y + 2z = 2}$.", reference: r"\boxed{x-2y+z-1=0}", correct: true },
        Differ("5x-7y+11z+4=0", "x+y-z+2=0"),
        Differ("2x-y+3=0", "2x-y-3=0"),
        Differ("y = 2x+1", "y = 2x-1"),
        Differ("x^2+y^2=1", "x^2+y^2=2"),
        Differ("y = x^2", "x = y^2"),
        Differ("x^2 = 4", "x = 2"),
        Differ("x + y = 1", "x + z = 1"),
        Differ("2 = 4", "1 = 2"),
        Differ("x - x = 0", "y - y = 0"),
    ];
    check("equations", &cases);
}
