//! The pure algorithmic core of cppo. Nothing here depends on a tensor library, so it compiles and tests
//! in seconds and every rule can be checked against brute force.

pub mod problem;

pub use problem::{Problem, Task};
