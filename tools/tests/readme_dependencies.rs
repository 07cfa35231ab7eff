//! Docs that match the code (issue 24, item 5): the README lists each crate's dependencies
//! once, in its Architecture table, and this test compares that list with what
//! `cargo tree` says (offline: normal dependencies, one level deep), the opt-in features'
//! crates one feature at a time.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The crates `package` depends on directly (normal dependencies), with `features` on.
/// (`features` "all": every feature.)
fn cargo_tree(package: &str, features: Option<&str>) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(REPO).args(["tree", "--offline", "-p", package, "-e", "normal", "--prefix", "none", "--depth", "1"]);
    match features {
        Some("all") => drop(cmd.arg("--all-features")),
        Some(f) => drop(cmd.args(["--features", f])),
        None => {}
    }
    let o = cmd.output().expect("run cargo tree");
    assert!(o.status.success(), "cargo tree -p {package}: {}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    out.lines().filter_map(|l| l.split_whitespace().next()).filter(|name| *name != package).map(str::to_owned).collect()
}

/// The README table's "depends on" cell of `crate_name`: the crates always there, and the
/// opt-in ones as (crate, feature).
fn readme_row(readme: &str, crate_name: &str) -> (BTreeSet<String>, Vec<(String, String)>) {
    let row = readme.lines().find(|l| l.starts_with(&format!("| `{crate_name}` |"))).unwrap_or_else(|| panic!("no README row for {crate_name}"));
    let cell = row.trim_end_matches('|').rsplit('|').next().unwrap().trim();
    let (always, opt_in) = cell.split_once("; opt-in:").unwrap_or((cell, ""));
    let always = always.split(',').map(|c| c.trim().to_owned()).collect();
    let opt_in = opt_in
        .split(',')
        .filter(|c| !c.trim().is_empty())
        .map(|c| {
            let (name, feature) = c.trim().split_once(" (").unwrap();
            (name.to_owned(), feature.trim_end_matches(')').trim_start_matches("feature ").trim_matches('`').to_owned())
        })
        .collect();
    (always, opt_in)
}

#[test]
fn the_readme_lists_every_crates_dependencies_as_cargo_has_them() {
    let readme = std::fs::read_to_string(Path::new(REPO).join("README.md")).unwrap();
    for package in ["simdex", "simdex-fingerprint", "simdex-cli", "simdex-serve"] {
        let (always, opt_in) = readme_row(&readme, package);
        let base = cargo_tree(package, None);
        assert_eq!(always, base, "README's dependencies of {package} (left) against cargo tree (right)");
        // no opt-in crate left out: every feature on adds exactly the listed ones
        let listed: BTreeSet<String> = opt_in.iter().map(|(name, _)| name.clone()).collect();
        assert_eq!(cargo_tree(package, Some("all")).difference(&base).cloned().collect::<BTreeSet<_>>(), listed, "{package}'s opt-in crates");
        // each feature adds exactly the crates the README lists for it (one or more)
        let mut by_feature: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
        for (name, feature) in opt_in {
            by_feature.entry(feature).or_default().insert(name);
        }
        for (feature, names) in by_feature {
            let with = cargo_tree(package, Some(&feature));
            let added: BTreeSet<String> = with.difference(&base).cloned().collect();
            assert_eq!(added, names, "{package}'s feature `{feature}` adds {added:?}, the README says {names:?}");
        }
    }
}
