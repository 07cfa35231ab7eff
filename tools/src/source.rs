//! The index a command reads: a segment file, or an index directory opened read-only (so a
//! command works while a writer runs on it).

use anyhow::{Context, Result};
use simdex::engine::{Index, IndexOptions};
use simdex::storage::FsStorage;
use simdex::{build_segment, BuildOptions, Segment};
use std::path::Path;

/// A segment holding every live pair of `path`: the file itself, the directory's only
/// segment when nothing else is live (no unflushed pairs, no deletes), or else a
/// consolidated copy of the live pairs written to `scratch` (this holds all live pairs in
/// memory, 16 bytes each; run `simdex compact DIR` first to avoid it).
pub fn consolidated(path: &Path, scratch: &Path) -> Result<Segment> {
    if !path.is_dir() {
        return Ok(Segment::open(path)?);
    }
    let index = Index::open_read_only(path, IndexOptions::default()).with_context(|| format!("opening index {}", path.display()))?;
    let snapshot = index.snapshot();
    let segments = snapshot.segments();
    if segments.len() == 1 && snapshot.deletes().is_empty() && snapshot.unflushed().is_empty() {
        return Ok(Segment::open(segments[0].path())?);
    }
    let live = snapshot.live_entries()?;
    let (fps, ids): (Vec<u64>, Vec<u64>) = live.into_iter().unzip();
    let out = scratch.join("consolidated.sdx");
    build_segment(&FsStorage, &out, &fps, Some(&ids), &BuildOptions { k: index.k(), ..BuildOptions::default() })
        .with_context(|| format!("consolidating {} into {}", path.display(), out.display()))?;
    Ok(Segment::open(&out)?)
}
