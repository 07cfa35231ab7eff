//! A small tmpfs for real full-disk tests: mounted by the test (root only; where mounting
//! is not allowed, [`Tmpfs::mount`] says why and the test skips), unmounted on drop. Shared by
//! the library's tests (`tests/it/engine_enospc.rs`) and the CLI's
//! (`tools/tests/cli_full_disk.rs`, which includes this file by path).

use std::path::Path;
use std::process::Command;

/// A tmpfs mounted at a temporary directory, unmounted (and the directory removed) on drop,
/// also when the test fails.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `bytes`, or says why it cannot.
    pub fn mount(bytes: u64) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"]).arg(dir.path()).output().map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!("mount -t tmpfs failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(Tmpfs { dir })
    }

    /// Mounts a tmpfs of `bytes` for a test, or says on stderr why the test skips and
    /// returns None (`let Some(disk) = Tmpfs::mount_or_skip(n) else { return };`).
    pub fn mount_or_skip(bytes: u64) -> Option<Tmpfs> {
        Tmpfs::mount(bytes).map_err(|why| eprintln!("skipped: a real full disk needs a tmpfs mount ({why})")).ok()
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Changes the size (a remount keeps the files).
    pub fn resize(&self, bytes: u64) {
        let status = Command::new("mount").args(["-o", &format!("remount,size={bytes}")]).arg(self.dir.path()).status().expect("run mount");
        assert!(status.success(), "remount to {bytes} bytes");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount").arg(self.dir.path()).status().is_ok_and(|s| s.success());
        if !ok {
            // Something still holds a file open (a failed assertion mid-test): detach it.
            let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
        }
    }
}
