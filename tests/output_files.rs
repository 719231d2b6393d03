//! Issue 21, item 4, end to end with the built binary: one writer per sweep output (an advisory
//! lock), symlinked outputs written through, device and FIFO outputs refused untouched, and a
//! sweep killed (SIGINT, SIGKILL) mid-run resumed to the bytes of an uninterrupted one.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::autoplan;

/// Small enough for a test, slow enough (30 real searches of the default space, one thread:
/// about a quarter of a second in a release build on the development machine) that a sweep is
/// still running after its first case is on disk, while other processes try its file.
const SLOW_SPEC: &str = r#"
top_k = 2
models = ["llama3-70b", "mixtral-8x7b"]
seq_lens = [2048, 4096, 8192]
global_batches = [512]
spaces = ["default"]

[[clusters]]
name = "dgx-h100"
gpus = [64, 128, 256, 512, 1024]
"#;

/// Cases of [`SLOW_SPEC`]: models × sequence lengths × GPU counts.
const SLOW_CASES: usize = 2 * 3 * 5;

const SMALL_SPEC: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/search_spaces/sweeps/small.toml"
);

fn dir(test: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("output_files-{test}"));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `autoplan sweep --spec SPEC --out OUT EXTRA...`, which must succeed; the file's text.
fn sweep_ok(spec: &Path, out: &Path, extra: &[&str]) -> String {
    let args = [
        &[
            "sweep",
            "--spec",
            s(spec),
            "--out",
            s(out),
            "--threads",
            "1",
        ][..],
        extra,
    ]
    .concat();
    let (code, _, err) = autoplan(&args);
    assert_eq!(code, Some(0), "{args:?}: {err}");
    fs::read_to_string(out).unwrap()
}

