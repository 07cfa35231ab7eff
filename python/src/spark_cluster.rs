//! What `simdex.spark cluster` runs in its executors and driver, as library calls over
//! column buffers (little-endian u64s: the int64 buffers of Arrow batches, which the Python
//! side hands over and wraps back without touching a row): a byte range of a fingerprint text
//! file parsed ([`read_fingerprints`]), one partition of the block-split self-join
//! ([`BlockJoin`]) with its sorted pair runs, and the driver's merge of them into the pairs
//! file and the connected components. Nothing here knows Spark.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use simdex::BlockSplit;

use crate::batch::u64s;
use crate::errors::to_py;

/// Bad lines of one byte range reported by name (the rest are counted).
const BAD_LINES_SHOWN: usize = 20;

fn le_bytes(values: impl Iterator<Item = u64>, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 8);
    values.for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    out
}

fn os_error(path: &str, e: std::io::Error) -> PyErr {
    PyOSError::new_err(format!("cannot read {path}: {e}"))
}

/// The lines of a file that start in its bytes `[start, end)`: a task's byte range of a
/// line-oriented input (a line that holds byte `start - 1` belongs to the range before, so
/// every line is read by exactly one range).
struct RangeLines {
    reader: BufReader<File>,
    at: u64,
    end: u64,
    line: Vec<u8>,
}

impl RangeLines {
    fn open(path: &str, start: u64, end: u64) -> std::io::Result<RangeLines> {
        let mut file = File::open(path)?;
        if start > 0 {
            file.seek(SeekFrom::Start(start - 1))?;
        }
        let mut lines = RangeLines { reader: BufReader::with_capacity(1 << 20, file), at: start, end, line: Vec::with_capacity(64) };
        if start > 0 {
            lines.at = start - 1 + lines.reader.read_until(b'\n', &mut lines.line)? as u64;
        }
        Ok(lines)
    }

    /// The next line (with its newline), or None past the range or at the end of the file.
    fn next_line(&mut self) -> std::io::Result<Option<&[u8]>> {
        if self.at >= self.end {
            return Ok(None);
        }
        self.line.clear();
        let n = self.reader.read_until(b'\n', &mut self.line)?;
        self.at += n as u64;
        Ok((n > 0).then_some(self.line.as_slice()))
    }
}

/// What a byte range of a fingerprint file held: the fingerprints and, when asked for,
/// the document id text of each (`\0`-free UTF-8, joined with offsets), the count of bad
/// lines and the first few as `(line number, message)`.
type Read_<'py> = (Bound<'py, PyBytes>, Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>, u64, Vec<(u64, String)>);

/// The fingerprint lines (`FINGERPRINT[<TAB>DOC_ID]`) of `path` that start in the byte range
/// `[start, end)` (a line belongs to the range holding its first byte, so ranges that tile a
/// file read each line once). With `ids`, each line's document id as text (empty when the
/// line has none) as a UTF-8 buffer and its i32 offsets, the layout of an Arrow string
/// column. Bad lines are counted and the first few named by their line number in the file
/// (counting the lines before `start` only when there is one to name).
#[pyfunction]
#[pyo3(signature = (path, start, end, ids=false))]
fn read_fingerprints<'py>(py: Python<'py>, path: &str, start: u64, end: u64, ids: bool) -> PyResult<Read_<'py>> {
    struct Out {
        fps: Vec<u8>,
        id_data: Vec<u8>,
        id_offsets: Vec<u8>,
        bad: u64,
        shown: Vec<(u64, String)>,
    }
    let out = py.allow_threads(|| -> std::io::Result<Out> {
        let mut lines = RangeLines::open(path, start, end)?;
        let mut out = Out { fps: Vec::new(), id_data: Vec::new(), id_offsets: if ids { 0i32.to_le_bytes().to_vec() } else { Vec::new() }, bad: 0, shown: Vec::new() };
        let mut index = 0u64; // lines read in this range
        while let Some(line) = lines.next_line()? {
            index += 1;
            match simdex_fingerprint::parse_fingerprint_line(line) {
                Ok(Some((fp, id))) => {
                    out.fps.extend_from_slice(&fp.to_le_bytes());
                    if ids {
                        if let Some(id) = id {
                            out.id_data.extend_from_slice(id.to_string().as_bytes());
                        }
                        out.id_offsets.extend_from_slice(&(out.id_data.len() as i32).to_le_bytes());
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    out.bad += 1;
                    if out.shown.len() < BAD_LINES_SHOWN {
                        out.shown.push((index, e.to_string()));
                    }
                }
            }
        }
        if !out.shown.is_empty() {
            let before = crate::spark::lines_before(std::path::Path::new(path), start)?;
            out.shown.iter_mut().for_each(|(n, _)| *n += before);
        }
        Ok(out)
    });
    let out = out.map_err(|e| os_error(path, e))?;
    let ids = ids.then(|| (PyBytes::new(py, &out.id_data), PyBytes::new(py, &out.id_offsets)));
    Ok((PyBytes::new(py, &out.fps), ids, out.bad, out.shown))
}

