//! Helpers shared by the integration tests: data generators and the brute-force oracle.

use simdex::{build_segment, BuildOptions, Match, Segment};
use std::path::{Path, PathBuf};

/// The oracle: every stored (fingerprint, id) within `k` of `q`, by a linear Hamming scan,
/// sorted as the library sorts matches, each (fingerprint, id) once.
pub fn brute_force(fps: &[u64], ids: Option<&[u64]>, q: u64, k: u32) -> Vec<Match> {
    let mut out: Vec<Match> =
        fps.iter().enumerate().filter(|(_, &x)| (x ^ q).count_ones() <= k).map(|(i, &x)| Match::new(x, (x ^ q).count_ones(), ids.map(|ids| ids[i]))).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Builds a segment from `fps` (and `ids`) at `dir/name` and opens it.
pub fn build(dir: &Path, name: &str, fps: &[u64], ids: Option<&[u64]>, options: &BuildOptions) -> (PathBuf, Segment) {
    let path = dir.join(name);
    build_segment(&simdex::storage::FsStorage, &path, fps, ids, options).expect("build");
    let seg = Segment::open(&path).expect("open");
    (path, seg)
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// `x` with `n` distinct random bits flipped.
    pub fn flip(&mut self, x: u64, n: u32) -> u64 {
        let mut y = x;
        while (y ^ x).count_ones() < n {
            y ^= 1 << (self.next() % 64);
        }
        y
    }
}

/// What an [`Intercepted`] storage runs before each operation: the operation's name
/// (`create`, `append`, `read`, `rename`, `remove`, `sync_dir`, `list`, `create_dir_all`,
/// `truncate`, `lock`) and its path (for `rename`, the target); an error fails the operation.
pub type Interceptor = dyn Fn(&str, &Path) -> std::io::Result<()> + Send + Sync;

/// A [`MemStorage`] with a hook before every operation: a fault to inject, or another
/// actor's work to run at an exact moment.
#[derive(Clone)]
pub struct Intercepted {
    pub inner: simdex::storage::MemStorage,
    pub before: std::sync::Arc<Interceptor>,
}

impl std::fmt::Debug for Intercepted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Intercepted")
    }
}

impl simdex::storage::Storage for Intercepted {
    fn create(&self, path: &Path) -> std::io::Result<Box<dyn simdex::storage::WriteFile>> {
        (self.before)("create", path)?;
        self.inner.create(path)
    }
    fn append(&self, path: &Path) -> std::io::Result<Box<dyn simdex::storage::WriteFile>> {
        (self.before)("append", path)?;
        self.inner.append(path)
    }
    fn read(&self, path: &Path) -> std::io::Result<simdex::storage::FileBytes> {
        (self.before)("read", path)?;
        self.inner.read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        (self.before)("rename", to)?;
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        (self.before)("remove", path)?;
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        (self.before)("sync_dir", dir)?;
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        (self.before)("list", dir)?;
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        (self.before)("create_dir_all", dir)?;
        self.inner.create_dir_all(dir)
    }
    fn truncate(&self, path: &Path, len: u64) -> std::io::Result<()> {
        (self.before)("truncate", path)?;
        self.inner.truncate(path, len)
    }
    fn lock(&self, path: &Path) -> std::io::Result<simdex::storage::LockGuard> {
        (self.before)("lock", path)?;
        self.inner.lock(path)
    }
    fn available_space(&self, dir: &Path) -> std::io::Result<Option<u64>> {
        (self.before)("available_space", dir)?;
        self.inner.available_space(dir)
    }
}

/// A storage hook's hold (for an [`Intercepted`] storage): the first call with `here` set
/// reports on `held` and waits until `go` is raised; once `go` is raised every call takes
/// 20 ms, so what was held cannot end before the test's next step, however slow the machine.
pub fn hold_then_slow(here: bool, held: &std::sync::Mutex<Option<std::sync::mpsc::Sender<()>>>, go: &std::sync::atomic::AtomicBool) {
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    if here {
        if let Some(tx) = held.lock().unwrap().take() {
            let _ = tx.send(());
            while !go.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    if go.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Flips a bit of every byte of the band file at `path` after its head (its first 1 KiB
/// page), so that every page of it fails its checksum.
pub fn damage_band_pages(storage: &dyn simdex::storage::Storage, path: &Path) {
    let mut bytes = storage.read_copy(path).unwrap();
    for b in &mut bytes[1024..] {
        *b ^= 0x10;
    }
    let mut w = storage.create(path).unwrap();
    std::io::Write::write_all(&mut w, &bytes).unwrap();
    w.sync().unwrap();
}