fn spawn_sweep(spec: &Path, out: &Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_autoplan"))
        .args([
            "sweep",
            "--spec",
            s(spec),
            "--out",
            s(out),
            "--threads",
            "1",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn autoplan sweep")
}

/// Wait until `out` holds at least `lines` complete lines (the header is one), or the sweep
/// ended; true when it is still running. Bounded: a sweep that neither writes nor ends within
/// a minute fails the test instead of hanging it.
fn wait_for_lines(child: &mut Child, out: &Path, lines: usize) -> bool {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        let text = fs::read(out).unwrap_or_default();
        if text.iter().filter(|&&b| b == b'\n').count() >= lines {
            return true;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the sweep wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_second_writer_is_refused_and_the_first_finishes_intact() {
    let d = dir("lock");
    let spec = d.join("slow.toml");
    fs::write(&spec, SLOW_SPEC).unwrap();
    let reference = sweep_ok(&spec, &d.join("reference.csv"), &[]);
    assert_eq!(reference.lines().count(), 1 + SLOW_CASES * 2, "{reference}");

    let out = d.join("out.csv");
    let mut first = spawn_sweep(&spec, &out, &[]);
    // The lock is taken before the header is written.
    assert!(wait_for_lines(&mut first, &out, 1), "the first sweep ended");
    for second in [
        vec!["sweep", "--spec", s(&spec), "--out", s(&out), "--resume"],
        vec!["sweep", "--spec", s(&spec), "--out", s(&out)],
        vec!["merge", s(&d.join("reference.csv")), "-o", s(&out)],
    ] {
        let (code, stdout, err) = autoplan(&second);
        assert!(
            code.is_some_and(|c| c != 0 && c != 101),
            "{second:?}: {code:?} {err}"
        );
        assert!(stdout.is_empty(), "{stdout}");
        assert!(
            err.contains(&format!("{}: cannot open for writing", out.display()))
                && err
                    .contains("another autoplan process (a sweep or a merge) is writing this file"),
            "{second:?}: {err}"
        );
    }
    let status = first.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(fs::read_to_string(&out).unwrap(), reference);
    // Released: resuming the finished file now works and changes nothing.
    assert_eq!(sweep_ok(&spec, &out, &["--resume"]), reference);
}

#[cfg(unix)]
#[test]
fn a_sweep_killed_mid_run_resumes_to_the_same_bytes() {
    use std::os::unix::process::ExitStatusExt;
    let d = dir("kill");
    let spec = d.join("slow.toml");
    fs::write(&spec, SLOW_SPEC).unwrap();
    let reference = sweep_ok(&spec, &d.join("reference.csv"), &[]);
    for signal in ["INT", "KILL"] {
        let out = d.join(format!("{signal}.csv"));
        let mut child = spawn_sweep(&spec, &out, &[]);
        // Header and a first row on disk, the rest to come.
        assert!(wait_for_lines(&mut child, &out, 2), "the sweep ended");
        let kill = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let status = child.wait().unwrap();
        assert!(status.signal().is_some(), "{signal}: {status:?}");
        let partial = fs::read_to_string(&out).unwrap();
        assert!(
            partial.len() < reference.len(),
            "{signal}: nothing left to resume"
        );
        assert_eq!(sweep_ok(&spec, &out, &["--resume"]), reference, "{signal}");
    }
}

#[cfg(unix)]
#[test]
fn symlinked_outputs_are_written_through_the_link() {
    let d = dir("symlink");
    let reference = sweep_ok(Path::new(SMALL_SPEC), &d.join("reference.csv"), &[]);
    // A sweep through a link (to a file not there yet, in a directory not there yet).
    let link = d.join("link.csv");
    std::os::unix::fs::symlink("results/real.csv", &link).unwrap();
    assert_eq!(sweep_ok(Path::new(SMALL_SPEC), &link, &[]), reference);
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        fs::read_to_string(d.join("results/real.csv")).unwrap(),
        reference
    );
    // `merge -o` through the link replaces the target's contents, the link stays.
    fs::write(d.join("results/real.csv"), "stale\n").unwrap();
    let (code, _, err) = autoplan(&["merge", s(&d.join("reference.csv")), "-o", s(&link)]);
    assert_eq!(code, Some(0), "{err}");
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        fs::read_to_string(d.join("results/real.csv")).unwrap(),
        reference
    );
    // A link to a link, relative, across directories.
    let link2 = d.join("results/again.csv");
    std::os::unix::fs::symlink("../link.csv", &link2).unwrap();
    fs::write(d.join("results/real.csv"), "stale\n").unwrap();
    let (code, _, err) = autoplan(&["merge", s(&d.join("reference.csv")), "-o", s(&link2)]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        fs::read_to_string(d.join("results/real.csv")).unwrap(),
        reference
    );
    assert!(!d.join("results/real.csv.tmp").exists());
    // A loop is an error, not a hang.
    std::os::unix::fs::symlink("loop-b", d.join("loop-a")).unwrap();
    std::os::unix::fs::symlink("loop-a", d.join("loop-b")).unwrap();
    let (code, _, err) = autoplan(&[
        "merge",
        s(&d.join("reference.csv")),
        "-o",
        s(&d.join("loop-a")),
    ]);
    assert!(code.is_some_and(|c| c != 0 && c != 101), "{err}");
    assert!(err.contains("symbolic links"), "{err}");
}

#[cfg(unix)]
#[test]
fn devices_and_fifos_are_refused_untouched() {
    use std::os::unix::fs::FileTypeExt;
    let d = dir("devices");
    let reference = d.join("reference.csv");
    sweep_ok(Path::new(SMALL_SPEC), &reference, &[]);
    let fifo = d.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let link = d.join("to-full");
    std::os::unix::fs::symlink("/dev/full", &link).unwrap();
    for (out, what) in [
        (Path::new("/dev/full"), "is a character device"),
        (fifo.as_path(), "is a FIFO (named pipe)"),
        (
            link.as_path(),
            "is a character device (the symbolic link points to /dev/full)",
        ),
        (d.as_path(), "is a directory"),
    ] {
        for args in [
            vec!["merge", s(&reference), "-o", s(out)],
            vec!["sweep", "--spec", SMALL_SPEC, "--out", s(out)],
            vec!["sweep", "--spec", SMALL_SPEC, "--out", s(out), "--resume"],
        ] {
            let (code, stdout, err) = autoplan(&args);
            assert!(
                code.is_some_and(|c| c != 0 && c != 101),
                "{args:?}: {code:?} {err}"
            );
            assert!(stdout.is_empty(), "{stdout}");
            assert!(
                err.contains(&format!(
                    "{}: cannot write: {what}, not a regular file",
                    out.display()
                )),
                "{args:?}: {err}"
            );
        }
    }
    assert!(fs::metadata("/dev/full")
        .unwrap()
        .file_type()
        .is_char_device());
    assert!(!Path::new("/dev/full.tmp").exists());
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
}

/// The same, in one process through the library (flock locks are per open file, so two opens
/// in one process exclude each other too), with a deterministic slow planner; the refusal is
/// an `std::io::Error` of kind `WouldBlock` in the error's chain (the CLI's I/O class).
#[test]
fn the_lock_holds_within_one_process_and_is_an_io_error() {
    use autoplan::cmd::sweep::{sweep_file, FileOptions};
    use autoplan::sweep::testing::SyntheticPlanner;
    use autoplan::sweep::SweepSpec;
    let d = dir("lock-lib");
    let cases = SweepSpec::read(SMALL_SPEC)
        .unwrap()
        .cases(|name| Err(format!("{name} should be scaled")))
        .unwrap();
    let fast = SyntheticPlanner::default();
    let slow = SyntheticPlanner {
        max_delay_us: 40_000,
    };
    let opts = |resume| FileOptions {
        threads: 1,
        resume,
        ..FileOptions::default()
    };
    let reference = d.join("reference.csv");
    sweep_file(&cases, &reference, &fast, &opts(false)).unwrap();
    let out = d.join("out.csv");
    std::thread::scope(|scope| {
        let first = scope.spawn(|| sweep_file(&cases, &out, &slow, &opts(false)));
        let start = Instant::now();
        while fs::read(&out).map_or(true, |t| !t.contains(&b'\n')) {
            assert!(start.elapsed() < Duration::from_secs(60), "no header");
            std::thread::sleep(Duration::from_millis(1));
        }
        let err = sweep_file(&cases, &out, &fast, &opts(true)).unwrap_err();
        let io = err
            .chain()
            .find_map(|e| e.downcast_ref::<std::io::Error>())
            .expect("an io::Error in the chain");
        assert_eq!(io.kind(), std::io::ErrorKind::WouldBlock, "{err:#}");
        assert!(
            format!("{err:#}").starts_with(&format!("{}: cannot open for writing", out.display())),
            "{err:#}"
        );
        let s = first.join().unwrap().unwrap();
        assert!(s.complete(), "{s:?}");
    });
    assert_eq!(
        fs::read_to_string(&out).unwrap(),
        fs::read_to_string(&reference).unwrap()
    );
}
