//! The file operations simdex needs, behind a small trait, so that tests can run the same
//! code against an in-memory file system that crashes, tears and drops unsynced data.
//!
//! [`FsStorage`] is the real file system: files are read through `memmap2`. The module owns
//! no format knowledge; callers pass paths and bytes.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file opened for writing.
pub trait WriteFile: Write + Send {
    /// Makes everything written so far durable (fsync of the data).
    fn sync(&mut self) -> io::Result<()>;

    /// A handle that syncs this file from another thread while this one goes on writing
    /// (the engine's group commit fsyncs the log without holding the writer's lock).
    fn sync_handle(&self) -> io::Result<Arc<dyn SyncHandle>>;

    /// Gives a file made by [`Storage::create_unnamed`] the name `path` (which must not
    /// exist). Other files cannot: `Unsupported`.
    fn link_as(&mut self, path: &Path) -> io::Result<()> {
        let _ = path;
        Err(io::Error::new(io::ErrorKind::Unsupported, "only an unnamed file can be linked into a directory"))
    }
}

/// Syncs one file's data; see [`WriteFile::sync_handle`].
pub trait SyncHandle: Send + Sync {
    /// Makes everything written to the file before this call durable. (Writes that run
    /// concurrently with it may or may not be made durable.)
    fn sync(&self) -> io::Result<()>;
}

/// The whole content of a file, shared and immutable (an mmap for files on disk).
///
/// A mapping is made for random access (`MADV_RANDOM`): a query touches a few 1 KB blocks
/// far apart, and the kernel's default read-around (up to `read_ahead_kb` around each
/// fault, 8 MiB on some disks) would read megabytes per cold query. Readers that do know
/// what they will read say so with [`Self::will_need`] (a query's blocks before it
/// decodes any; a sequential scan's next window) and [`Self::done_with`] (a scan's
/// consumed window, so it does not stay resident in the process).
#[derive(Clone)]
pub struct FileBytes(Arc<Backing>);

enum Backing {
    Owned(Vec<u8>),
    /// A mapping read with advice.
    Mapped(memmap2::Mmap),
    /// A mapping left to the kernel's defaults (`SIMDEX_MMAP_ADVICE=0`).
    Plain(memmap2::Mmap),
}

/// Read advice is on unless the environment variable `SIMDEX_MMAP_ADVICE` is `0`: a
/// diagnostic switch for measuring what the advice is worth (`benches/RESULTS.md`).
fn advice_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var_os("SIMDEX_MMAP_ADVICE").is_none_or(|v| v != "0"))
}

impl FileBytes {
    /// Wraps an owned buffer.
    pub fn from_vec(bytes: Vec<u8>) -> Self {
        FileBytes(Arc::new(Backing::Owned(bytes)))
    }

    /// Wraps a mapping, advising the kernel that reads are random.
    fn from_map(map: memmap2::Mmap) -> Self {
        if !advice_enabled() {
            return FileBytes(Arc::new(Backing::Plain(map)));
        }
        // A hint only: if the kernel refuses it, reads are as correct, just read ahead.
        let _ = map.advise(memmap2::Advice::Random);
        FileBytes(Arc::new(Backing::Mapped(map)))
    }

    /// True when the bytes are a mapping of a file that takes read advice (reads may go to
    /// the disk).
    pub fn is_mapped(&self) -> bool {
        matches!(*self.0, Backing::Mapped(_))
    }

    /// Asks the kernel to start reading `offset .. offset + len` now, without waiting
    /// (`MADV_WILLNEED`): issued for several ranges before any is touched, their reads
    /// overlap. A no-op for owned bytes and for ranges outside the file.
    pub fn will_need(&self, offset: usize, len: usize) {
        if let Backing::Mapped(map) = &*self.0 {
            if let Some((offset, len)) = page_range(offset, len, map.len()) {
                let _ = map.advise_range(memmap2::Advice::WillNeed, offset, len);
            }
        }
    }

    /// Tells the kernel this process is done with `offset .. offset + len` for now
    /// (`MADV_DONTNEED`): the pages leave the process's resident set (they stay in the page
    /// cache, and a later read faults them back in). A no-op for owned bytes.
    pub fn done_with(&self, offset: usize, len: usize) {
        if let Backing::Mapped(map) = &*self.0 {
            if let Some((offset, len)) = page_range(offset, len, map.len()) {
                // SAFETY: the mapping is read-only and of a file simdex never modifies in
                // place (see `FsStorage::read`), so dropping its pages from this process
                // loses nothing: the next read of these bytes faults in the same content
                // from the page cache or the file. No reference into the range is
                // invalidated (the virtual addresses stay mapped). Exercised by
                // `segment::reader::prefetch::tests::sequential_scans_advise_and_read_the_same_bytes`.
                let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len) };
            }
        }
    }
}

