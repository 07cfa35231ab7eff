//! An in-memory [`Storage`] for tests that fails or crashes after the n-th operation and, on
//! restart, keeps only what was durable: file data up to each file's last sync (optionally
//! plus a torn prefix of the rest) and directory entries as of each directory's last sync.
//!
//! Built only for tests (`cfg(test)` or the `test-support` feature); the library never uses
//! it. Operations that change state (create, open for append, write, sync, rename, remove,
//! directory sync, truncate, create directory) are counted; reads are not, but fail once the
//! storage has crashed, like every call of a dead process.

// Indexing: the crash-simulating storage for tests indexes its own in-memory files at lengths it tracks.
#![allow(clippy::indexing_slicing)]
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::storage::{parent_dir, FileBytes, LockGuard, Storage, SyncHandle, WriteFile};

/// What survives of a file's unsynced bytes when the storage restarts after a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// Nothing: every file ends at its last sync.
    DropUnsynced,
    /// A pseudo-random prefix of the unsynced bytes (from the seed) survives: a torn write.
    TornTail {
        /// Seed of the generator that picks each prefix length.
        seed: u64,
    },
}

#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    /// `data[..durable_len]` is on "disk". Data is only ever appended, and truncation syncs,
    /// so the durable content is always a prefix of the current one.
    durable_len: usize,
}

#[derive(Debug)]
struct MemFs {
    names: BTreeMap<PathBuf, usize>,
    durable_names: BTreeMap<PathBuf, usize>,
    inodes: Vec<Inode>,
    ops: u64,
    /// Operations allowed before the next one fails.
    limit: Option<u64>,
    /// The failure is a crash: every later call fails too.
    crash_at_limit: bool,
    crashed: bool,
    locks: BTreeSet<PathBuf>,
    mode: CrashMode,
    /// What `available_space` reports (`None`: no limit known).
    available: Option<u64>,
}

impl MemFs {
    fn new(mode: CrashMode) -> Self {
        Self {
            names: BTreeMap::new(),
            durable_names: BTreeMap::new(),
            inodes: Vec::new(),
            ops: 0,
            limit: None,
            crash_at_limit: false,
            crashed: false,
            locks: BTreeSet::new(),
            mode,
            available: None,
        }
    }

    fn alive(&self) -> io::Result<()> {
        if self.crashed {
            Err(io::Error::other("simulated crash: the storage is gone"))
        } else {
            Ok(())
        }
    }

    /// Counts one state-changing operation, failing it when the limit is reached.
    fn op(&mut self) -> io::Result<()> {
        self.alive()?;
        if let Some(limit) = self.limit {
            if self.ops >= limit {
                if self.crash_at_limit {
                    self.crashed = true;
                    return Err(io::Error::other(format!("simulated crash at operation {}", self.ops + 1)));
                }
                return Err(io::Error::other(format!("simulated I/O failure at operation {}", self.ops + 1)));
            }
        }
        self.ops += 1;
        Ok(())
    }

    fn inode(&self, path: &Path) -> io::Result<usize> {
        self.names.get(path).copied().ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{}: no such file", path.display())))
    }
}

/// The in-memory file system. Clones share the same files.
#[derive(Clone, Debug)]
pub struct MemStorage {
    fs: Arc<Mutex<MemFs>>,
}

impl Default for MemStorage {
    fn default() -> Self {
        Self::new(CrashMode::DropUnsynced)
    }
}

impl MemStorage {
    /// An empty file system whose crashes behave as `mode` says.
    pub fn new(mode: CrashMode) -> Self {
        Self { fs: Arc::new(Mutex::new(MemFs::new(mode))) }
    }

    fn fs(&self) -> MutexGuard<'_, MemFs> {
        self.fs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `available_space` report `bytes` (`None`: no limit known, the default). Only
    /// a report: writes are not refused by it.
    pub fn set_available_space(&self, bytes: Option<u64>) {
        self.fs().available = bytes;
    }

    /// State-changing operations performed so far.
    pub fn ops(&self) -> u64 {
        self.fs().ops
    }

