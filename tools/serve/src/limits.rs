//! The server's bounds on what clients can make it hold. Descriptors: the soft
//! `RLIMIT_NOFILE` is raised toward the hard limit at start, a reserve is kept for the index
//! (its logs, segments, manifests, compaction's files) and for the server itself, and the
//! connections allowed are what is left ([`Descriptors`]). Memory: every request takes its
//! share of `--max-memory-mib` ([`charge`]) before its body is read, and a fingerprint
//! batch a share per item ([`ITEM_CHARGE`]) once decoded, and holds them until answered, so
//! bodies, their decoded form and the work on them stay within the budget.

use crate::error::ServeError;

/// Descriptors kept for the index: its open log (and the next one a rotation creates), the
/// lock, a flush's segment and tombstone files, a manifest being replaced, compaction's
/// output and spilled runs, directory syncs, with room to spare.
pub const INDEX_RESERVE: u64 = 64;

/// Descriptors the server holds besides connections and the index: standard streams, the
/// listener, the runtime's event queue and wakers, the refused connection being answered.
pub const SERVER_OWN: u64 = 16;

/// Bytes a request may come to hold per byte of its body while it is decoded and worked
/// on: the body, the decoded values (a JSON fingerprint of one digit and a comma, 2 bytes,
/// becomes 8), the pairs and log record the index call builds from them, and the answer.
pub const DECODE_FACTOR: usize = 8;

/// Bytes a fingerprint batch (`query_many`, `find_or_insert_many`, `insert_many`,
/// `delete_many`) may come to hold per item beyond its decoded body: the pairs the index
/// call builds, the log record, the memtable's growth and the answer (64 to 180 bytes an
/// item measured: `benches/history/RESULTS-serve-ii-issue-37.md`), with a match or two an
/// item.
pub const ITEM_CHARGE: usize = 192;

/// The least share a request takes: its head, a small body, its answer.
pub const MIN_CHARGE: usize = 64 << 10;

/// The same for the document calls: a document's text, its words, shingles and sketch
/// (measured up to 15.4 bytes per byte of body for one large document of many distinct
/// short words: `benches/history/RESULTS-serve-ii-issue-37.md`).
pub const DOCUMENT_FACTOR: usize = 24;

/// The share of the memory budget a request whose body is at most `body` bytes takes
/// before its body is read (`document`: a document call).
pub fn charge(body: usize, document: bool) -> usize {
    body.saturating_mul(if document { DOCUMENT_FACTOR } else { DECODE_FACTOR }).max(MIN_CHARGE)
}

/// The share of the memory budget a fingerprint batch of `items` items takes once decoded.
pub fn items_charge(items: usize) -> usize {
    items.saturating_mul(ITEM_CHARGE)
}

/// The memory budget's unit (a `tokio` semaphore counts permits in `u32`s per request).
pub const CHARGE_UNIT: usize = 1 << 10;

/// `bytes` in [`CHARGE_UNIT`]s, rounded up.
pub fn units(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(CHARGE_UNIT)).unwrap_or(u32::MAX)
}

/// The descriptor limit the server runs under, and the connections it allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptors {
    /// The soft limit after raising it.
    pub limit: u64,
    /// The soft limit found at start, when it was raised.
    pub raised_from: Option<u64>,
    /// Open connections allowed (`--max-connections`, or what the limit leaves).
    pub connections: usize,
}

/// Raises the soft descriptor limit toward the hard one and works out the connections the
/// server may keep open beside the reserve: `asked` (`--max-connections`) when the limit
/// allows it, else all it allows. Fails when the limit leaves no room for one connection,
/// or `asked` is more than it allows.
pub fn descriptors(asked: Option<usize>) -> Result<Descriptors, ServeError> {
    let (limit, raised_from) = raise_nofile().map_err(|source| ServeError::Io { what: "reading the descriptor limit (RLIMIT_NOFILE)".into(), source })?;
    let allowed = limit.saturating_sub(INDEX_RESERVE + SERVER_OWN);
    let allowed = usize::try_from(allowed).unwrap_or(usize::MAX);
    let why = |what: String| {
        ServeError::Limits(format!("{what}: the descriptor limit is {limit} (ulimit -n), of which {INDEX_RESERVE} are kept for the index and {SERVER_OWN} for the server"))
    };
    if allowed == 0 {
        return Err(why("no descriptor is left for connections".into()));
    }
    let connections = match asked {
        Some(n) if n > allowed => return Err(why(format!("--max-connections {n} is more than the {allowed} the limit allows; raise the limit or ask for fewer"))),
        Some(n) => n.max(1),
        None => allowed,
    };
    Ok(Descriptors { limit, raised_from, connections })
}

/// The soft `RLIMIT_NOFILE` after raising it to the hard limit (at most 2^20, the kernel's
/// usual `nr_open`; a refused raise keeps the soft limit), and the soft limit before when
/// it was raised.
fn raise_nofile() -> std::io::Result<(u64, Option<u64>)> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one `rlimit` into the one we pass, which lives through the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let want = limit.rlim_max.min(1 << 20);
    if limit.rlim_cur >= want {
        return Ok((limit.rlim_cur, None));
    }
    let raised = libc::rlimit { rlim_cur: want, rlim_max: limit.rlim_max };
    // SAFETY: setrlimit reads the `rlimit` we pass, which lives through the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Ok((limit.rlim_cur, None));
    }
    Ok((want, Some(limit.rlim_cur)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_grow_with_the_body_from_a_floor() {
        assert_eq!(charge(0, false), MIN_CHARGE);
        assert_eq!(charge(60 << 20, false), 480 << 20);
        assert_eq!(charge(10 << 20, true), 240 << 20);
        assert_eq!(items_charge(1000), 192_000);
        assert_eq!(units(1), 1);
        assert_eq!(units(CHARGE_UNIT + 1), 2);
        assert_eq!(units(usize::MAX), u32::MAX);
    }

    #[test]
    fn the_soft_descriptor_limit_is_raised_and_connections_fit_beside_the_reserve() {
        let d = descriptors(None).unwrap();
        let mut now = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: as in `raise_nofile`.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut now) }, 0);
        assert_eq!(now.rlim_cur, d.limit, "the process runs under the limit reported");
        assert_eq!(d.limit, now.rlim_max.min(1 << 20), "raised to the hard limit");
        assert_eq!(d.connections as u64, d.limit - INDEX_RESERVE - SERVER_OWN);
        let e = descriptors(Some(d.connections + 1)).unwrap_err().to_string();
        assert!(e.contains("--max-connections") && e.contains("ulimit -n"), "{e}");
        assert_eq!(descriptors(Some(10)).unwrap().connections, 10);
    }
}
