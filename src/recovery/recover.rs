//! Recover: [`salvage`](super::salvage) on the file system, the new index published only
//! when whole (what `simdex recover` runs).

use std::path::Path;

use super::report::SalvageReport;
use super::salvage::salvage;
use crate::engine::IndexOptions;
use crate::error::{Error, Result};
use crate::storage::{FsStorage, Storage};

/// [`salvage`] of `src` into a new index directory `dst` on the file system, published only
/// when whole: the index is built under a temporary name beside `dst`
/// (`.NAME.recovering`) and renamed to `dst` when it is complete (then the parent
/// directory is synced), so an interrupted recover never leaves a half-made `dst`.
/// `dst` must not exist or be an empty directory. A temporary directory an interrupted run
/// left is removed first; this run's is removed if it fails. What `simdex recover` runs.
pub fn recover_into(src: &Path, dst: &Path, options: IndexOptions) -> Result<SalvageReport> {
    let name = dst.file_name().ok_or_else(|| Error::InvalidArgument(format!("{}: not a directory name", dst.display())))?;
    let parent = crate::storage::parent_dir(dst);
    let tmp = parent.join(format!(".{}.recovering", name.to_string_lossy()));
    if dst.exists() && std::fs::read_dir(dst).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(Error::InvalidArgument(format!("{} already exists and is not an empty directory: recover into a new directory", dst.display())));
    }
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, "remove (left by an interrupted recover)", e))?;
    }
    let report = salvage(&FsStorage, src, &tmp, options).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&tmp);
    })?;
    std::fs::rename(&tmp, dst).map_err(|e| Error::io(dst, "rename the recovered index into place", e))?;
    FsStorage.sync_dir(&parent).map_err(|e| Error::io(&parent, "sync", e))?;
    Ok(report)
}