    /// The operation after the next `n` fails with an I/O error (later ones work again
    /// only if the limit is lifted with `fail_after(u64::MAX)`).
    pub fn fail_after(&self, n: u64) {
        let mut fs = self.fs();
        fs.limit = Some(fs.ops.saturating_add(n));
        fs.crash_at_limit = false;
    }

    /// The process "dies" at the operation after the next `n`: it and every later call fail.
    pub fn crash_after(&self, n: u64) {
        let mut fs = self.fs();
        fs.limit = Some(fs.ops.saturating_add(n));
        fs.crash_at_limit = true;
    }

    /// True once a crash has happened.
    pub fn has_crashed(&self) -> bool {
        self.fs().crashed
    }

    /// The file system as a new process finds it after a power loss now (or after the
    /// crash): durable directory entries and durable data (plus torn tails, by the mode).
    /// The old handle keeps failing; the returned one starts with no limit.
    pub fn restart(&self) -> MemStorage {
        let mut fs = self.fs();
        fs.crashed = true;
        let mode = fs.mode;
        let mut rng = match mode {
            CrashMode::TornTail { seed } => seed ^ fs.ops.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            CrashMode::DropUnsynced => 0,
        };
        let mut next = MemFs::new(mode);
        let mut remap = BTreeMap::new();
        for (name, &ino) in &fs.durable_names {
            let new_ino = *remap.entry(ino).or_insert_with(|| {
                let inode = &fs.inodes[ino];
                let mut keep = inode.durable_len;
                if let CrashMode::TornTail { .. } = mode {
                    let extra = inode.data.len() - inode.durable_len;
                    if extra > 0 {
                        rng = splitmix(rng);
                        keep += (rng % (extra as u64 + 1)) as usize;
                    }
                }
                let data = inode.data[..keep].to_vec();
                next.inodes.push(Inode { durable_len: data.len(), data });
                next.inodes.len() - 1
            });
            next.names.insert(name.clone(), new_ino);
            next.durable_names.insert(name.clone(), new_ino);
        }
        MemStorage { fs: Arc::new(Mutex::new(next)) }
    }

    /// The current content of `path`, if it exists.
    pub fn file(&self, path: &Path) -> Option<Vec<u8>> {
        let fs = self.fs();
        fs.names.get(path).map(|&i| fs.inodes[i].data.clone())
    }

    /// Writes `bytes` to `path` durably (name and data), bypassing the operation counter:
    /// for tests that plant damaged files.
    pub fn put(&self, path: &Path, bytes: &[u8]) {
        let mut fs = self.fs();
        fs.inodes.push(Inode { data: bytes.to_vec(), durable_len: bytes.len() });
        let ino = fs.inodes.len() - 1;
        fs.names.insert(path.to_path_buf(), ino);
        fs.durable_names.insert(path.to_path_buf(), ino);
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct MemFile {
    fs: Arc<Mutex<MemFs>>,
    ino: usize,
}

impl MemFile {
    fn fs(&self) -> MutexGuard<'_, MemFs> {
        self.fs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Write for MemFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut fs = self.fs();
        fs.op()?;
        fs.inodes[self.ino].data.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.fs().alive()
    }
}

impl WriteFile for MemFile {
    fn sync(&mut self) -> io::Result<()> {
        SyncHandle::sync(self)
    }

    fn sync_handle(&self) -> io::Result<Arc<dyn SyncHandle>> {
        Ok(Arc::new(MemFile { fs: self.fs.clone(), ino: self.ino }))
    }
}

impl SyncHandle for MemFile {
    fn sync(&self) -> io::Result<()> {
        let mut fs = self.fs();
        fs.op()?;
        let inode = &mut fs.inodes[self.ino];
        inode.durable_len = inode.data.len();
        Ok(())
    }
}

struct MemLock {
    fs: Arc<Mutex<MemFs>>,
    path: PathBuf,
}

impl Drop for MemLock {
    fn drop(&mut self) {
        self.fs.lock().unwrap_or_else(|p| p.into_inner()).locks.remove(&self.path);
    }
}

impl Storage for MemStorage {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let mut fs = self.fs();
        fs.op()?;
        fs.inodes.push(Inode::default());
        let ino = fs.inodes.len() - 1;
        fs.names.insert(path.to_path_buf(), ino);
        Ok(Box::new(MemFile { fs: self.fs.clone(), ino }))
    }

