//! `simdex plan`: the table design the planner picks for a number of fingerprints, and why.

use anyhow::Result;
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::plan::{plan, PlanOptions, PlannedDesign, DEFAULT_MAX_CANDIDATES_LOG2};

/// Choose a table design for N fingerprints and show its expected costs.
///
/// Each table stores every fingerprint permuted so that some blocks of bits lead; a query
/// looks at the entries sharing the first p bits with the permuted query, in every table.
/// More tables mean fewer candidates per probe (faster queries) and more space. The planner
/// picks the fewest tables such that no probe expects more than 2^tau candidates.
///
/// Example: `simdex plan --count 17179869184 -k 3 --tables 16` shows the paper's 16-table
/// design for 2^34 fingerprints.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Expected number of fingerprints (e.g. 10000000).
    #[arg(long, short = 'n')]
    count: u64,
    /// Largest Hamming distance queries must find (0..=8).
    #[arg(short, long, default_value_t = 3)]
    k: u32,
    /// Exactly this many tables (the planner picks the best design with that many).
    #[arg(long)]
    tables: Option<usize>,
    /// Bound on expected candidates per probe, as a power of two.
    #[arg(long, default_value_t = DEFAULT_MAX_CANDIDATES_LOG2)]
    tau: f64,
    /// Also list the best design for every table count considered.
    #[arg(long)]
    all: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let options = PlanOptions { k: args.k, count: args.count, max_candidates_log2: args.tau, tables: args.tables };
    let plan = plan(&options)?;
    if args.json {
        let alternatives: Vec<_> = plan.alternatives.iter().map(describe_json).collect();
        let out = json!({
            "count": args.count,
            "k": args.k,
            "reason": plan.reason,
            "chosen": describe_json(&plan.chosen),
            "alternatives": if args.all { json!(alternatives) } else { json!(null) },
        });
        out!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let c = &plan.chosen;
    out!("{} fingerprints (d = log2 N = {:.2}), k = {}", args.count, c.d, args.k);
    out!("design: {}", c.design.summary());
    out!("why: {}", plan.reason);
    out!(
        "expected: {:.1} candidates per probe at most, {:.1} per query over all tables; about {:.1} bits per fingerprint per table, {} for all tables (document ids not counted)",
        c.max_candidates(),
        c.total_candidates(),
        c.bits_per_entry,
        human_bytes(c.expected_bytes)
    );
    out!();
    out!("{:>5}  {:>6}  {:>12}  permutation (source bit runs, from the MSB)", "table", "p", "candidates");
    for (i, (t, cand)) in c.design.tables().iter().zip(&c.candidates).enumerate() {
        out!("{i:>5}  {:>6}  {:>12.1}  {}", t.prefix_bits, cand, t.permutation.describe());
    }
    if args.all {
        out!();
        out!("{:>6}  {:>10}  {:>14}  {:>12}  design", "tables", "p", "max cand.", "bytes");
        for a in &plan.alternatives {
            let (lo, hi) = a.design.prefix_range();
            out!("{:>6}  {:>10}  {:>14.1}  {:>12}  {}", a.design.tables().len(), format!("{lo}..{hi}"), a.max_candidates(), human_bytes(a.expected_bytes), a.design.summary());
        }
    }
    Ok(())
}

fn describe_json(p: &PlannedDesign) -> serde_json::Value {
    json!({
        "tables": p.design.tables().len(),
        "levels": p.design.levels(),
        "summary": p.design.summary(),
        "prefix_bits": p.design.tables().iter().map(|t| t.prefix_bits).collect::<Vec<_>>(),
        "expected_candidates": p.candidates,
        "max_candidates": p.max_candidates(),
        "total_candidates": p.total_candidates(),
        "bits_per_entry": p.bits_per_entry,
        "expected_bytes": p.expected_bytes,
        "permutations": p.design.tables().iter().map(|t| t.permutation.describe()).collect::<Vec<_>>(),
    })
}

/// `1.5 GiB`-style sizes.
pub fn human_bytes(b: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", units[u])
}
