//! Caps that keep grading bounded on hostile input (model output is untrusted: a policy under RL will
//! find any input that makes the grader hang or crash).
//!
//! Every loop in the graders is linear in its input or charged against [`STEP_BUDGET`]; every recursion
//! is capped by [`MAX_DEPTH`]. When a cap is hit the grader gives a verdict of "not equivalent" with a
//! reason naming the cap, never a panic.

/// Completions longer than this score 0 without being read ("completion too long").
pub const MAX_COMPLETION_BYTES: usize = 4 << 20;

/// Extracted answers (and gold answers) longer than this are compared only as trimmed strings:
/// real MATH answers are under 200 bytes, so anything longer is not worth normalising.
pub const MAX_ANSWER_BYTES: usize = 4096;

/// Deepest nesting of braces, brackets, sub-answers or sub-expressions that is analysed.
pub const MAX_DEPTH: usize = 64;

/// Most nodes one parsed expression may have.
pub const MAX_NODES: usize = 4096;

/// Most items in one answer list, set, tuple or matrix row (matching unordered lists is quadratic).
pub const MAX_ITEMS: usize = 256;

/// Units of work (expression nodes evaluated, items compared, powering steps) one comparison of two
/// answers may spend before it gives up.
pub const STEP_BUDGET: u64 = 1_000_000;

/// Integer exponents up to this size are computed exactly (by squaring); larger ones in floating point.
pub const MAX_EXACT_EXPONENT: i128 = 4096;

/// Largest `n` for which `n!` is evaluated (170! is the largest finite f64 factorial).
pub const MAX_FACTORIAL: i128 = 170;
