//! Memory the process freed, given back to the system.

/// Gives the pages of freed memory back to the system (glibc's `malloc_trim`): after a large
/// part of the heap was freed at once (`dedup` dropping its shingle sets at the budget), the
/// allocator otherwise keeps those pages resident, interleaved with what is still in use,
/// and the process's peak memory is the budget plus all it freed. Elsewhere a no-op.
pub fn give_back_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::os::raw::c_int;
        }
        // SAFETY: glibc's malloc_trim(3) takes no pointer and may be called at any time from
        // any thread (it locks each arena while it walks it); it only releases free pages.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// Drops `what` and gives the pages it held back to the system ([`give_back_freed`]).
pub fn free<T>(what: T) {
    drop(what);
    give_back_freed();
}