/// Top bits of a fingerprint in `read_members`' bitmap of the members.
const TOP_BITS: u32 = 27;

/// `read_members`' answer: fingerprints, clusters, id data and id offsets.
type Members<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>);

/// The entries among the fingerprint lines of `path` starting in `[start, end)` whose
/// fingerprint is one of `vertices` (little-endian u64s, sorted), with its cluster from
/// `clusters` (same order): `(fps, clusters, id_data, id_offsets)`, the ids as an Arrow
/// string column's buffers (empty for a line without one). Bad lines are skipped (the pair
/// step counted and named them).
#[pyfunction]
fn read_members<'py>(py: Python<'py>, path: &str, start: u64, end: u64, vertices: &[u8], clusters: &[u8]) -> PyResult<Members<'py>> {
    let (vertices, clusters) = (u64s(vertices, "vertices")?, u64s(clusters, "clusters")?);
    if vertices.len() != clusters.len() {
        return Err(PyValueError::new_err(format!("{} vertices but {} clusters", vertices.len(), clusters.len())));
    }
    let out = py.allow_threads(|| -> std::io::Result<[Vec<u8>; 4]> {
        // Most lines are not members: a bitmap of the members' top bits (16 MiB, one cache
        // miss) turns nearly all of them away before a binary search would.
        let mut top = vec![0u64; 1 << (TOP_BITS - 6)];
        for &v in &vertices {
            let t = (v >> (64 - TOP_BITS)) as usize;
            if let Some(w) = top.get_mut(t >> 6) {
                *w |= 1 << (t & 63);
            }
        }
        let maybe = |fp: u64| {
            let t = (fp >> (64 - TOP_BITS)) as usize;
            top.get(t >> 6).is_some_and(|w| w & (1 << (t & 63)) != 0)
        };
        let mut lines = RangeLines::open(path, start, end)?;
        let [mut fps, mut found, mut data, mut offsets] = [Vec::new(), Vec::new(), Vec::new(), 0i32.to_le_bytes().to_vec()];
        while let Some(line) = lines.next_line()? {
            let Ok(Some((fp, id))) = simdex_fingerprint::parse_fingerprint_line(line) else { continue };
            if !maybe(fp) {
                continue;
            }
            let Ok(i) = vertices.binary_search(&fp) else { continue };
            fps.extend_from_slice(&fp.to_le_bytes());
            found.extend_from_slice(&clusters.get(i).copied().unwrap_or(fp).to_le_bytes());
            if let Some(id) = id {
                write!(data, "{id}")?;
            }
            let end = i32::try_from(data.len()).map_err(|_| std::io::Error::other("a range's ids pass 2 GiB: use smaller input ranges"))?;
            offsets.extend_from_slice(&end.to_le_bytes());
        }
        Ok([fps, found, data, offsets])
    });
    let [fps, found, data, offsets] = out.map_err(|e| os_error(path, e))?;
    Ok((PyBytes::new(py, &fps), PyBytes::new(py, &found), PyBytes::new(py, &data), PyBytes::new(py, &offsets)))
}

/// The block-split self-join for a set of `count` fingerprints within `k` (the library's
/// `BlockSplit`): how each group keys a fingerprint, and one partition's join. Pickles as
/// its arguments (every executor plans the same design).
#[pyclass(module = "simdex._simdex", frozen)]
pub(crate) struct BlockJoin {
    count: u64,
    k: u32,
    max_candidates_log2: f64,
    inner: BlockSplit,
}

/// A map task's buckets: partition numbers, repeated marks, and an Arrow binary column's
/// data and offsets.
type Scattered<'py> = (Vec<usize>, Vec<bool>, Bound<'py, PyBytes>, Bound<'py, PyBytes>);

/// One partition's pairs `(a, b)` as two columns, and (group 0) the repeated fingerprints.
type Joined<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>);

impl BlockJoin {
    /// The library's split.
    pub(crate) fn split(&self) -> &BlockSplit {
        &self.inner
    }
}

