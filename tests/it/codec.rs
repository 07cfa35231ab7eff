//! Block codec roundtrips, checked against the independent bitvec reference decoder.

use proptest::prelude::*;
use simdex::codec::reference::decode_block_reference;
use simdex::codec::{decode_block, encode_all, Codec, SymbolHistogram};

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

fn values() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![
        prop::collection::vec(any::<u64>(), 0..2000).prop_map(sorted),
        // Clustered: few high bits vary.
        (any::<u64>(), prop::collection::vec(0u64..1 << 20, 0..3000)).prop_map(|(base, lows)| sorted(lows.into_iter().map(|l| (base & !0xfffff) | l).collect())),
        // Duplicates.
        prop::collection::vec(prop_oneof![Just(0u64), Just(u64::MAX), Just(1u64 << 63)], 0..10_000).prop_map(sorted),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn blocks_roundtrip_and_agree_with_the_reference(values in values(), delta in any::<bool>()) {
        let codec = if delta { Codec::Delta } else { Codec::Xor };
        let code = SymbolHistogram::of_sorted(codec, &values).code();
        let blocks = encode_all(codec, &code, &values);
        let mut all = Vec::new();
        for (block, count, key) in &blocks {
            let mut fast = Vec::new();
            decode_block(codec, &code, block, *count, |v| { fast.push(v); true }).unwrap();
            let reference = decode_block_reference(codec, code.lengths(), block, *count).unwrap();
            prop_assert_eq!(&fast, &reference);
            prop_assert_eq!(fast.last(), Some(key));
            all.extend(fast);
        }
        prop_assert_eq!(all, values);
    }

    #[test]
    fn damaged_blocks_never_panic_and_agree_with_the_reference_on_validity(
        values in values(), delta in any::<bool>(), flips in prop::collection::vec((0usize..1024, 0u8..8), 1..4), count_delta in -3i32..3,
    ) {
        let codec = if delta { Codec::Delta } else { Codec::Xor };
        let code = SymbolHistogram::of_sorted(codec, &values).code();
        let blocks = encode_all(codec, &code, &values);
        if let Some((block, count, _)) = blocks.first() {
            let mut bad = *block;
            for (byte, bit) in flips {
                bad[byte] ^= 1 << bit;
            }
            let count = (*count as i32 + count_delta).max(1) as u32;
            let mut fast = Vec::new();
            let r = decode_block(codec, &code, &bad, count, |v| { fast.push(v); true });
            let reference = decode_block_reference(codec, code.lengths(), &bad, count);
            match (r, reference) {
                (Ok(_), Some(rv)) => prop_assert_eq!(fast, rv),
                (Err(_), None) => {}
                (r, reference) => prop_assert!(false, "fast {:?} vs reference {:?}", r.map(|_| fast.len()), reference.map(|v| v.len())),
            }
        }
    }
}
