//! What the CPU can do: runtime detection of the instructions the hot loops are compiled
//! for, so one build runs everywhere and uses them where they exist; and work split over
//! its cores ([`on_every_core`]).

/// True when the CPU has BMI1, BMI2 and POPCNT (x86-64 since about 2013); the detection is
/// cached by the standard library after the first call.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_bmi2_popcnt() -> bool {
    std::arch::is_x86_feature_detected!("bmi1") && std::arch::is_x86_feature_detected!("bmi2") && std::arch::is_x86_feature_detected!("popcnt")
}

/// True when the CPU has AVX-512 (F, VL, BW) with VPOPCNTQ, plus what
/// [`has_bmi2_popcnt`] checks.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_avx512_popcnt() -> bool {
    has_bmi2_popcnt()
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vpopcntdq")
}

/// `work` of consecutive parts of `items`, one part per core (parts of at least
/// `min_per_thread` items, all on this thread when that makes one part); the answers in order.
pub(crate) fn on_every_core<I: Sync, R: Send, E: Send>(
    items: &[I],
    min_per_thread: usize,
    work: impl Fn(&[I]) -> std::result::Result<R, E> + Sync,
) -> std::result::Result<Vec<R>, E> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(items.len().div_ceil(min_per_thread.max(1))).max(1);
    if threads == 1 {
        return Ok(vec![work(items)?]);
    }
    let work = &work;
    std::thread::scope(|s| {
        let handles: Vec<_> = items.chunks(items.len().div_ceil(threads)).map(|part| s.spawn(move || work(part))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    })
}
