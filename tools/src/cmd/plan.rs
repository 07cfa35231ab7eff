//! `simdex plan`: the table design the planner picks for a number of fingerprints, and why.

use anyhow::Result;
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::plan::{plan, CheckCost, PlanOptions, PlannedDesign, ProbePlan, DEFAULT_MAX_CANDIDATES_LOG2, MAX_K};

/// Choose a table design for N fingerprints and show its expected costs.
///
/// Each table stores every fingerprint permuted so that some blocks of bits lead; a query
/// looks at the entries sharing the first p bits with the permuted query, in every table.
/// More tables mean fewer candidates per probe (faster queries) and more space. The planner
/// picks the fewest tables such that no probe expects more than 2^tau candidates.
///
/// With `--for-design K0`, the design is the one chosen for k = K0 (what an index built
/// with `-k K0` holds), and the output explains what answering every k up to 8 from it
/// costs: the probe budget per table (multi-probe), the range probes and entries decoded
/// per query, and whether a scan is cheaper.
#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  simdex plan --count 1000000 -k 3\n  simdex plan --count 67108864 -k 8 --check          # the crawler's check: tables and band file\n  simdex plan --count 17179869184 -k 3 --tables 16   # the paper's 16-table design for 2^34\n  simdex plan --count 10000000 -k 6 --for-design 3   # every k from a k = 3 design"
)]
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
    /// Plan the design for this k instead, and explain the cost of answering `-k` (and
    /// every k up to 8) from it by multi-probe.
    #[arg(long, value_name = "K0")]
    for_design: Option<u32>,
    /// Explain the crawler's check instead: candidates within `-k` confirmed by sketch (the
    /// document calls' default, k = 8 at resemblance 0.90), on an index planned for the
    /// `--for-design` k (default 3) whose documents carry the default 64-byte sketch: what
    /// the tables (within the design's k) and the band file (beyond it) read per check, and
    /// what the exhaustive multi-probe of the tables would.
    #[arg(long)]
    check: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    if args.check {
        return run_check(&args, args.for_design.unwrap_or(3));
    }
    if let Some(design_k) = args.for_design {
        return run_for_design(&args, design_k);
    }
    let options = PlanOptions::new(args.count, args.k).with_max_candidates_log2(args.tau).with_tables(args.tables);
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

/// `--for-design`: the cost of every k up to 8 from the design planned for `design_k`.
fn run_for_design(args: &Args, design_k: u32) -> Result<()> {
    let options = PlanOptions::new(args.count, design_k).with_max_candidates_log2(args.tau).with_tables(args.tables);
    let design = plan(&options)?.chosen.design;
    let plans = (0..=MAX_K).map(|k| ProbePlan::new(&design, k, args.count)).collect::<Result<Vec<_>, _>>()?;
    let method = |p: &ProbePlan| {
        if p.k() <= design.k() {
            "tables"
        } else if p.prefers_scan() {
            "scan"
        } else {
            "multi-probe"
        }
    };
    if args.json {
        let rows: Vec<_> = plans
            .iter()
            .map(|p| {
                json!({
                    "k": p.k(), "method": method(p), "probes": p.probes(), "expected_entries": p.expected_entries(),
                    "scan_entries": p.scan_entries(), "budgets": p.tables().iter().map(|t| t.budget).collect::<Vec<_>>(),
                    "probe_bits": p.tables().iter().map(|t| t.probe_bits).collect::<Vec<_>>(), "closed_form": p.closed_form(),
                })
            })
            .collect();
        out!("{}", serde_json::to_string_pretty(&json!({ "count": args.count, "design": design.summary(), "levels": design.levels(), "k": args.k, "per_k": rows }))?);
        return Ok(());
    }
    out!("{} fingerprints; design for k = {design_k}: {}", args.count, design.summary());
    out!("Above the design's k, each table is probed with every variant of its leading bits within a budget");
    out!("(generalised pigeonhole: a match is assigned to the first table where its prefix differs least; the");
    out!("budget is the most such a table can see). A query scans table 0 instead where that decodes fewer entries.");
    out!();
    out!("{:>3}  {:>11}  {:>8}  {:>16}  {:>14}  budgets per table", "k", "method", "probes", "entries decoded", "scan decodes");
    for p in &plans {
        let budgets: Vec<String> = p.tables().iter().map(|t| t.budget.to_string()).collect();
        let mark = if p.k() == args.k { "  <-" } else { "" };
        out!("{:>3}  {:>11}  {:>8}  {:>16.0}  {:>14.0}  {}{mark}", p.k(), method(p), p.probes(), p.expected_entries(), p.scan_entries(), budgets.join(","));
    }
    if let Some(p) = plans.get(args.k as usize) {
        out!();
        out!("k = {}: {}", args.k, method(p));
        out!("{:>5}  {:>6}  {:>6}  {:>11}  {:>8}  {:>12}", "table", "p", "budget", "probe bits", "probes", "cand./probe");
        for (i, (t, probe)) in design.tables().iter().zip(p.tables()).enumerate() {
            let per_probe = args.count as f64 / 2f64.powi(probe.probe_bits as i32);
            out!("{i:>5}  {:>6}  {:>6}  {:>11}  {:>8}  {:>12.1}", t.prefix_bits, probe.budget, probe.probe_bits, probe.flips.len(), per_probe);
        }
        if p.closed_form() {
            out!("(budgets from the closed form: the block split has too many error patterns to enumerate)");
        }
    } else {
        out!("k = {} is above {MAX_K}: only a full scan answers it", args.k);
    }
    Ok(())
}

