//! Hints that need no segment: the CPU's prefetch of a cache line or a block a query will
//! load next ([`prefetch_line`], [`prefetch_block`]), and the detector of queries that read
//! from the disk ([`ColdReads`]). Hints only: none of them changes what is read. Beside
//! them, what spares a warm read work: the record of the sketch pages that passed their CRC
//! check ([`VerifiedPages`]).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::codec::BLOCK_BYTES;

/// Whether queries on a mapped segment (or lookups in a mapped band file,
/// `crate::bands::BandFile`) should ask for their blocks (pages) ahead: set when touching a
/// query's first blocks takes disk time (a major fault), for the next
/// [`ColdReads::QUERIES`] queries, then measured again. Warm queries pay one clock read.
#[derive(Debug, Default)]
pub(crate) struct ColdReads(pub(super) std::sync::atomic::AtomicU32, std::sync::atomic::AtomicBool);

impl ColdReads {
    /// Queries that ask ahead after a cold one.
    pub(crate) const QUERIES: u32 = 256;
    /// Touching a query's first blocks slower than this means they came from the disk.
    const DISK: std::time::Duration = std::time::Duration::from_micros(50);

    /// True when queries should ask ahead.
    pub(crate) fn is_cold(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed) > 0
    }

    /// Records how long touching a query's first reads took (`was_cold`: whether it asked
    /// ahead).
    pub(crate) fn observe(&self, was_cold: bool, touch: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        if touch > Self::DISK {
            self.0.store(Self::QUERIES, Relaxed);
        } else if was_cold {
            let _ = self.0.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
        }
    }

    /// [`Self::observe`] for touches so short that a busy machine's preemption alone makes
    /// one slow now and then (a band file's lookups, a few microseconds warm): only two
    /// slow touches in a row (`touch`, then the one before) set queries to ask ahead.
    pub(crate) fn observe_twice(&self, was_cold: bool, touch: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let slow = touch > Self::DISK;
        if self.1.swap(slow, Relaxed) && slow {
            self.0.store(Self::QUERIES, Relaxed);
        } else if was_cold {
            let _ = self.0.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
        }
    }

    /// Sets the next [`Self::QUERIES`] queries to ask ahead (as after a cold one).
    pub(crate) fn set_cold(&self) {
        self.0.store(Self::QUERIES, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sets the next queries not to ask ahead (tests of the warm path).
    #[cfg(test)]
    pub(crate) fn set_warm(&self) {
        self.0.store(0, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Asks the CPU to load the cache lines of the block starting at `bytes[0]` without waiting
/// for them (a hint: nothing happens where prefetching is not available).
#[inline(always)]
pub(super) fn prefetch_block(bytes: &[u8]) {
    for line in bytes.iter().take(BLOCK_BYTES).step_by(64) {
        prefetch_line(line);
    }
}

/// Asks the CPU to load the cache line holding `value` without waiting for it.
#[inline(always)]
pub(crate) fn prefetch_line<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address; SSE, which it
    // needs, is part of every x86-64 CPU. The pointer comes from a live reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((value as *const T).cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Which pages of a column have passed their CRC check in this process, one bit a page
/// (512 KiB for 2^28 sketches), so that a page is checked on its first read only, as a band
/// file's pages are.
#[derive(Debug, Default)]
pub(crate) struct VerifiedPages(Box<[AtomicU64]>);

impl VerifiedPages {
    /// For a column of `pages` pages, none checked yet.
    pub(crate) fn new(pages: u64) -> Self {
        VerifiedPages((0..pages.div_ceil(64)).map(|_| AtomicU64::new(0)).collect())
    }

    pub(super) fn is_verified(&self, page: u64) -> bool {
        self.0.get((page / 64) as usize).is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (page % 64)) != 0)
    }

    pub(super) fn set_verified(&self, page: u64) {
        if let Some(w) = self.0.get((page / 64) as usize) {
            w.fetch_or(1 << (page % 64), Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ColdReads;
    use std::time::Duration;

    #[test]
    fn two_slow_touches_in_a_row_ask_ahead_for_a_while() {
        let (slow, fast) = (Duration::from_millis(1), Duration::from_micros(1));
        let cold = ColdReads::default();
        // one slow touch (a preemption) among fast ones: never cold
        for touch in [slow, fast, slow, fast, fast, slow] {
            cold.observe_twice(cold.is_cold(), touch);
            assert!(!cold.is_cold());
        }
        // a second slow one in a row: cold, for QUERIES fast touches
        cold.observe_twice(false, slow);
        assert!(cold.is_cold());
        for _ in 1..ColdReads::QUERIES {
            cold.observe_twice(true, fast);
        }
        assert!(cold.is_cold());
        cold.observe_twice(true, fast);
        assert!(!cold.is_cold());
        // observe: one slow touch is enough
        cold.observe(false, slow);
        assert!(cold.is_cold());
    }
}
