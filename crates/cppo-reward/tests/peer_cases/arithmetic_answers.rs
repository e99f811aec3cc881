//! Arithmetic inside the answer, graded by its value: a sum, difference, scalar multiple or product
//! of matrices is the matrix it makes; a sum or product of numbers is its number; working shown as a
//! chain of equalities without variables (`6 \cdot 7 = 42`) is its last side when every side has the
//! same value. Dimensions must match, and a chain with a false step is no number.

use super::{check, Case::*};

#[test]
fn arithmetic_graded_by_value() {
    let cases = [
        Same(r"\begin{pmatrix}2\\-1\end{pmatrix}+\begin{pmatrix}5\\4\end{pmatrix}", r"\begin{pmatrix}7\\3\end{pmatrix}"),
        Same(r"3\begin{pmatrix}1&0\\2&-1\end{pmatrix}", r"\begin{pmatrix}3&0\\6&-3\end{pmatrix}"),
        Same(r"\begin{pmatrix}1&2\\0&1\end{pmatrix}\begin{pmatrix}3\\5\end{pmatrix}", r"\begin{pmatrix}13\\5\end{pmatrix}"),
        Same(r"\begin{pmatrix}4\\6\end{pmatrix}-\frac12\begin{pmatrix}2\\4\end{pmatrix}", r"\begin{pmatrix}3\\4\end{pmatrix}"),
        Same(r"\begin{bmatrix}1&1\\0&1\end{bmatrix}\cdot\begin{bmatrix}1&1\\0&1\end{bmatrix}", r"\begin{pmatrix}1&2\\0&1\end{pmatrix}"),
        Same(r"\begin{pmatrix}a\\b\end{pmatrix}+\begin{pmatrix}b\\a\end{pmatrix}", r"\begin{pmatrix}a+b\\a+b\end{pmatrix}"),
        Same(r"6 \cdot 7 = 42", "42"),
        Same("2^5 - 1 = 31", "31"),
        Same(r"\frac{12}{4} + 5 = 3 + 5 = 8", "8"),
        Same(r"4 \times 9 + 2", "38"),
        Math { completion: r"So the total is $\boxed{15 \times 8 = 120}$.", reference: "120", correct: true },
        Differ(r"\begin{pmatrix}2\\-1\end{pmatrix}+\begin{pmatrix}5\\4\end{pmatrix}", r"\begin{pmatrix}7\\5\end{pmatrix}"),
        Differ(r"\begin{pmatrix}1&2\\0&1\end{pmatrix}\begin{pmatrix}3\\5\end{pmatrix}", r"\begin{pmatrix}3\\11\end{pmatrix}"),
        Differ(r"\begin{pmatrix}1&2\\0&1\end{pmatrix}\begin{pmatrix}3\\5\end{pmatrix}", r"\begin{pmatrix}13&5\end{pmatrix}"),
        Differ(r"\begin{pmatrix}1\\2\end{pmatrix}+\begin{pmatrix}1&2\end{pmatrix}", r"\begin{pmatrix}2\\4\end{pmatrix}"),
        Differ(r"3\begin{pmatrix}1&0\\2&-1\end{pmatrix}", r"\begin{pmatrix}3&0\\2&-1\end{pmatrix}"),
        Differ(r"6 \cdot 7 = 43", "43"),
        Differ(r"6 \cdot 7 = 43", "42"),
        Differ(r"\frac{12}{4} + 5 = 3 + 5 = 9", "9"),
        Differ(r"4 \times 9 + 2", "36"),
        Math { completion: r"\boxed{15 \times 8 = 120}", reference: "15", correct: false },
    ];
    check("arithmetic graded by value", &cases);
}
