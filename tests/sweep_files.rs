//! Issue 6's "done when", on real files: the same spec swept with 1 and 2 threads gives the same
//! bytes; sharded-and-merged equals unsharded; interrupted-then-resumed equals uninterrupted.
//! The planner is the synthetic one (deterministic arithmetic on the case keys, slowed so that
//! cases finish out of order): these tests are about the file discipline, not the search.

use std::fs;
use std::path::PathBuf;

use autoplan::cmd::sweep::{sweep_file, FileOptions};
use autoplan::sweep::testing::SyntheticPlanner;
use autoplan::sweep::{merge, Case, Shard, SweepSpec, SweepTable};

const SPEC: &str = "search_spaces/sweeps/small.toml";

fn cases() -> Vec<Case> {
    // The small spec only scales templates, so no cluster needs resolving.
    SweepSpec::read(SPEC)
        .unwrap()
        .cases(|name| Err(format!("{name} should be scaled")))
        .unwrap()
}

const PLANNER: SyntheticPlanner = SyntheticPlanner { max_delay_us: 2000 };

fn dir(test: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("sweep_files-{test}"));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn opts(threads: usize) -> FileOptions {
    FileOptions {
        threads,
        ..FileOptions::default()
    }
}

fn sweep(cases: &[Case], out: &PathBuf, o: &FileOptions) -> String {
    sweep_file(cases, out, &PLANNER, o).unwrap();
    fs::read_to_string(out).unwrap()
}

#[test]
fn one_and_two_threads_write_the_same_bytes() {
    let d = dir("threads");
    let one = sweep(&cases(), &d.join("1.csv"), &opts(1));
    let two = sweep(&cases(), &d.join("2.csv"), &opts(2));
    assert_eq!(one, two);
    // Not vacuous: 8 cases, in case order, both outcomes present.
    assert_eq!(one.lines().nth(1).unwrap().split(',').next(), Some("0"));
    assert!(one.contains(",ok,") && one.contains(",infeasible,"));
}

#[test]
fn shards_merged_equal_the_unsharded_sweep() {
    let d = dir("shards");
    let all = cases();
    let full = sweep(&all, &d.join("full.csv"), &opts(2));
    for n in [2, 3] {
        let shards: Vec<String> = (1..=n)
            .map(|k| {
                let mine = Shard::new(k, n).unwrap().select(&all);
                sweep(&mine, &d.join(format!("{k}of{n}.csv")), &opts(2))
            })
            .collect();
        let inputs: Vec<(&str, &str)> = shards.iter().map(|s| ("shard", s.as_str())).collect();
        assert_eq!(merge(&inputs, Some(&all)).unwrap(), full, "{n} shards");
    }
}

#[test]
fn stopped_then_resumed_equals_uninterrupted() {
    let d = dir("stopped");
    let all = cases();
    let full = sweep(&all, &d.join("full.csv"), &opts(1));
    let out = d.join("out.csv");
    let stop = FileOptions {
        max_cases: Some(3),
        ..opts(1)
    };
    // Cases slow enough (~25 ms) that the worker is still busy when the third case's rows are
    // on disk; the cases in flight then are kept, the rest never start.
    let slow = SyntheticPlanner {
        max_delay_us: 50_000,
    };
    let s = sweep_file(&all, &out, &slow, &stop).unwrap();
    assert!(!s.complete() && s.ran >= 3, "{s:?}");
    // The partial file is whole cases of the full one, in case order.
    let partial = SweepTable::parse("out", &fs::read_to_string(&out).unwrap()).unwrap();
    let whole = SweepTable::parse("full", &full).unwrap();
    assert!(partial.blocks.len() >= 3 && partial.blocks.len() < all.len());
    assert!(partial.blocks.windows(2).all(|w| w[0].case < w[1].case));
    assert!(partial
        .blocks
        .iter()
        .all(|b| whole.blocks[b.case].text == b.text));
    let resume = FileOptions {
        resume: true,
        ..opts(2)
    };
    let s = sweep_file(&all, &out, &PLANNER, &resume).unwrap();
    assert!(s.complete() && s.resumed >= 3, "{s:?}");
    assert_eq!(fs::read_to_string(&out).unwrap(), full);
    // Resuming a finished sweep runs nothing and changes nothing.
    let s = sweep_file(&all, &out, &PLANNER, &resume).unwrap();
    assert_eq!((s.ran, s.resumed), (0, all.len()));
    assert_eq!(fs::read_to_string(&out).unwrap(), full);
}

#[test]
fn killed_mid_row_then_resumed_equals_uninterrupted() {
    let d = dir("killed");
    let all = cases();
    let full = sweep(&all, &d.join("full.csv"), &opts(2));
    let out = d.join("out.csv");
    // A kill leaves whole cases and a torn tail; cut inside the header, at a row boundary,
    // inside a row, inside a multi-row case, and after the last row's last byte but its `\n`.
    let newlines: Vec<usize> = full.match_indices('\n').map(|(i, _)| i).collect();
    let cuts = [
        5,
        newlines[0] + 1,
        newlines[1] + 7,
        newlines[2] + 1,
        newlines[4] - 3,
        full.len() - 1,
    ];
    for cut in cuts {
        fs::write(&out, &full[..cut]).unwrap();
        let resume = FileOptions {
            resume: true,
            ..opts(2)
        };
        sweep_file(&all, &out, &PLANNER, &resume).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), full, "cut at byte {cut}");
    }
}

#[test]
fn an_existing_file_is_only_continued_never_overwritten() {
    let d = dir("existing");
    let out = d.join("out.csv");
    fs::write(&out, "precious\n").unwrap();
    let err = sweep_file(&cases(), &out, &PLANNER, &opts(1)).unwrap_err();
    assert!(format!("{err:#}").contains("--resume"), "{err:#}");
    assert_eq!(fs::read_to_string(&out).unwrap(), "precious\n");
    // Nor resumed into when it is not a sweep of this spec.
    let resume = FileOptions {
        resume: true,
        ..opts(1)
    };
    let err = sweep_file(&cases(), &out, &PLANNER, &resume).unwrap_err();
    assert!(format!("{err:#}").contains("not a sweep CSV"), "{err:#}");
    assert_eq!(fs::read_to_string(&out).unwrap(), "precious\n");
}
