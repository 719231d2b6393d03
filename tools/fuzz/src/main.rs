//! autoplan-fuzz: a seeded, deterministic fuzz harness for the `autoplan` binary.
//!
//! It mutates the repository's bundled inputs (models, clusters, search spaces, sweep specs,
//! golden plan strings, load traces, the data CSVs) and the commands' flags, runs the real
//! binary on each case in a scratch directory under a time limit, classifies the outcome
//! (OK, ERROR, PANIC, ABORT, HANG, NON-FINITE, ACCEPTED-NONSENSE, BROKEN-PIPE, ODD-EXIT), prints
//! a summary and writes a reproduction of each finding. See tools/fuzz/README.md.

mod cases;
mod classify;
mod corpus;
mod mutate;
mod rng;
mod run;

use cases::{Case, COMMANDS};
use classify::Class;
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const USAGE: &str = "\
usage: autoplan-fuzz [OPTIONS]

  --seed S          seed of the run (default 0)
  --cases N         number of cases, 0..N (default 200)
  --case N          run case N only (with the same --seed and --commands) and keep its repro
  --timeout-s T     per-case wall-clock limit, seconds; the case is killed past it (default 10)
  --out DIR         reports and reproductions (default target/fuzz-out; its repro-*/ are replaced)
  --bin PATH        the autoplan binary under test (default target/fuzz/autoplan)
  --repo DIR        the repository root the inputs are read from (default .)
  --jobs J          cases run in parallel (default 2)
  --commands LIST   comma-separated subcommands to draw from (default all: search,evaluate,show,
                    validate,collective,place-experts,sweep,merge,diff,models,clusters)
  --mem-mib M       address-space limit of each run, MiB (default 4096; 0 = none)
  --max-wall-s W    stop starting cases after W seconds; the run then fails (default 0 = no limit)
  --fail-on LIST    classes that make the exit status 1 (default PANIC,ABORT,HANG,NON-FINITE)
  --list            print the generated cases and their digest; run nothing
  --keep            keep every case's scratch directory under DIR/work
  -h, --help        this help

Exit status: 0 = no case in a --fail-on class, 1 = some, 2 = usage or I/O error.";

struct Options {
    seed: u64,
    cases: u64,
    only: Option<u64>,
    timeout: Duration,
    out: PathBuf,
    bin: PathBuf,
    repo: PathBuf,
    jobs: usize,
    commands: Vec<String>,
    mem_mib: u64,
    fail_on: Vec<Class>,
    max_wall: Option<Duration>,
    list: bool,
    keep: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        seed: 0,
        cases: 200,
        only: None,
        timeout: Duration::from_secs(10),
        out: PathBuf::from("target/fuzz-out"),
        bin: PathBuf::from("target/fuzz/autoplan"),
        repo: PathBuf::from("."),
        jobs: 2,
        commands: Vec::new(),
        mem_mib: 4096,
        fail_on: Class::DEFAULT_FAIL.to_vec(),
        max_wall: None,
        list: false,
        keep: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value"));
        let num = |name: &str, v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{name} {v}: not a whole number"))
        };
        match a.as_str() {
            "--seed" => o.seed = num(a, val(a)?)?,
            "--cases" => o.cases = num(a, val(a)?)?,
            "--case" => o.only = Some(num(a, val(a)?)?),
            "--timeout-s" => {
                let v = val(a)?;
                let t: f64 = v
                    .parse()
                    .map_err(|_| format!("--timeout-s {v}: not a number"))?;
                // Up to a day: past that it is not a time limit.
                if !(t > 0.0 && t <= 86_400.0) {
                    return Err(format!("--timeout-s {v}: must be in (0, 86400]"));
                }
                o.timeout = Duration::from_secs_f64(t);
            }
            "--out" => o.out = PathBuf::from(val(a)?),
            "--bin" => o.bin = PathBuf::from(val(a)?),
            "--repo" => o.repo = PathBuf::from(val(a)?),
            "--jobs" => {
                let j = num(a, val(a)?)?;
                // One job per case at most matters; 256 is far past any machine this runs on.
                if !(1..=256).contains(&j) {
                    return Err(format!("--jobs {j}: must be in 1..=256"));
                }
                o.jobs = j as usize;
            }
            "--commands" => {
                o.commands = val(a)?
                    .split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect();
                for c in &o.commands {
                    if !COMMANDS.iter().any(|(n, _)| n == c) {
                        return Err(format!("--commands: unknown command `{c}`"));
                    }
                }
            }
            "--mem-mib" => o.mem_mib = num(a, val(a)?)?,
            "--fail-on" => {
                let v = val(a)?;
                o.fail_on = v
                    .split(',')
                    .filter(|s| !s.trim().is_empty())
                    .map(|s| Class::parse(s).ok_or(format!("--fail-on: unknown class `{s}`")))
                    .collect::<Result<_, _>>()?;
            }
            "--max-wall-s" => {
                let w = num(a, val(a)?)?;
                o.max_wall = (w > 0).then(|| Duration::from_secs(w));
            }
            "--list" => o.list = true,
            "--keep" => o.keep = true,
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument `{a}`")),
        }
    }
    Ok(o)
}