#[pymethods]
impl BlockJoin {
    #[new]
    #[pyo3(signature = (count, k, max_candidates_log2=2.0))]
    fn new(count: u64, k: u32, max_candidates_log2: f64) -> PyResult<Self> {
        let inner = BlockSplit::new(count.max(1), k, max_candidates_log2).map_err(to_py)?;
        Ok(BlockJoin { count, k, max_candidates_log2, inner })
    }

    fn __reduce__(slf: &Bound<'_, Self>) -> PyResult<(PyObject, (u64, u32, f64))> {
        let me = slf.get();
        Ok((slf.get_type().into_any().unbind(), (me.count, me.k, me.max_candidates_log2)))
    }

    /// Groups: every fingerprint goes to one partition of each.
    #[getter]
    fn groups(&self) -> usize {
        self.inner.groups()
    }

    /// The design's tables.
    #[getter]
    fn tables(&self) -> usize {
        self.inner.design().tables().len()
    }

    /// The design in one line.
    #[getter]
    fn summary(&self) -> String {
        self.inner.design().summary()
    }

    /// Tables joined by each group.
    fn tables_of(&self, group: usize) -> Vec<usize> {
        self.inner.tables_of(group).to_vec()
    }

    /// `(shift, mask)`: group `group` keys a fingerprint by `(fp >> shift) & mask`
    /// (logical shift), so a caller can compute the key itself (in Spark SQL).
    fn key_bits(&self, group: usize) -> (u32, u64) {
        self.inner.key_bits(group)
    }

    /// The map side: `fps` (little-endian u64s, one task's) cut into `parts[g]` partitions
    /// of each group `g`, numbered group after group: `(partitions, repeated, data,
    /// offsets)`, one entry per non-empty bucket in the layout of an Arrow binary column
    /// (the buckets' u64s back to back, and i32 offsets), `repeated` marking the buckets of
    /// fingerprints the task held more than once (for a group-0 partition).
    fn scatter<'py>(&self, py: Python<'py>, fps: &[u8], parts: Vec<usize>) -> PyResult<Scattered<'py>> {
        let fps = u64s(fps, "fps")?;
        let (partitions, repeated, data, offsets) = py
            .allow_threads(|| {
                let scattered = self.inner.scatter(fps, &parts)?;
                let (mut partitions, mut repeated, mut data, mut offsets) = (Vec::new(), Vec::new(), Vec::new(), 0i32.to_le_bytes().to_vec());
                for (i, (f, r)) in scattered.fps.iter().zip(&scattered.repeated).enumerate() {
                    for (is_repeated, values) in [(false, f), (true, r)] {
                        if !values.is_empty() {
                            partitions.push(i);
                            repeated.push(is_repeated);
                            values.iter().for_each(|v| data.extend_from_slice(&v.to_le_bytes()));
                            let end =
                                i32::try_from(data.len()).map_err(|_| simdex::Error::InvalidArgument("a map task's fingerprints pass 2 GiB: use smaller input ranges".into()))?;
                            offsets.extend_from_slice(&end.to_le_bytes());
                        }
                    }
                }
                Ok::<_, simdex::Error>((partitions, repeated, data, offsets))
            })
            .map_err(to_py)?;
        Ok((partitions, repeated, PyBytes::new(py, &data), PyBytes::new(py, &offsets)))
    }

    /// Joins one partition of `group`: `fps` (little-endian u64s) every fingerprint with
    /// one of the partition's keys, `repeated` those a map task held more than once:
    /// `(a, b, repeated)`, the pairs within k it owns and (group 0) the fingerprints stored
    /// more than once.
    fn join<'py>(&self, py: Python<'py>, group: usize, fps: &[u8], repeated: &[u8]) -> PyResult<Joined<'py>> {
        let (fps, repeated) = (u64s(fps, "fps")?, u64s(repeated, "repeated")?);
        let found = py.allow_threads(|| self.inner.join_partition(group, fps, &repeated)).map_err(to_py)?;
        let n = found.pairs.len();
        let a = le_bytes(found.pairs.iter().map(|p| p.0), n);
        let b = le_bytes(found.pairs.iter().map(|p| p.1), n);
        let r = le_bytes(found.repeated.iter().copied(), found.repeated.len());
        Ok((PyBytes::new(py, &a), PyBytes::new(py, &b), PyBytes::new(py, &r)))
    }
}

/// Bytes of a pair run's record: two little-endian u64s.
const RUN_RECORD: usize = 16;

