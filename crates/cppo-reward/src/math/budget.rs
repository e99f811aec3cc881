//! The work budget of one answer comparison (see [`crate::limits::STEP_BUDGET`]).

use crate::limits::STEP_BUDGET;

#[derive(Clone, Debug)]
pub struct Budget {
    start: u64,
    left: u64,
    /// The budget ran out at some point: a "not equivalent" verdict may be a give-up.
    pub exhausted: bool,
    /// Some pair of values was shown equal by numeric evaluation.
    pub numeric: bool,
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(STEP_BUDGET)
    }
}

impl Budget {
    pub fn new(steps: u64) -> Self {
        Budget { start: steps, left: steps, exhausted: false, numeric: false }
    }

    /// Takes `n` steps; false (and nothing taken) when fewer are left.
    pub fn spend(&mut self, n: u64) -> bool {
        if n > self.left {
            self.exhausted = true;
            return false;
        }
        self.left -= n;
        true
    }

    /// Steps taken so far.
    pub fn used(&self) -> u64 {
        self.start - self.left
    }
}
