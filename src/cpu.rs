//! What the CPU can do: runtime detection of the instructions the hot loops are compiled
//! for, so one build runs everywhere and uses them where they exist.

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
