//! Giving freed memory back to the system. malloc keeps what a thread frees inside its arena for later
//! allocations, so buffers a shard frees after a burst (`SpareBufs::trim`) would still count in the
//! process's RSS; glibc's `malloc_trim` returns the arenas' free pages to the kernel.

/// Freed bytes below this are not worth a trim (it walks and locks every arena, each shard's included).
const WORTH_RETURNING: usize = 1 << 20;

/// Returns malloc's free pages to the kernel once `freed` bytes were just freed, if that is worth it (at
/// least [`WORTH_RETURNING`]); otherwise does nothing. A no-op where the allocator is not glibc's.
pub fn return_after_freeing(freed: usize) {
    if freed < WORTH_RETURNING {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it only takes malloc's own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}
