//! A real kill -9 loop: a child process (this test binary, re-run on the ignored test
//! `kill_child`) ingests and prints each acknowledged operation, with an fsync per write on
//! even cycles and group commit (a sync thread fsyncing every millisecond while the writer
//! goes on) on odd cycles (a returned write is in the operating system's buffers, which
//! kill -9 does not lose);
//! the parent kills it at a random moment (its background thread flushes and compacts all
//! the time, so kills land in those too), reopens the index and checks that every
//! acknowledged write is there and nothing else is, except the one operation in flight.
//!
//! `SIMDEX_CRASH_CYCLES=N` sets the number of cycles (default 200), e.g.
//! `SIMDEX_CRASH_CYCLES=10000 cargo test --test it engine_kill -- --nocapture`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use simdex::{CompactionOptions, IndexOptions};
use simdex::{Durability, Index, QueryOptions};

use crate::common::Rng;

const CHILD_DIR: &str = "SIMDEX_KILL_CHILD_DIR";
const CHILD_START: &str = "SIMDEX_KILL_CHILD_START";
const CHILD_GROUP: &str = "SIMDEX_KILL_CHILD_GROUP";

/// The pair written for id `i`.
fn pair(i: u64) -> (u64, u64) {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31), i)
}

/// Every 5th id deletes the pair of the id three before it instead of inserting.
fn is_delete(i: u64) -> bool {
    i % 5 == 4
}

fn child_options(background: bool, group: bool) -> IndexOptions {
    IndexOptions::default()
        .with_durability(if group { Durability::Group { max_delay: Duration::from_millis(1), max_ops: 8 } } else { Durability::Sync })
        .with_memtable_ops(24)
        .with_background(background)
        .with_compaction(CompactionOptions::default().with_fanout(3).with_buffer_entries(1 << 12).with_automatic(true))
}

/// The child: ingests forever from id `SIMDEX_KILL_CHILD_START`, printing `ACK id` after
/// each operation returns. Does nothing when run without the variables.
#[test]
#[ignore = "the child of engine_kill::kill_9_loop, not a test of its own"]
fn kill_child() {
    let (Ok(dir), Ok(start)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_START)) else { return };
    let start: u64 = start.parse().unwrap();
    let group = std::env::var(CHILD_GROUP).is_ok_and(|v| v == "1");
    let index = Index::open(&dir, child_options(true, group)).unwrap();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    for i in start.. {
        if is_delete(i) {
            let (fp, id) = pair(i - 3);
            index.delete(fp, id).unwrap();
        } else {
            let (fp, id) = pair(i);
            index.insert(fp, id).unwrap();
        }
        writeln!(out, "ACK {i}").unwrap();
        out.flush().unwrap();
    }
}

/// What the acknowledged operations leave.
fn apply(live: &mut BTreeSet<(u64, u64)>, i: u64) {
    if is_delete(i) {
        live.remove(&pair(i - 3));
    } else {
        live.insert(pair(i));
    }
}