/// `offset .. offset + len` widened to whole pages and clipped to `file_len`, or `None`
/// when nothing of it is in the file.
fn page_range(offset: usize, len: usize, file_len: usize) -> Option<(usize, usize)> {
    const PAGE: usize = 4096;
    let start = offset / PAGE * PAGE;
    let end = offset.checked_add(len)?.min(file_len);
    (start < end).then(|| (start, end - start))
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &*self.0 {
            Backing::Owned(v) => v,
            Backing::Mapped(m) | Backing::Plain(m) => m,
        }
    }
}

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileBytes({} bytes)", self.len())
    }
}

/// File-system operations used by segments, the log and the manifest.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Creates `path` (truncating it if it exists) for writing.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>>;
    /// Opens `path` for appending, creating it if missing.
    fn append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>>;
    /// The whole content of `path`.
    fn read(&self, path: &Path) -> io::Result<FileBytes>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Deletes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, deletions) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Names of the files in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Creates `dir` and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Truncates `path` to `len` bytes and syncs it.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// The content of `path` as an owned copy. Used for files that may still grow or be
    /// truncated while they are read (logs), where a mapping could fault.
    fn read_copy(&self, path: &Path) -> io::Result<Vec<u8>> {
        Ok(self.read(path)?.to_vec())
    }
    /// Takes the exclusive lock `path` (creating the file), held until the guard is dropped.
    /// Fails with [`io::ErrorKind::WouldBlock`] when another holder has it, in this process
    /// or another.
    fn lock(&self, path: &Path) -> io::Result<LockGuard>;
    /// Bytes a new file in `dir` can still take, when this storage can tell (`None`: no
    /// limit known, as for memory).
    fn available_space(&self, dir: &Path) -> io::Result<Option<u64>> {
        let _ = dir;
        Ok(None)
    }
    /// A new file in `dir` with no name until [`WriteFile::link_as`] gives it one (Linux's
    /// `O_TMPFILE`), so that a process killed while writing it leaves nothing behind.
    /// `Ok(None)` where the storage or the file system cannot: the caller writes under a
    /// temporary name instead.
    fn create_unnamed(&self, dir: &Path) -> io::Result<Option<Box<dyn WriteFile>>> {
        let _ = dir;
        Ok(None)
    }
}

