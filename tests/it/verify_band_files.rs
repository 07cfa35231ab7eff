//! `verify` of an index's band files (derived from its segments' sketches), for each kind of
//! damage the fault review found: a missing band file is named ("rebuilt on the next
//! writable open") without calling the index damaged; a directory or an unreadable name in
//! its place, a flipped bit and a cut file are problems; what a writable open set aside is
//! named as such, and the index is clean again once a writable open rebuilt the file.

use std::path::Path;

use simdex::recovery::verify_index;
use simdex::storage::FsStorage;
use simdex::{Index, IndexOptions};

use crate::engine_bands::{clustered_in, column};

/// A closed index of two segments with sketches, each with its band file.
fn sketched_index(dir: &Path) -> Vec<String> {
    let mut options = IndexOptions::default().with_storage(std::sync::Arc::new(FsStorage)).with_sketches(Some(column())).with_memtable_ops(10_000).with_background(false);
    options.compaction.automatic = false;
    let (index, _, _) = clustered_in(dir, options, 2000);
    index.close().unwrap();
    let mut bands: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).filter(|n| n.ends_with(".sdb")).collect();
    bands.sort();
    assert!(bands.len() >= 2, "{bands:?}");
    bands
}

#[test]
fn verify_names_each_kind_of_band_file_damage() {
    for kind in ["missing", "directory", "unreadable", "flipped bit", "cut"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let bands = sketched_index(&dir);
        let report = verify_index(&FsStorage, &dir).unwrap();
        assert!(report.is_clean() && report.notes.is_empty(), "{kind}: clean before: {report:?}");
        let name = &bands[0];
        let path = dir.join(name);
        match kind {
            "missing" => std::fs::remove_file(&path).unwrap(),
            "directory" => {
                std::fs::remove_file(&path).unwrap();
                std::fs::create_dir(&path).unwrap();
            }
            "unreadable" => {
                std::fs::remove_file(&path).unwrap();
                std::os::unix::fs::symlink(name, &path).unwrap();
            }
            "flipped bit" => {
                let mut bytes = std::fs::read(&path).unwrap();
                let at = bytes.len() / 2;
                bytes[at] ^= 0x20;
                std::fs::write(&path, bytes).unwrap();
            }
            _ => {
                let bytes = std::fs::read(&path).unwrap();
                std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
            }
        }
        let report = verify_index(&FsStorage, &dir).unwrap();
        let named = |lines: &[String]| lines.iter().filter(|l| l.starts_with(name.as_str())).cloned().collect::<Vec<_>>();
        let problems: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
        match kind {
            "missing" => {
                assert!(report.is_clean(), "{kind}: derived data, not damage: {report:?}");
                let notes = named(&report.notes);
                assert!(notes.len() == 1 && notes[0].contains("missing") && notes[0].contains("rebuilt on the next writable open"), "{kind}: {report:?}");
            }
            "directory" | "unreadable" => {
                let named = named(&problems);
                assert_eq!(named.len(), 1, "{kind}: {report:?}");
                assert!(
                    named[0].contains(if kind == "directory" { "a directory, not a band file" } else { "not readable" }) && named[0].contains("sets it aside"),
                    "{kind}: {named:?}"
                );
            }
            _ => assert_eq!(named(&problems).len(), 1, "{kind}: one problem names the file: {report:?}"),
        }
        // A writable open heals it: sets aside what cannot be read, builds the file again.
        let index = Index::open(&dir, IndexOptions::default().with_background(false)).unwrap();
        index.close().unwrap();
        let report = verify_index(&FsStorage, &dir).unwrap();
        if kind == "flipped bit" {
            // a page fault is found by a check that reads it (or by verify), not by an open
            continue;
        }
        // (the close may merge the segments: every band file of what is live is there)
        let checked = |suffix: &str| report.checked.iter().filter(|(f, _)| f.ends_with(suffix)).count();
        assert!(report.is_clean() && report.notes.is_empty() && checked(".sdb") == checked(".sdx"), "{kind}: rebuilt: {report:?}");
        assert!(report.unknown.is_empty(), "{kind}: {report:?}");
        if kind == "directory" {
            assert!(std::fs::symlink_metadata(dir.join(format!("{name}.set-aside"))).is_ok_and(|m| m.is_dir()), "{kind}: set aside, not deleted");
        }
    }
}

/// What a writable open set aside (here a file, as an unreadable file of another user is)
/// is named as such, not as a file that is not simdex's.
#[test]
fn verify_names_what_a_writable_open_set_aside() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let bands = sketched_index(&dir);
    for aside in [format!("{}.set-aside", bands[0]), format!("{}.set-aside.2", bands[1])] {
        std::fs::write(dir.join(&aside), b"was in the band file's place").unwrap();
    }
    std::fs::write(dir.join("seg-x.sdb.set-aside"), b"not a name simdex gives").unwrap();
    let report = verify_index(&FsStorage, &dir).unwrap();
    assert!(report.is_clean(), "{report:?}");
    let set_aside: Vec<&String> = report.notes.iter().filter(|n| n.contains("set aside by a writable open")).collect();
    assert_eq!(set_aside.len(), 2, "{report:?}");
    assert_eq!(report.unknown, vec!["seg-x.sdb.set-aside".to_string()], "{report:?}");
}
