//! Bounds-checked access to a segment's bytes: a field or a range at an offset, or a fault
//! naming what was cut short (shared by the layout's decoders and the readers).

use crate::integrity::Fault;

/// Rounds `x` up to a multiple of `to`.
pub fn align_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

/// The bytes `offset..offset + len` of `bytes`, or a fault naming what was cut short.
pub fn slice<'a>(bytes: &'a [u8], offset: u64, len: u64, what: &str) -> Result<&'a [u8], Fault> {
    let range = usize::try_from(offset).ok().zip(usize::try_from(len).ok()).and_then(|(o, l)| Some(o..o.checked_add(l)?));
    range.and_then(|r| bytes.get(r)).ok_or_else(|| past_end(bytes, offset, len, what))
}

/// The `N` bytes at `offset` of `bytes` as an array, or a fault naming what was cut short.
pub fn array<'a, const N: usize>(bytes: &'a [u8], offset: u64, what: &str) -> Result<&'a [u8; N], Fault> {
    let field = usize::try_from(offset).ok().and_then(|o| bytes.get(o..)?.first_chunk());
    field.ok_or_else(|| past_end(bytes, offset, N as u64, what))
}

#[cold]
fn past_end(bytes: &[u8], offset: u64, len: u64, what: &str) -> Fault {
    Fault::at(offset, format!("{what} ({len} bytes at offset {offset}) runs past the end of the {}-byte file", bytes.len()))
}
