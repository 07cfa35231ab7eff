//! Any bytes as a block, any code lengths and entry count: the fast decoder never panics
//! and agrees with the bitvec reference decoder on validity and on every value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use simdex::codec::reference::decode_block_reference;
use simdex::codec::{decode_block, Code, Codec, BLOCK_BYTES, SYMBOLS};

fuzz_target!(|data: &[u8]| {
    if data.len() < SYMBOLS + 3 {
        return;
    }
    let mut lengths = [0u8; SYMBOLS];
    for (l, &b) in lengths.iter_mut().zip(data) {
        *l = b % 14;
    }
    let Ok(code) = Code::from_lengths(&lengths) else { return };
    let codec = if data[SYMBOLS] & 1 == 0 { Codec::Xor } else { Codec::Delta };
    let count = u32::from(u16::from_le_bytes([data[SYMBOLS + 1], data[SYMBOLS + 2]]));
    let mut block = [0u8; BLOCK_BYTES];
    let rest = &data[SYMBOLS + 3..];
    let n = rest.len().min(BLOCK_BYTES);
    block[..n].copy_from_slice(&rest[..n]);
    let mut fast = Vec::new();
    let r = decode_block(codec, &code, &block, count, |v| {
        fast.push(v);
        true
    });
    let reference = decode_block_reference(codec, code.lengths(), &block, count);
    match (r, reference) {
        (Ok(_), Some(v)) => assert_eq!(fast, v),
        (Err(_), None) => {}
        (r, v) => panic!("decoders disagree: fast {:?}, reference {:?}", r.map(|_| fast.len()), v.map(|v| v.len())),
    }
});