/// A join task's end of the pair step: its pairs `(a[i], b[i])` (little-endian u64s,
/// `a <= b`) and its fingerprints stored more than once (each as `(f, f)`), sorted (unsigned)
/// without repeats and written to `path` as a run for [`merge_pair_runs`] (16-byte records),
/// under a temporary name then renamed: a task run again writes the same bytes. Returns the
/// records written.
#[pyfunction]
fn write_pair_run(py: Python<'_>, path: &str, a: &[u8], b: &[u8], repeated: &[u8]) -> PyResult<u64> {
    let (a, b, repeated) = (u64s(a, "a")?, u64s(b, "b")?, u64s(repeated, "repeated")?);
    if a.len() != b.len() {
        return Err(PyValueError::new_err(format!("{} first fingerprints but {} second ones", a.len(), b.len())));
    }
    py.allow_threads(|| -> PyResult<u64> {
        let mut run: Vec<(u64, u64)> = a.into_iter().zip(b).chain(repeated.into_iter().map(|f| (f, f))).collect();
        run.sort_unstable();
        run.dedup();
        let tmp = format!("{path}.{}.tmp", std::process::id());
        let failed = |e: std::io::Error| PyOSError::new_err(format!("cannot write {path}: {e}"));
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp).map_err(failed)?);
        for &(x, y) in &run {
            out.write_all(&x.to_le_bytes()).and_then(|_| out.write_all(&y.to_le_bytes())).map_err(failed)?;
        }
        out.flush().map_err(failed)?;
        drop(out);
        std::fs::rename(&tmp, path).map_err(failed)?;
        Ok(run.len() as u64)
    })
}

/// The next record of a pair run, None at its end.
fn next_record(run: &mut BufReader<File>, path: &str) -> PyResult<Option<(u64, u64)>> {
    let mut record = [0u8; RUN_RECORD];
    match run.read_exact(&mut record) {
        Ok(()) => {
            let (x, y) = record.split_at(8);
            let word = |w: &[u8]| u64::from_le_bytes(w.try_into().unwrap_or_default());
            Ok(Some((word(x), word(y))))
        }
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(os_error(path, e)),
    }
}

/// The driver's end of the pair step, streamed: the join tasks' sorted runs (`write_pair_run`)
/// merged, each pair once, the pairs (`a != b`) written to `pairs_path` (when given) as
/// `simdex cluster --pairs` writes them and fed, with the fingerprints stored more than once
/// (`(f, f)`: each a cluster even without a pair), to the union-find one at a time: the
/// driver holds a buffer per run and the components, never the pairs. Returns
/// `(vertices, clusters, pairs)`: every clustered fingerprint, sorted, the smallest
/// fingerprint of its cluster, and the distinct pairs written.
#[pyfunction]
#[pyo3(signature = (runs, pairs_path=None))]
fn merge_pair_runs<'py>(py: Python<'py>, runs: Vec<String>, pairs_path: Option<&str>) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, u64)> {
    let (vertices, clusters, pairs) = py.allow_threads(|| -> PyResult<(Vec<u8>, Vec<u8>, u64)> {
        let mut readers = Vec::with_capacity(runs.len());
        for path in &runs {
            let f = File::open(path).map_err(|e| os_error(path, e))?;
            let len = f.metadata().map_err(|e| os_error(path, e))?.len();
            if len % RUN_RECORD as u64 != 0 {
                return Err(PyValueError::new_err(format!("{path}: {len} bytes is not a multiple of {RUN_RECORD} (a pair run cut short)")));
            }
            readers.push(BufReader::with_capacity(1 << 16, f));
        }
        let mut heap = BinaryHeap::with_capacity(runs.len());
        for (i, (run, path)) in readers.iter_mut().zip(&runs).enumerate() {
            if let Some(p) = next_record(run, path)? {
                heap.push(Reverse((p, i)));
            }
        }
        let write_failed = |path: &str, e: std::io::Error| PyOSError::new_err(format!("cannot write {path}: {e}"));
        let mut out = match pairs_path {
            Some(path) => Some((path, BufWriter::with_capacity(1 << 20, File::create(path).map_err(|e| write_failed(path, e))?))),
            None => None,
        };
        let (mut error, mut last, mut pairs) = (None, None, 0u64);
        let merged = std::iter::from_fn(|| loop {
            let Reverse((p, i)) = heap.pop()?;
            match readers.get_mut(i).map(|run| next_record(run, &runs[i])) {
                Some(Ok(Some(next))) => heap.push(Reverse((next, i))),
                Some(Err(e)) => {
                    error = Some(e);
                    return None;
                }
                _ => {}
            }
            // (a pair in two runs: a run against an index has two sources)
            if last == Some(p) {
                continue;
            }
            last = Some(p);
            if p.0 != p.1 {
                pairs += 1;
                if let Some((path, w)) = out.as_mut() {
                    if let Err(e) = simdex_fingerprint::write_pair_line(w, p.0, p.1) {
                        error = Some(write_failed(path, e));
                        return None;
                    }
                }
            }
            return Some(p);
        });
        let mut components = simdex::pair_components(merged);
        if let Some(e) = error {
            return Err(e);
        }
        if let Some((path, mut w)) = out {
            w.flush().map_err(|e| write_failed(path, e))?;
        }
        components.sort_unstable();
        let n = components.len();
        Ok((le_bytes(components.iter().map(|c| c.0), n), le_bytes(components.iter().map(|c| c.1), n), pairs))
    })?;
    Ok((PyBytes::new(py, &vertices), PyBytes::new(py, &clusters), pairs))
}

