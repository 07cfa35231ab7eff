//! What the IDF builder says its counts take at most while they count a document
//! (`IdfBuilder::heap_bytes_counting`, what `simdex dedup` leaves room for under its budget)
//! against the allocator: the bytes allocated and not yet freed, at their highest during the
//! call. A binary of its own: the allocator is the process's; it counts the allocations of
//! the threads that ask it to (the test's, not the harness's).

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use simdex_fingerprint::IdfBuilder;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    /// Whether this thread's allocations are counted.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn counted() -> bool {
    COUNTED.try_with(Cell::get).unwrap_or(false)
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counters only
// observe sizes (a reallocation is the default one: a new block, a copy, the old freed).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counted() {
            let size = layout.size() as isize;
            PEAK.fetch_max(LIVE.fetch_add(size, Ordering::SeqCst) + size, Ordering::SeqCst);
        }
        // SAFETY: the caller's layout contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if counted() {
            LIVE.fetch_sub(layout.size() as isize, Ordering::SeqCst);
        }
        // SAFETY: `ptr` was allocated by `System` with this layout (through `alloc`).
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// splitmix64's mix: a bijection of u64 that spreads small numbers over the whole range.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Documents of 0 to 400 distinct features (uniform hashes, as features are) drawn from a
/// vocabulary that widens as they come, so that the counts keep growing in steps of every size.
fn documents(n: u64) -> Vec<Vec<u64>> {
    let mut state = 7u64;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(state)
    };
    (0..n)
        .map(|d| {
            let len = next() % 401;
            let mut doc: Vec<u64> = (0..len).map(|_| mix(next() % (50 + 300 * d) + 1)).collect();
            doc.sort_unstable();
            doc.dedup();
            doc
        })
        .collect()
}

#[test]
fn counting_stays_within_what_the_builder_said() {
    let docs = documents(600);
    COUNTED.with(|c| c.set(true));
    for numbering in [false, true] {
        let mut b = if numbering { IdfBuilder::numbering("w3") } else { IdfBuilder::new("w3") };
        let (mut grew, mut exact) = (0, 0);
        for (d, doc) in docs.iter().enumerate() {
            let (said, held) = (b.heap_bytes_counting(doc.len()), b.heap_bytes());
            let before = LIVE.load(Ordering::SeqCst);
            PEAK.store(before, Ordering::SeqCst);
            b.add_document(doc);
            let peak = (PEAK.load(Ordering::SeqCst) - before) as usize + held;
            // a numbering builder's add_document also holds the document's numbers for the
            // call (4 bytes a feature; in dedup the features' own, counted as theirs)
            let numbers = if numbering { 4 * doc.len().max(4) } else { 0 };
            assert!(peak <= said + numbers, "numbering {numbering}, document {d}: {peak} bytes at the peak, {said} said (+{numbers})");
            assert!(b.heap_bytes() <= said, "numbering {numbering}, document {d}");
            if b.heap_bytes() != held {
                grew += 1;
                exact += usize::from(peak == said + numbers);
            }
        }
        // the counts grew many times, and the peak was what was said at least once (the bound is not loose)
        assert!(grew >= 10, "numbering {numbering}: grew {grew} times");
        assert!(exact >= 1, "numbering {numbering}: never at the bound");
    }
}