/// `--check`: the cost model of the crawler's check, banded and exhaustive.
fn run_check(args: &Args, design_k: u32) -> Result<()> {
    let options = PlanOptions::new(args.count, design_k).with_max_candidates_log2(args.tau).with_tables(args.tables);
    let design = plan(&options)?.chosen.design;
    let c = CheckCost::new(&design, args.k, args.count, SKETCH_BYTES)?;
    if args.json {
        let bands = c.bands.map(|b| json!({"bands": b.bands, "bucket_bits": b.bucket_bits}));
        out!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "count": args.count, "design": design.summary(), "k": c.k, "table_k": c.table_k,
                "table_probes": c.table_probes, "table_entries": c.table_entries, "band_design": bands,
                "band_pages": c.band_pages, "band_entries": c.band_entries, "sketch_reads": c.sketch_reads,
                "band_bytes_per_entry": c.band_bytes_per_entry, "exhaustive_probes": c.exhaustive_probes, "exhaustive_entries": c.exhaustive_entries,
            }))?
        );
        return Ok(());
    }
    out!("{} fingerprints with 64-byte sketches; design for k = {design_k}: {}", args.count, design.summary());
    out!("The crawler's check: stored fingerprints within k = {} whose sketch estimates a resemblance of at least 0.90.", c.k);
    out!("A segment whose every entry has a sketch is asked through its band file alone: the stored sketches that");
    out!("share one of its bands with the query's (exact-match lookups whose cost does not grow with N), no table probe.");
    out!();
    out!("{:<34}  {:>8}  {:>15}  {:>12}  {:>13}", "per check (one segment)", "probes", "entries decoded", "band pages", "sketch reads");
    match c.bands {
        Some(b) => {
            out!(
                "{:<34}  {:>8}  {:>15.0}  {:>12.1}  {:>13.2}",
                format!("band file, {} bands, 2^{} buckets", b.bands, b.bucket_bits),
                b.bands,
                c.band_entries,
                c.band_pages,
                c.sketch_reads
            );
            out!("{:<34}  {:>8}  {:>15.0}  {:>12}  {:>13}", format!("without bands: multi-probe, k <= {}", c.k), c.exhaustive_probes, c.exhaustive_entries, "-", "-");
            out!();
            out!(
                "Band file: {:.1} bytes per fingerprint ({}). Sketches differing in at most {} of 512 bits always share a band;",
                c.band_bytes_per_entry,
                human_bytes(c.band_bytes_per_entry * args.count as f64),
                b.bands - 1
            );
            out!("at the 0.90 threshold (25 bits) 98.9% do (benches/RESULTS.md, \"Speed III\"); --exhaustive finds the others.");
        }
        None => out!(
            "{} entries are more than a band file indexes (2^32 - 1): the tables answer by multi-probe ({} probes, {:.0} entries).",
            args.count,
            c.exhaustive_probes,
            c.exhaustive_entries
        ),
    }
    Ok(())
}

/// Bytes of the default document sketch (512 one-bit MinHash values).
const SKETCH_BYTES: usize = 64;

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