/// The cluster of each of `fps` (little-endian u64s) by the sorted map `vertices` ->
/// `clusters` (from `merge_pair_runs`): `(positions, clusters)`, the positions in `fps`
/// of the members (u64s, ascending) and each one's cluster.
#[pyfunction]
fn cluster_members<'py>(py: Python<'py>, vertices: &[u8], clusters: &[u8], fps: &[u8]) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let (vertices, clusters, fps) = (u64s(vertices, "vertices")?, u64s(clusters, "clusters")?, u64s(fps, "fps")?);
    let (positions, found) = py.allow_threads(|| {
        let (mut positions, mut found) = (Vec::new(), Vec::new());
        for (i, fp) in fps.iter().enumerate() {
            if let Ok(at) = vertices.binary_search(fp) {
                positions.extend_from_slice(&(i as u64).to_le_bytes());
                found.extend_from_slice(&clusters.get(at).copied().unwrap_or(*fp).to_le_bytes());
            }
        }
        (positions, found)
    });
    Ok((PyBytes::new(py, &positions), PyBytes::new(py, &found)))
}

/// Writes cluster members to `path`, one a line, sorted by cluster, fingerprint and id:
/// `fp<TAB>id<TAB>cluster` (16 hex digits for fingerprints; without the id column unless
/// `with_ids`). `fps` and `clusters` are little-endian u64s, the ids an Arrow string
/// column's data and i32 offsets. Returns the lines written.
#[pyfunction]
fn write_members(py: Python<'_>, path: &str, fps: &[u8], clusters: &[u8], id_data: &[u8], id_offsets: &[u8], with_ids: bool) -> PyResult<u64> {
    let (fps, clusters) = (u64s(fps, "fps")?, u64s(clusters, "clusters")?);
    let offsets: Vec<usize> = id_offsets.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap_or_default()).max(0) as usize).collect();
    if fps.len() != clusters.len() || offsets.len() != fps.len() + 1 {
        return Err(PyValueError::new_err(format!("{} fingerprints, {} clusters and {} id offsets", fps.len(), clusters.len(), offsets.len())));
    }
    py.allow_threads(|| -> PyResult<u64> {
        let id = |i: usize| offsets.get(i).zip(offsets.get(i + 1)).and_then(|(&a, &b)| id_data.get(a..b)).unwrap_or_default();
        let mut order: Vec<usize> = (0..fps.len()).collect();
        order.sort_unstable_by(|&x, &y| (clusters.get(x), fps.get(x), id(x)).cmp(&(clusters.get(y), fps.get(y), id(y))));
        let failed = |e: std::io::Error| PyOSError::new_err(format!("cannot write {path}: {e}"));
        let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(failed)?);
        for &i in &order {
            let (fp, cluster) = (fps.get(i).copied().unwrap_or(0), clusters.get(i).copied().unwrap_or(0));
            let written = if with_ids {
                write!(out, "{fp:016x}\t").and_then(|_| out.write_all(id(i))).and_then(|_| writeln!(out, "\t{cluster:016x}"))
            } else {
                writeln!(out, "{fp:016x}\t{cluster:016x}")
            };
            written.map_err(failed)?;
        }
        out.flush().map_err(failed)?;
        Ok(order.len() as u64)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BlockJoin>()?;
    m.add_function(wrap_pyfunction!(read_fingerprints, m)?)?;
    m.add_function(wrap_pyfunction!(write_pair_run, m)?)?;
    m.add_function(wrap_pyfunction!(merge_pair_runs, m)?)?;
    m.add_function(wrap_pyfunction!(cluster_members, m)?)?;
    m.add_function(wrap_pyfunction!(read_members, m)?)?;
    m.add_function(wrap_pyfunction!(write_members, m)?)?;
    Ok(())
}