/// FNV-1a, 64 bits: the digest of the generated cases (stable across platforms and releases).
fn fnv1a(state: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(state, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// The digest of a list of cases.
pub fn digest(cases: &[Case]) -> u64 {
    cases.iter().fold(FNV_OFFSET, |h, c| {
        fnv1a(fnv1a(h, &c.index.to_le_bytes()), &c.fingerprint())
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse(&args) {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            emit(&format!("{USAGE}\n"));
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match fuzz(&o) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn rerun_line(o: &Options, case: u64) -> String {
    let mut s = format!("autoplan-fuzz --seed {} --case {case}", o.seed);
    if !o.commands.is_empty() {
        s.push_str(&format!(" --commands {}", o.commands.join(",")));
    }
    s
}

/// Run the cases; Ok(true) when no case fell in a --fail-on class.
fn fuzz(o: &Options) -> Result<bool, String> {
    let corpus = corpus::Corpus::load(&o.repo).map_err(|e| format!("reading the inputs: {e}"))?;
    let indices: Vec<u64> = match o.only {
        Some(n) => vec![n],
        None => (0..o.cases).collect(),
    };
    let cases: Vec<Case> = indices
        .iter()
        .map(|&i| cases::generate(&corpus, o.seed, i, &o.commands))
        .collect();
    let dg = digest(&cases);
    let what = match o.only {
        Some(n) => format!("case {n}"),
        None => format!("{} cases", cases.len()),
    };
    let restrict = if o.commands.is_empty() {
        String::new()
    } else {
        format!(", commands {}", o.commands.join(","))
    };
    emit(&format!(
        "autoplan-fuzz: seed {}, {what}{restrict}, digest {dg:016x}\n",
        o.seed
    ));
    if o.list {
        let mut list = String::new();
        for c in &cases {
            let pipe = if c.closed_stdout {
                "  [stdout closed]"
            } else {
                ""
            };
            list.push_str(&format!(
                "{:6} {}{pipe}\n",
                c.index,
                c.command_line("autoplan")
            ));
            for m in &c.mutations {
                list.push_str(&format!("         - {m}\n"));
            }
        }
        emit(&list);
        return Ok(true);
    }
    if !o.bin.is_file() {
        return Err(format!(
            "--bin {}: no such file (build it: cargo build --profile fuzz --bin autoplan)",
            o.bin.display()
        ));
    }
    prepare_out(&o.out)?;
    let runner = run::Runner {
        bin: o.bin.clone(),
        timeout: o.timeout,
        mem_mib: o.mem_mib,
    };
    let work = o.out.join("work");
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<run::Result>>> = Mutex::new(vec![None; cases.len()]);
    let errors: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..o.jobs.min(cases.len().max(1)) {
            s.spawn(|| loop {
                if o.max_wall.is_some_and(|w| start.elapsed() >= w) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(case) = cases.get(i) else { break };
                let dir = work.join(format!("case-{:06}", case.index));
                match runner.run(case, &dir) {
                    Ok(r) => {
                        if r.class.is_finding() || o.only.is_some() {
                            let rd = o.out.join(format!("repro-{:06}", case.index));
                            if let Err(e) =
                                runner.write_repro(case, &r, &rd, &rerun_line(o, case.index))
                            {
                                errors
                                    .lock()
                                    .unwrap()
                                    .push(format!("{}: {e}", rd.display()));
                            }
                        }
                        results.lock().unwrap()[i] = Some(r);
                    }
                    Err(e) => errors
                        .lock()
                        .unwrap()
                        .push(format!("case {}: {e}", case.index)),
                }
                if !o.keep {
                    let _ = fs::remove_dir_all(&dir);
                }
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if cases.len() >= 20 && n.is_multiple_of((cases.len() / 10).max(1)) {
                    eprintln!(
                        "  {n}/{} cases, {:.0} s",
                        cases.len(),
                        start.elapsed().as_secs_f64()
                    );
                }
            });
        }
    });
    let wall = start.elapsed();
    if !o.keep {
        let _ = fs::remove_dir(&work);
    }
    let errors = errors.into_inner().unwrap();
    if let Some(e) = errors.first() {
        return Err(format!(
            "{} case(s) could not be run; first: {e}",
            errors.len()
        ));
    }
    let all = results.into_inner().unwrap();
    let not_run = all.iter().filter(|r| r.is_none()).count();
    let (cases, results): (Vec<Case>, Vec<run::Result>) = cases
        .into_iter()
        .zip(all)
        .filter_map(|(c, r)| r.map(|r| (c, r)))
        .unzip();
    let mut report = summary(o, &cases, &results, dg, wall);
    if not_run > 0 {
        report.push_str(&format!(
            "STOPPED: the --max-wall-s budget was spent with {not_run} case(s) not run: the run fails\n"
        ));
    }
    emit(&report);
    let _ = fs::write(o.out.join("summary.txt"), &report);
    if let (Some(n), Some(r)) = (o.only, results.first()) {
        emit(&format!(
            "\nclass {}: {}\nreproduction: {}\n",
            r.class,
            r.detail,
            o.out.join(format!("repro-{n:06}/cmd.sh")).display()
        ));
    }
    Ok(not_run == 0 && !results.iter().any(|r| o.fail_on.contains(&r.class)))
}

/// Print to stdout. A closed stdout (`autoplan-fuzz --list | head`) is not an error: the rest
/// of the output is dropped and the exit status is the run's.
fn emit(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes()).and_then(|()| out.flush());
}

/// Make `out` ready: created, or emptied of a previous run's reports (only a directory this
/// harness made, marked by `.autoplan-fuzz`, is ever emptied).
fn prepare_out(out: &Path) -> Result<(), String> {
    let marker = out.join(".autoplan-fuzz");
    if out.exists() {
        let empty = fs::read_dir(out)
            .map_err(|e| format!("--out {}: {e}", out.display()))?
            .next()
            .is_none();
        if !empty && !marker.exists() {
            return Err(format!(
                "--out {}: exists and was not made by autoplan-fuzz; choose another",
                out.display()
            ));
        }
        for e in fs::read_dir(out).map_err(|e| e.to_string())?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("repro-") || name == "work" || name == "summary.txt" {
                let p = e.path();
                let _ = if p.is_dir() {
                    fs::remove_dir_all(&p)
                } else {
                    fs::remove_file(&p)
                };
            }
        }
    }
    fs::create_dir_all(out).map_err(|e| format!("--out {}: {e}", out.display()))?;
    fs::write(
        &marker,
        "reports of autoplan-fuzz; its repro-*/ are replaced by each run\n",
    )
    .map_err(|e| e.to_string())
}

fn summary(
    o: &Options,
    cases: &[Case],
    results: &[run::Result],
    dg: u64,
    wall: Duration,
) -> String {
    let mut by_cmd: BTreeMap<&str, BTreeMap<Class, usize>> = BTreeMap::new();
    let mut total: BTreeMap<Class, usize> = BTreeMap::new();
    for (c, r) in cases.iter().zip(results) {
        *by_cmd
            .entry(c.command)
            .or_default()
            .entry(r.class)
            .or_default() += 1;
        *total.entry(r.class).or_default() += 1;
    }
    let mut s = String::new();
    let cols: Vec<Class> = Class::ALL.to_vec();
    s.push_str(&format!("\n{:<14}{:>6}", "command", "cases"));
    for c in &cols {
        s.push_str(&format!(" {:>w$}", c.name(), w = c.name().len().max(5)));
    }
    s.push('\n');
    let row = |s: &mut String, name: &str, m: &BTreeMap<Class, usize>| {
        s.push_str(&format!("{name:<14}{:>6}", m.values().sum::<usize>()));
        for c in &cols {
            s.push_str(&format!(
                " {:>w$}",
                m.get(c).copied().unwrap_or(0),
                w = c.name().len().max(5)
            ));
        }
        s.push('\n');
    };
    for (cmd, m) in &by_cmd {
        row(&mut s, cmd, m);
    }
    row(&mut s, "total", &total);
    let slowest = results.iter().map(|r| r.wall).max().unwrap_or_default();
    s.push_str(&format!(
        "\nseed {}, {} cases, digest {dg:016x}, {} jobs, limit {:.0} s; wall {:.1} s (slowest case {:.2} s)\n",
        o.seed,
        cases.len(),
        o.jobs,
        o.timeout.as_secs_f64(),
        wall.as_secs_f64(),
        slowest.as_secs_f64()
    ));
    let findings: Vec<(&Case, &run::Result)> = cases
        .iter()
        .zip(results)
        .filter(|(_, r)| r.class.is_finding())
        .collect();
    if !findings.is_empty() {
        s.push_str(&format!(
            "\n{} finding(s), reproductions in {}/repro-NNNNNN/cmd.sh:\n",
            findings.len(),
            o.out.display()
        ));
        let mut sorted = findings.clone();
        sorted.sort_by_key(|(c, r)| (r.class, c.index));
        for (c, r) in sorted.iter().take(60) {
            let mut d = r.detail.replace('\n', " ");
            if d.len() > 150 {
                let cut = (0..=150)
                    .rev()
                    .find(|&i| d.is_char_boundary(i))
                    .unwrap_or(0);
                d.truncate(cut);
                d.push('…');
            }
            s.push_str(&format!(
                "  {:<17} case {:<6} {:<13} {d}\n",
                r.class.name(),
                c.index,
                c.command
            ));
        }
        if sorted.len() > 60 {
            s.push_str(&format!(
                "  ... and {} more (see {}/repro-*)\n",
                sorted.len() - 60,
                o.out.display()
            ));
        }
    }
    let failed: Vec<String> = o
        .fail_on
        .iter()
        .filter_map(|c| total.get(c).map(|n| format!("{n} {}", c.name())))
        .collect();
    if failed.is_empty() {
        let names: Vec<&str> = o.fail_on.iter().map(|c| c.name()).collect();
        s.push_str(&format!("\nPASS: no case in {}\n", names.join(", ")));
    } else {
        s.push_str(&format!("\nFAIL: {}\n", failed.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_stable_and_order_sensitive() {
        let c = corpus::Corpus::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")).unwrap();
        let a: Vec<Case> = (0..100).map(|i| cases::generate(&c, 9, i, &[])).collect();
        let b: Vec<Case> = (0..100).map(|i| cases::generate(&c, 9, i, &[])).collect();
        assert_eq!(digest(&a), digest(&b));
        let mut r = b.clone();
        r.swap(0, 1);
        assert_ne!(digest(&a), digest(&r));
        // FNV-1a's published test vector.
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn options_are_checked() {
        let p = |s: &str| parse(&s.split_whitespace().map(str::to_owned).collect::<Vec<_>>());
        assert!(p("--seed 3 --cases 10 --jobs 4 --commands search,diff").is_ok());
        assert!(p("--jobs 0").is_err());
        assert!(p("--timeout-s nan").is_err());
        assert!(p("--commands bogus").is_err());
        assert!(p("--fail-on PANIC,nonsense").is_err());
        assert_eq!(
            p("--fail-on panic,accepted-nonsense").unwrap().fail_on,
            [Class::Panic, Class::Nonsense]
        );
    }
}
