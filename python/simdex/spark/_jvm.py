"""The driver JVM's class-data archive: a local session of the command line starts from it.

Most of a small run's CPU before any work is the driver's JVM loading, verifying and
linking Spark's classes (some ten thousand, from about 250 jars). The JVM can keep them, as
its own class-data sharing does for the JDK's: a run that finds no archive asks its JVM to
write one of the classes it loaded when it exits (``-XX:ArchiveClassesAtExit``, Java 13 and
later); the command waits for its JVM, checks that a JVM starts from the file, and renames it
into place (``finish``); every later run maps it (``-XX:SharedArchiveFile``). Measured on the
2-core Xeon (Spark III, session 9): a local session's start, its first SQL job and first
Python job in half the CPU time.

The archive is a cache, under ``$XDG_CACHE_HOME/simdex`` (else ``~/.cache/simdex``), about
150 MB, one a Spark installation and JVM (``archive_path`` names it after them); deleting it
only costs the next run a new one. The JVM itself refuses an archive made for another JVM or
class path (it then runs without, as before). It is only asked for where the command sets
the driver's JVM options itself (``LOCAL_DEFAULTS``): ``--conf
spark.driver.extraJavaOptions=...`` or ``SIMDEX_SPARK_CDS=0`` turns it off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from typing import Optional, Tuple

# the JVM's logging of class-data sharing off: its warnings (a class it cannot archive, an
# archive it cannot use) would go to the command's stdout
QUIET = "-Xlog:cds*=off"


def java_home() -> Optional[str]:
    """The Java installation pyspark starts (``JAVA_HOME``, else ``java`` on the path), or None."""
    home = os.environ.get("JAVA_HOME")
    if home:
        return os.path.realpath(home)
    java = shutil.which("java")
    return os.path.dirname(os.path.dirname(os.path.realpath(java))) if java else None


def java_release(home: str) -> Optional[Tuple[int, str]]:
    """``(feature version, runtime version)`` from the installation's ``release`` file (no JVM
    started), or None when it has none."""
    try:
        with open(os.path.join(home, "release"), encoding="utf-8") as f:
            fields = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    except OSError:
        return None
    version = fields.get("JAVA_VERSION", "").strip('"')
    parts = version.split(".")
    if not parts[0].isdigit():
        return None
    feature = int(parts[1]) if parts[0] == "1" and len(parts) > 1 and parts[1].isdigit() else int(parts[0])
    return feature, fields.get("JAVA_RUNTIME_VERSION", version).strip('"')


def archive_path(spark_home: str, home: str, runtime: str, cache: Optional[str] = None) -> str:
    """The archive for this Spark (its folder, version and jars) and this JVM (its folder,
    version and library's time)."""
    cache = cache or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "simdex")
    key = [os.path.realpath(spark_home), home, runtime]
    for path in (os.path.join(spark_home, "jars"), os.path.join(home, "lib", "server", "libjvm.so")):
        try:
            key.append(str(os.stat(path).st_mtime_ns))
        except OSError:
            key.append("")
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]
    return os.path.join(cache, f"spark-jvm-{digest}.jsa")


class Archive:
    """One run's use of the archive: ``options`` for the driver's JVM; ``finish`` after the
    session stopped."""

    def __init__(self, path: str, java: str, create: bool):
        self.path, self.java, self.create = path, java, create
        self.tmp = f"{path}.{os.getpid()}.tmp"

    @property
    def options(self) -> str:
        return f"-XX:ArchiveClassesAtExit={self.tmp} {QUIET}" if self.create else f"-XX:SharedArchiveFile={self.path} {QUIET}"

    def finish(self, proc) -> bool:
        """After the session stopped: when this run writes the archive, ends the JVM (``proc``,
        the gateway's process: it exits when its stdin closes, writing the archive), then
        renames the file into place if a JVM starts from it. Returns whether it did."""
        if not self.create or proc is None:
            return False
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=300)
            ok = proc.returncode == 0 and os.path.exists(self.tmp)
            # a cut archive would crash every JVM that maps it: one must start from it first
            ok = ok and subprocess.run([self.java, f"-XX:SharedArchiveFile={self.tmp}", QUIET, "-version"], capture_output=True, timeout=120).returncode == 0
            if ok:
                os.replace(self.tmp, self.path)
            return ok
        except (OSError, subprocess.SubprocessError):
            return False
        finally:
            if os.path.exists(self.tmp):
                os.remove(self.tmp)


def _remove_orphans(path: str) -> None:
    """Removes the half-made archives (``PATH.PID.tmp``) of runs that ended before renaming
    theirs (their process gone)."""
    folder, name = os.path.split(path)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for n in names:
        pid = n[len(name) + 1 : -len(".tmp")]
        if n.startswith(name + ".") and n.endswith(".tmp") and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.remove(os.path.join(folder, n))
            except OSError:
                pass


def archive(spark_home: Optional[str], cache: Optional[str] = None) -> Optional[Archive]:
    """The archive's use for a session of the Spark at ``spark_home``, or None where it cannot
    be had: turned off (``SIMDEX_SPARK_CDS=0``), not POSIX, no Java 13 or later found, no
    writable cache folder."""
    if os.environ.get("SIMDEX_SPARK_CDS", "1") == "0" or os.name != "posix" or not spark_home:
        return None
    home = java_home()
    release = java_release(home) if home else None
    if release is None or release[0] < 13:
        return None
    path = archive_path(spark_home, home, release[1], cache)
    java = os.path.join(home, "bin", "java")
    _remove_orphans(path)
    if os.path.isfile(path):
        return Archive(path, java, False)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    except OSError:
        return None
    if not os.access(os.path.dirname(path), os.W_OK):
        return None
    return Archive(path, java, True)
