//! Equations compared as equations: two are the same answer when one is the other rearranged or
//! multiplied by a non-zero constant (`2x - y + 3 = 0`, `4x - 2y + 6 = 0` and `y = 2x + 3`), that is
//! when `l1 - r1 = c (l2 - r2)` for a constant `c != 0`. An equation without variables (`2 = 4`) is
//! no answer of this kind.

use super::budget::Budget;
use super::eval;
use super::expr::{self, Expr};
use super::structure::{balanced, split_top, units};

/// `l - r` for a normalised answer that is one equation `l = r`.
fn difference(s: &str) -> Option<Expr> {
    if !s.contains('=') {
        return None;
    }
    let us = units(s);
    if !balanced(s, &us) {
        return None;
    }
    match split_top(s, &us, "=").as_slice() {
        [l, r] if !l.trim().is_empty() && !r.trim().is_empty() => expr::parse(&format!("({l})-({r})")).ok(),
        _ => None,
    }
}

/// Whether `a` and `b` (normalised) are equations with proportional differences (see the module docs).
pub fn same_equation(a: &str, b: &str, budget: &mut Budget) -> bool {
    match (difference(a), difference(b)) {
        (Some(fa), Some(fb)) => eval::proportional(&fa, &fb, budget) == Some(true),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: &str, b: &str) -> bool {
        same_equation(a, b, &mut Budget::default())
    }

    #[test]
    fn rearranged_and_scaled() {
        assert!(same("2x-y+3=0", "4x-2y+6=0"));
        assert!(same("y=2x+3", "2x-y+3=0"));
        assert!(same("x=5", "2x=10"));
        assert!(!same("x^2=4", "x=2"));
        assert!(!same("2=4", "1=2"));
        assert!(!same("x+y=1", "x+z=1"));
        assert!(!same("x=y=1", "x=1"));
        assert!(!same("x+1", "x+1"));
    }
}
