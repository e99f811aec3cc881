//! Keeps freed memory in the process instead of handing it back to the kernel.
//!
//! A training step allocates and frees buffers of tens to hundreds of megabytes (the tied embedding's
//! gradient alone is 113 MB for SmolLM2-135M). glibc serves every allocation above 32 MB with its own
//! `mmap` and unmaps it on free, and trims the heap top, so each step paid for zero-filled page faults
//! and TLB shootdowns again: 16% of `cppo bench step`'s profile was `clear_page`, and the policy phase
//! of a G = 8 step went from 6.2 s to 3.6 s with the settings below (2 cores, same run length).

/// Serves every allocation from one heap that never shrinks (glibc only; a no-op elsewhere). Call it
/// once, early, before worker threads start: a trainer reuses its peak memory every step anyway.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; it is safe to call at any time.
    unsafe {
        libc::mallopt(libc::M_MMAP_MAX, 0);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