/// Holds a lock taken with [`Storage::lock`] until dropped.
pub struct LockGuard(#[allow(dead_code)] Box<dyn Send + Sync>);

impl LockGuard {
    /// Wraps whatever releases the lock when dropped.
    pub fn new(holder: impl Send + Sync + 'static) -> Self {
        LockGuard(Box::new(holder))
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LockGuard")
    }
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct FsStorage;

struct FsFile(File);

impl Write for FsFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl WriteFile for FsFile {
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn sync_handle(&self) -> io::Result<Arc<dyn SyncHandle>> {
        // A second descriptor of the same open file: fdatasync through it flushes the file.
        Ok(Arc::new(FsSync(self.0.try_clone()?)))
    }

    #[cfg(target_os = "linux")]
    fn link_as(&mut self, path: &Path) -> io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::io::AsRawFd;
        let invalid = |_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte");
        let from = std::ffi::CString::new(format!("/proc/self/fd/{}", self.0.as_raw_fd())).map_err(invalid)?;
        let to = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(invalid)?;
        // SAFETY: `from` and `to` are NUL-terminated strings that outlive the call, which
        // only reads them; AT_FDCWD and the flag are plain integers. (The way open(2)
        // documents to name an O_TMPFILE file without CAP_DAC_READ_SEARCH.)
        let rc = unsafe { libc::linkat(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::AT_SYMLINK_FOLLOW) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

struct FsSync(File);

impl SyncHandle for FsSync {
    fn sync(&self) -> io::Result<()> {
        self.0.sync_data()
    }
}

impl Storage for FsStorage {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        Ok(Box::new(FsFile(File::create(path)?)))
    }

    #[cfg(target_os = "linux")]
    fn create_unnamed(&self, dir: &Path) -> io::Result<Option<Box<dyn WriteFile>>> {
        use std::os::unix::fs::OpenOptionsExt;
        match OpenOptions::new().read(true).write(true).mode(0o644).custom_flags(libc::O_TMPFILE).open(dir) {
            Ok(f) => Ok(Some(Box::new(FsFile(f)))),
            // file systems without O_TMPFILE (and kernels before 3.11)
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        Ok(Box::new(FsFile(OpenOptions::new().create(true).append(true).open(path)?)))
    }

    fn read(&self, path: &Path) -> io::Result<FileBytes> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(io::Error::new(io::ErrorKind::IsADirectory, "is a directory, not a file (an index directory? this command reads segment files)"));
        }
        if meta.len() == 0 {
            return Ok(FileBytes::from_vec(Vec::new()));
        }
        // SAFETY: simdex never modifies a file after it is complete: segments and manifests
        // are written under a temporary name and renamed into place, and readers map only
        // complete files. Another process truncating or rewriting the file while it is
        // mapped would break this (reads could fault or change); that is outside the
        // supported use, as it is for every mmap-based store. Exercised by every test that
        // opens a segment from disk.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        Ok(FileBytes::from_map(map))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(len)?;
        f.sync_all()
    }

    fn read_copy(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    fn available_space(&self, dir: &Path) -> io::Result<Option<u64>> {
        fs2::available_space(dir).map(Some)
    }

    fn lock(&self, path: &Path) -> io::Result<LockGuard> {
        use fs2::FileExt;
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        match file.try_lock_exclusive() {
            Ok(()) => Ok(LockGuard::new(file)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.raw_os_error() == fs2::lock_contended_error().raw_os_error() => Err(io::Error::new(io::ErrorKind::WouldBlock, e)),
            Err(e) => Err(e),
        }
    }
}

#[cfg(any(test, feature = "test-support"))]
mod mem;
#[cfg(any(test, feature = "test-support"))]
pub use mem::{CrashMode, MemStorage};

/// The temporary name a file is written under before it is renamed into place (`*.tmp`:
/// an orphan if a writable open finds it).
pub(crate) fn temporary_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// The directory holding `path` (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes `bytes` to `path` so that a crash leaves either the old file or the new one:
/// writes `path.tmp`, syncs it, renames it over `path` and syncs the directory. A failure
/// removes the temporary file at once (a crash leaves it for the next open to remove).
pub fn write_atomically(storage: &dyn Storage, path: &Path, bytes: &[u8]) -> crate::Result<()> {
    write_atomically_from(storage, path, |out| out.write_all(bytes))
}

/// [`write_atomically`] for a file written piece by piece (one that need not fit in memory):
/// `fill` writes its bytes through a 1 MiB buffer; the file replaces `path` only when it
/// succeeded.
pub fn write_atomically_from(storage: &dyn Storage, path: &Path, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> crate::Result<()> {
    write_atomically_with(storage, path, |out| fill(out).map_err(FillError::Write))
}

/// Why filling a file for [`write_atomically_with`] failed: writing it, or making its bytes
/// (reading what they are made from).
pub(crate) enum FillError {
    Write(io::Error),
    Source(crate::Error),
}

impl From<crate::Error> for FillError {
    fn from(e: crate::Error) -> Self {
        FillError::Source(e)
    }
}

/// [`write_atomically`] for a file made piece by piece: `fill` writes its bytes (through a
/// 1 MiB buffer) and returns what the caller wants back, e.g. the length it wrote. The
/// temporary file is synced, renamed over `path` and the directory synced only when `fill`
/// succeeded; else it is removed at once.
pub(crate) fn write_atomically_with<T>(storage: &dyn Storage, path: &Path, fill: impl FnOnce(&mut dyn Write) -> Result<T, FillError>) -> crate::Result<T> {
    use crate::Error;
    let tmp = TempFile::new(storage, temporary_path(path));
    let file = storage.create(tmp.path()).map_err(|e| Error::io(tmp.path(), "create", e))?;
    let mut out = io::BufWriter::with_capacity(1 << 20, file);
    let value = fill(&mut out).map_err(|e| match e {
        FillError::Write(e) => Error::io(tmp.path(), "write", e),
        FillError::Source(e) => e,
    })?;
    let mut file = out.into_inner().map_err(|e| Error::io(tmp.path(), "write", e.into_error()))?;
    file.sync().map_err(|e| Error::io(tmp.path(), "fsync", e))?;
    drop(file);
    storage.rename(tmp.path(), path).map_err(|e| Error::io(path, "rename", e))?;
    tmp.keep();
    let dir = parent_dir(path);
    storage.sync_dir(&dir).map_err(|e| Error::io(&dir, "fsync directory", e))?;
    Ok(value)
}

/// A temporary file that is removed (best effort) when the guard is dropped, unless
/// [`TempFile::keep`] was called: what a failed write leaves behind (a disk-full segment,
/// a spilled run) goes at once, not at the next open.
pub(crate) struct TempFile<'s> {
    storage: &'s dyn Storage,
    path: PathBuf,
    remove: bool,
}

impl<'s> TempFile<'s> {
    /// Guards `path` (the file need not exist yet).
    pub(crate) fn new(storage: &'s dyn Storage, path: PathBuf) -> Self {
        Self { storage, path, remove: true }
    }

    /// The guarded path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Leaves the file alone (it was renamed into place, or is kept on purpose).
    pub(crate) fn keep(mut self) {
        self.remove = false;
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if self.remove {
            let _ = self.storage.remove(&self.path);
        }
    }
}
