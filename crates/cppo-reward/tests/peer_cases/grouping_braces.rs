//! Grouping braces: plain braces around a list (`{1,3}`, as in `\boxed{{1,3}}` or `x \in {2, 5}`) are
//! set braces written without their backslashes, and a union of finite sets is the set of their
//! elements. Braces never make a tuple or an interval, and every element must match.

use super::{check, Case::*};

#[test]
fn braces_around_lists_are_sets() {
    let cases = [
        Math { completion: r"\boxed{{2,5}}", reference: r"\{2,5\}", correct: true },
        Math { completion: r"\boxed{{5, 2}}", reference: "2, 5", correct: true },
        Math { completion: r"so $\boxed{\{-1,4\}}$", reference: "{4,-1}", correct: true },
        Same(r"x \in {2, 5}", r"\{5,2\}"),
        Same(r"{2,5} \cup {7}", r"\{2,5,7\}"),
        Same(r"\{1,3\} \cup \{3,6\}", r"\{1,3,6\}"),
        Same(r"{(0,1),(1,0)}", r"(1,0),(0,1)"),
        Same(r"{\frac12, 2}", r"\{2, 0.5\}"),
        Differ(r"{2,5}", "(2,5)"),
        Differ(r"{2,5}", "[2,5]"),
        Differ(r"{2,5}", r"\{2,5,7\}"),
        Differ(r"{2,5} \cup {7}", r"\{2,5\}"),
        Differ(r"{2,5} \cup {7}", r"\{2,5,6\}"),
        Differ(r"\{1,3\} \cup \{3,6\}", r"\{1,6\}"),
        Differ(r"\{1\} \cup (2,3)", r"\{1,2,3\}"),
        Math { completion: r"\boxed{{2,5}}", reference: r"(2,5)", correct: false },
    ];
    check("grouping braces", &cases);
}