#[test]
fn kill_9_loop() {
    let cycles: u64 = std::env::var("SIMDEX_CRASH_CYCLES").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng(0x5eed);
    let mut live: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut next = 4u64;
    let (mut acked_total, mut in_flight_applied, mut orphan_cycles, mut torn_cycles) = (0u64, 0u64, 0u64, 0u64);
    let started = Instant::now();
    let mut segments_at_end = 0;
    for cycle in 0..cycles {
        let mut child = Command::new(&exe)
            .args(["--exact", "engine_kill::kill_child", "--ignored", "--nocapture", "--test-threads=1", "-q"])
            .env(CHILD_DIR, &idx)
            .env(CHILD_START, next.to_string())
            .env(CHILD_GROUP, if cycle % 2 == 1 { "1" } else { "0" })
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = BufReader::new(child.stdout.take().unwrap());
        let pump = std::thread::spawn(move || {
            for line in reader.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Wait until the child has opened the index, then let it run for a random time.
        // (The test harness prints its own lines first.)
        loop {
            let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|e| panic!("cycle {cycle}: the child did not start: {e}"));
            if line.contains("READY") {
                break;
            }
        }
        std::thread::sleep(Duration::from_micros(rng.next() % 40_000));
        child.kill().unwrap();
        child.wait().unwrap();
        pump.join().unwrap();
        let mut acked = Vec::new();
        for line in rx.try_iter() {
            if let Some(i) = line.strip_prefix("ACK ") {
                acked.push(i.trim().parse::<u64>().unwrap());
            }
        }
        for (k, &i) in acked.iter().enumerate() {
            assert_eq!(i, next + k as u64, "cycle {cycle}: acks out of order");
        }
        for &i in &acked {
            apply(&mut live, i);
        }
        acked_total += acked.len() as u64;
        let in_flight = next + acked.len() as u64;

        let index = Index::open(&idx, child_options(false, false)).unwrap_or_else(|e| panic!("cycle {cycle}: reopen after kill failed: {e}"));
        let report = index.open_report();
        orphan_cycles += u64::from(!report.removed.is_empty());
        torn_cycles += u64::from(report.logs.iter().any(|l| l.valid_len != l.len));
        // The operation in flight may or may not have happened.
        let mut with = live.clone();
        apply(&mut with, in_flight);
        let check_all = cycle % 25 == 0 || cycle + 1 == cycles;
        let applied = if check_all {
            let got: BTreeSet<(u64, u64)> = index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect();
            assert!(got == live || got == with, "cycle {cycle}: the index differs from the acknowledged writes (acked up to {})", in_flight - 1);
            got == with && got != live
        } else {
            // Every operation of this cycle, and the one in flight, by exact query.
            let present = |i: u64| {
                let (fp, id) = pair(i);
                index.query(fp, &QueryOptions::within(0)).unwrap().iter().any(|m| m.doc_id == Some(id))
            };
            let in_flight_target = if is_delete(in_flight) { in_flight - 3 } else { in_flight };
            for &i in &acked {
                let target = if is_delete(i) { i - 3 } else { i };
                if target == in_flight_target {
                    continue;
                }
                assert_eq!(present(target), live.contains(&pair(target)), "cycle {cycle}: id {target} after acknowledged op {i}");
            }
            present(in_flight_target) != live.contains(&pair(in_flight_target))
        };
        if applied {
            live = with;
            in_flight_applied += 1;
        }
        segments_at_end = index.stats().segments.len();
        drop(index);
        next = in_flight + 1;
        if (cycle + 1) % 1000 == 0 {
            eprintln!("kill -9 loop: {} cycles, {acked_total} acknowledged operations, {:.0}s", cycle + 1, started.elapsed().as_secs_f64());
        }
    }
    eprintln!(
        "kill -9 loop: {cycles} cycles in {:.1}s, {acked_total} acknowledged operations, {in_flight_applied} in-flight operations found applied, {orphan_cycles} reopens removed orphans of an interrupted flush or compaction, {torn_cycles} reopens cut a torn log tail, {} live pairs in {segments_at_end} segments at the end; no acknowledged write lost, no failed open",
        started.elapsed().as_secs_f64(),
        live.len()
    );
    // Merges cut short by kills must not pile up segments: what the kills left (merge
    // checkpoints, unmerged tiers) is a state the tiered policy brings back within its shape
    // (fan-out 3 over 24-operation flushes keeps about 2 per tier; the bound is generous) once
    // it runs to the end, here in the caller's thread. How many merges finish between two
    // kills depends on the machine's speed and load (a child lives 0-40 ms after its open), so
    // the count at the end of the loop is reported, not asserted: beside 4 busy processes on 2
    // cores it reached 47-83 segments for 1,400-1,650 pairs, 29-36 on a quieter machine.
    let tiers = ((live.len().max(24) / 24) as f64).log(3.0) + 2.0;
    let index = Index::open(&idx, child_options(false, false)).unwrap();
    index.compact_tiered().unwrap();
    let settled = index.stats().segments.len();
    let got: BTreeSet<(u64, u64)> = index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect();
    drop(index);
    eprintln!("kill -9 loop: {segments_at_end} segments when the kills stopped, {settled} after the tiered policy ran to its end");
    assert!(got == live, "the settled index differs from the acknowledged writes");
    assert!((settled as f64) < 4.0 * tiers + 16.0, "{settled} live segments for {} pairs after the tiered policy ran ({segments_at_end} when the kills stopped)", live.len());
}
