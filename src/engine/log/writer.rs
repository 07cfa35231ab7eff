//! Appending to one log file ([`LogWriter`]): the header written and synced at creation,
//! records handed to the operating system in one `write` per call, and syncs that run
//! without the writer ([`PendingSync`]). The records' bytes are the log module's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{encode_header_with_epoch, encode_record, OpKind, SketchSlice, LOG_HEADER_BYTES, LOG_VERSION_REPLACE, MAX_RECORD_OPS};
use crate::error::{Error, Result};
use crate::query::Entry;
use crate::storage::{parent_dir, Storage, SyncHandle, WriteFile};

/// Appends records to one log file.
pub struct LogWriter {
    path: PathBuf,
    number: u64,
    file: Box<dyn WriteFile>,
    len: u64,
    buf: Vec<u8>,
    synced_len: u64,
    /// Made on the first [`LogWriter::pending_sync`].
    sync_handle: Option<Arc<dyn SyncHandle>>,
}

/// A sync of a log that runs without the [`LogWriter`]: taken with
/// [`LogWriter::pending_sync`], run anywhere, reported back with [`LogWriter::synced`].
pub struct PendingSync {
    path: PathBuf,
    number: u64,
    len: u64,
    handle: Arc<dyn SyncHandle>,
}

impl PendingSync {
    /// Syncs the log: every byte appended before the sync was taken becomes durable.
    pub fn run(&self) -> Result<()> {
        self.handle.sync().map_err(|e| Error::io(&self.path, "fsync", e))
    }
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter").field("path", &self.path).field("len", &self.len).finish()
    }
}

impl LogWriter {
    /// Creates log `number` at `path` (format [`LOG_VERSION_REPLACE`], naming the time slice
    /// `epoch` of its inserts in an index with an expiry window, else 0): writes and syncs
    /// the header, then syncs the directory so the file survives a power loss before any
    /// record is acknowledged in it.
    pub fn create(storage: &dyn Storage, path: &Path, number: u64, epoch: Option<u64>) -> Result<Self> {
        let epoch = u32::try_from(epoch.unwrap_or(0)).map_err(|_| Error::InvalidArgument(format!("time slice {epoch:?} does not fit a log header")))?;
        let header = encode_header_with_epoch(number, LOG_VERSION_REPLACE, epoch);
        let mut file = storage.create(path).map_err(|e| Error::io(path, "create", e))?;
        file.write_all(&header).map_err(|e| Error::io(path, "write", e))?;
        file.sync().map_err(|e| Error::io(path, "fsync", e))?;
        let dir = parent_dir(path);
        storage.sync_dir(&dir).map_err(|e| Error::io(&dir, "fsync directory", e))?;
        let len = LOG_HEADER_BYTES as u64;
        Ok(Self { path: path.to_path_buf(), number, file, len, buf: Vec::new(), synced_len: len, sync_handle: None })
    }

    /// Continues log `number` at `path`, whose intact part is `len` bytes long (the caller
    /// has cut any torn tail).
    pub fn reopen(storage: &dyn Storage, path: &Path, number: u64, len: u64) -> Result<Self> {
        let file = storage.append(path).map_err(|e| Error::io(path, "open for append", e))?;
        Ok(Self { path: path.to_path_buf(), number, file, len, buf: Vec::new(), synced_len: len, sync_handle: None })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The log's file number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the log holds no record.
    pub fn is_empty(&self) -> bool {
        self.len <= LOG_HEADER_BYTES as u64
    }

    /// True when bytes were written since the last sync.
    pub fn has_unsynced(&self) -> bool {
        self.synced_len < self.len
    }

    /// Appends operations `seq, seq + 1, ...` as records of at most [`MAX_RECORD_OPS`] and
    /// hands them to the operating system (one `write` per call, so they survive a crash of
    /// this process once this returns). Does not sync. `sketches` (inserts and replaces)
    /// holds one sketch per operation. A replace is one record: at most [`MAX_RECORD_OPS`]
    /// operations.
    pub fn append(&mut self, seq: u64, kind: OpKind, ops: &[Entry], sketches: Option<SketchSlice<'_>>) -> Result<()> {
        if kind == OpKind::Replace && ops.len() > MAX_RECORD_OPS {
            return Err(Error::InvalidArgument(format!("a replace of {} pairs: one record holds at most {MAX_RECORD_OPS}", ops.len())));
        }
        self.buf.clear();
        let mut s = seq;
        for (i, chunk) in ops.chunks(MAX_RECORD_OPS).enumerate() {
            let part = sketches.map(|sk| {
                let from = i * MAX_RECORD_OPS * sk.width;
                SketchSlice { width: sk.width, bytes: sk.bytes.get(from..from + chunk.len() * sk.width).unwrap_or_default() }
            });
            encode_record(&mut self.buf, s, kind, chunk, part);
            s += chunk.len() as u64;
        }
        self.file.write_all(&self.buf).map_err(|e| Error::io(&self.path, "write", e))?;
        self.len += self.buf.len() as u64;
        Ok(())
    }

    /// Syncs the file even when this writer appended nothing: after a reopen, the records
    /// already in the file may not have reached the disk before the crash.
    pub fn sync_all(&mut self) -> Result<()> {
        self.file.sync().map_err(|e| Error::io(&self.path, "fsync", e))?;
        self.synced_len = self.len;
        Ok(())
    }

    /// The sync of everything appended so far, to run without `self` (so that appends go on
    /// meanwhile); `None` when everything is synced already.
    pub fn pending_sync(&mut self) -> Result<Option<PendingSync>> {
        if self.synced_len == self.len {
            return Ok(None);
        }
        let handle = match &self.sync_handle {
            Some(h) => h.clone(),
            None => {
                let h = self.file.sync_handle().map_err(|e| Error::io(&self.path, "open for fsync", e))?;
                self.sync_handle.insert(h).clone()
            }
        };
        Ok(Some(PendingSync { path: self.path.clone(), number: self.number, len: self.len, handle }))
    }

    /// Records that `done` ran successfully (a sync taken from another log changes nothing).
    pub fn synced(&mut self, done: &PendingSync) {
        if done.number == self.number {
            self.synced_len = self.synced_len.max(done.len);
        }
    }

    /// Makes every appended record durable (fsync).
    pub fn sync(&mut self) -> Result<()> {
        if self.synced_len < self.len {
            self.file.sync().map_err(|e| Error::io(&self.path, "fsync", e))?;
            self.synced_len = self.len;
        }
        Ok(())
    }
}