    fn append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let mut fs = self.fs();
        fs.op()?;
        let ino = match fs.names.get(path) {
            Some(&ino) => ino,
            None => {
                fs.inodes.push(Inode::default());
                let ino = fs.inodes.len() - 1;
                fs.names.insert(path.to_path_buf(), ino);
                ino
            }
        };
        Ok(Box::new(MemFile { fs: self.fs.clone(), ino }))
    }

    fn read(&self, path: &Path) -> io::Result<FileBytes> {
        Ok(FileBytes::from_vec(self.read_copy(path)?))
    }

    fn read_copy(&self, path: &Path) -> io::Result<Vec<u8>> {
        let fs = self.fs();
        fs.alive()?;
        let ino = fs.inode(path)?;
        Ok(fs.inodes[ino].data.clone())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut fs = self.fs();
        fs.op()?;
        let ino = fs.inode(from)?;
        fs.names.remove(from);
        fs.names.insert(to.to_path_buf(), ino);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut fs = self.fs();
        fs.op()?;
        fs.inode(path)?;
        fs.names.remove(path);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut fs = self.fs();
        fs.op()?;
        let in_dir = |p: &Path| parent_dir(p) == dir;
        fs.durable_names.retain(|p, _| !in_dir(p));
        let current: Vec<(PathBuf, usize)> = fs.names.iter().filter(|(p, _)| in_dir(p)).map(|(p, &i)| (p.clone(), i)).collect();
        fs.durable_names.extend(current);
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let fs = self.fs();
        fs.alive()?;
        Ok(fs.names.keys().filter(|p| parent_dir(p) == dir).filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())).collect())
    }

    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        self.fs().op()
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut fs = self.fs();
        fs.op()?;
        let ino = fs.inode(path)?;
        let inode = &mut fs.inodes[ino];
        inode.data.truncate(len as usize);
        inode.durable_len = inode.data.len();
        Ok(())
    }

    fn available_space(&self, _dir: &Path) -> io::Result<Option<u64>> {
        Ok(self.fs().available)
    }

    fn lock(&self, path: &Path) -> io::Result<LockGuard> {
        let mut fs = self.fs();
        fs.alive()?;
        if !fs.locks.insert(path.to_path_buf()) {
            return Err(io::Error::new(io::ErrorKind::WouldBlock, "lock held"));
        }
        Ok(LockGuard::new(MemLock { fs: self.fs.clone(), path: path.to_path_buf() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_keeps_only_synced_data_and_synced_names() {
        let s = MemStorage::default();
        let dir = Path::new("d");
        let mut a = s.create(&dir.join("a")).unwrap();
        a.write_all(b"hello").unwrap();
        a.sync().unwrap();
        a.write_all(b" world").unwrap();
        s.sync_dir(dir).unwrap();
        let mut b = s.create(&dir.join("b")).unwrap();
        b.write_all(b"unsynced name").unwrap();
        b.sync().unwrap();
        s.rename(&dir.join("a"), &dir.join("c")).unwrap();
        let after = s.restart();
        assert_eq!(after.file(&dir.join("a")).unwrap(), b"hello");
        assert!(after.file(&dir.join("b")).is_none());
        assert!(after.file(&dir.join("c")).is_none());
        assert!(s.create(&dir.join("x")).is_err(), "the old process is dead");
    }

    #[test]
    fn crash_after_n_operations_and_torn_tails() {
        let s = MemStorage::new(CrashMode::TornTail { seed: 3 });
        let dir = Path::new("d");
        let mut a = s.create(&dir.join("a")).unwrap();
        s.sync_dir(dir).unwrap();
        s.crash_after(2);
        a.write_all(b"0123456789").unwrap();
        a.write_all(b"abc").unwrap();
        assert!(a.write_all(b"never").is_err());
        assert!(s.has_crashed());
        let after = s.restart();
        let data = after.file(&dir.join("a")).unwrap();
        assert!(b"0123456789abc".starts_with(&data));
        let _l = after.lock(&dir.join("LOCK")).unwrap();
        assert_eq!(after.lock(&dir.join("LOCK")).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    }
}
