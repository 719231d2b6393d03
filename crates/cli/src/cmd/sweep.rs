//! `autoplan sweep`, `merge`, `diff`: grids of cases to CSV, shards merged, sweeps compared.
//!
//! The file discipline (what makes a kill harmless) lives in [`sweep_file`]: each finished
//! case's rows are appended with one `write_all` and `sync_data`, in completion order; a resume
//! cuts any torn tail and skips the whole cases; when the run ends the file is rewritten in
//! canonical case order (to a temporary file, then renamed), so its bytes do not depend on
//! thread count, interruptions or shards.
//!
//! Output paths go through [`crate::outfile`]: a symlinked `--out`/`-o` writes the file the
//! link points to, a device or other non-regular file is refused, and the sweep holds an
//! exclusive lock on its output for the whole run (a second sweep of the same file fails at
//! once; so does a `merge -o` into it).

use std::fs;
use std::io::{IsTerminal, Read, Seek, SeekFrom, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use autoplan_sweep::{Case, Planner, RunError, SearchPlanner, Shard, SweepSpec, SweepTable};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Sweep spec (TOML), e.g. search_spaces/sweeps/nightly.toml.
    #[arg(long)]
    pub spec: PathBuf,
    /// Output CSV, e.g. results/nightly.csv (schema: results/README.md). A symbolic link is
    /// followed (the file it points to is written); devices and other non-regular files are
    /// refused. Locked while the sweep runs: a second sweep of the same file fails at once.
    #[arg(long)]
    pub out: PathBuf,
    /// Worker threads; 0 = one per core. The output does not depend on it.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Finish an interrupted sweep: keep the whole cases already in --out, run the rest.
    /// (Starts afresh when --out does not exist.)
    #[arg(long)]
    pub resume: bool,
    /// Run only the K-th of N deterministic slices (case i goes to slice i mod N + 1);
    /// `autoplan merge` joins the slices.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<Shard>,
    /// Stop after this many cases (more may finish: those in flight are kept); finish later
    /// with --resume.
    #[arg(long, value_name = "N")]
    pub max_cases: Option<usize>,
    /// When the sweep is complete, also write this CSV: each case's best plan with its time
    /// to train, GPU-hours and dollars (the spec's `tokens` and `price_usd_per_gpu_hour`) and
    /// whether it is on the Pareto front of time against GPU-hours among the GPU counts and
    /// batches of its model, cluster, sequence length and space (docs/search.md).
    #[arg(long, value_name = "FILE")]
    pub front: Option<PathBuf>,
    #[command(flatten)]
    pub target: super::target::TargetArgs,
}

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// Sweep CSVs to merge (e.g. the shards of one spec).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Output CSV (default: standard output), replaced atomically. A symbolic link is followed
    /// (the file it points to is replaced); devices and other non-regular files are refused.
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// The spec the inputs come from: checks that together they hold exactly its cases.
    #[arg(long)]
    pub spec: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// The reference sweep, e.g. results/reference.csv.
    pub old: PathBuf,
    /// The new sweep.
    pub new: PathBuf,
    /// Relative shift of a best-plan metric worth reporting (0.02 = 2 %), in [0, 100].
    #[arg(long, default_value_t = 0.02)]
    pub threshold: f64,
}

/// How [`sweep_file`] runs.
#[derive(Debug, Clone, Default)]
pub struct FileOptions {
    /// Worker threads; 0 = one per core.
    pub threads: usize,
    /// Continue the file instead of refusing to touch an existing one.
    pub resume: bool,
    /// Stop starting cases once this many have finished in this run.
    pub max_cases: Option<usize>,
    /// Draw a progress bar on stderr (only when stderr is a terminal).
    pub progress: bool,
}

/// What [`sweep_file`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Cases of this run (the shard's).
    pub cases: usize,
    /// Whole cases found in the file and skipped.
    pub resumed: usize,
    /// Cases planned and written in this run.
    pub ran: usize,
}

impl Summary {
    /// Every case of the run is in the file.
    pub fn complete(&self) -> bool {
        self.resumed + self.ran == self.cases
    }
}

/// Sweep `cases` (already sliced to a shard) into the CSV at `out` with `planner`; see the
/// module docs for the file discipline. Refuses to overwrite an existing non-empty file unless
/// resuming, a file another sweep holds, and non-regular files (symlinks are followed).
pub fn sweep_file<P: Planner + ?Sized>(
    cases: &[Case],
    out: &Path,
    planner: &P,
    opts: &FileOptions,
) -> anyhow::Result<Summary> {
    let name = out.display().to_string();
    let target = crate::outfile::target(out).with_context(|| format!("{name}: cannot write"))?;
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    }
    // Held until the end, the final rewrite included: one writer per file.
    let mut file = crate::outfile::open_locked(&target)
        .with_context(|| format!("{name}: cannot open for writing"))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .with_context(|| format!("{name}: cannot read"))?;
    let resume = match bytes {
        bytes if !bytes.is_empty() => {
            if !opts.resume {
                bail!("{name} exists: pass --resume to finish it, or remove it to start afresh");
            }
            // A cut inside a multi-byte character is a torn tail too: keep the valid prefix.
            let text = match String::from_utf8(bytes) {
                Ok(t) => t,
                Err(e) => {
                    let valid = e.utf8_error().valid_up_to();
                    String::from_utf8_lossy(&e.into_bytes()[..valid]).into_owned()
                }
            };
            autoplan_sweep::resume_point(&name, &text, cases)?
        }
        _ => autoplan_sweep::Resume {
            keep: 0,
            has_header: false,
            done: Default::default(),
        },
    };
    // Cut the torn tail (a partial row, the first rows of a case) and append after the rest.
    file.set_len(resume.keep as u64)
        .and_then(|_| file.seek(SeekFrom::End(0)))
        .with_context(|| format!("{name}: cannot truncate"))?;
    if !resume.has_header {
        write_block(&mut file, &autoplan_sweep::header())
            .with_context(|| format!("{name}: cannot write"))?;
    }
    let todo: Vec<Case> = cases
        .iter()
        .filter(|c| !resume.done.contains(&c.index))
        .cloned()
        .collect();
    let bar = progress_bar(cases.len(), resume.done.len(), opts.progress);
    let mut ran = 0;
    let result = autoplan_sweep::run(&todo, planner, opts.threads, |case, rows| {
        write_block(&mut file, &rows)?;
        ran += 1;
        bar.inc(1);
        bar.set_message(format!("{} {}×{}", case.model, case.cluster, case.gpus));
        Ok::<_, std::io::Error>(match opts.max_cases {
            Some(max) if ran >= max => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        })
    });
    bar.finish_and_clear();
    match result {
        Ok(_) => {}
        Err(RunError::Sink(e)) => return Err(e).with_context(|| format!("{name}: cannot write")),
        Err(e) => return Err(anyhow::anyhow!("{e}")),
    }
    canonicalize(&target, &name)?;
    drop(file);
    Ok(Summary {
        cases: cases.len(),
        resumed: resume.done.len(),
        ran,
    })
}

/// One case's rows: one write, then on disk before the next case is reported done.
fn write_block(file: &mut fs::File, rows: &str) -> std::io::Result<()> {
    file.write_all(rows.as_bytes())?;
    file.sync_data()
}

/// Rewrite `out` in canonical case order (via a temporary file and a rename, so a kill leaves
/// either the old or the new file), unless it already is.
/// `target` is the resolved output ([`crate::outfile::target`]), `name` the path as given.
fn canonicalize(target: &Path, name: &str) -> anyhow::Result<()> {
    let text = fs::read_to_string(target).with_context(|| format!("{name}: cannot read back"))?;
    let canonical = autoplan_sweep::merge(&[(name, &text)], None)?;
    if canonical != text {
        crate::outfile::replace(target, &canonical)
            .with_context(|| format!("{name}: cannot write"))?;
    }
    Ok(())
}

fn progress_bar(len: usize, done: usize, wanted: bool) -> ProgressBar {
    if !wanted || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] {pos}/{len} cases, ETA {eta} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_position(done as u64);
    bar.reset_eta();
    bar
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.max_cases == Some(0) {
        bail!("--max-cases 0: expected at least 1 case");
    }
    super::check_threads(args.threads, true)?;
    let spec = SweepSpec::read(&args.spec)?;
    if args.front.is_some() && spec.budget.is_none() {
        bail!(
            "--front: the spec {} states no `tokens` (the run's token count, e.g. tokens = \"15T\")",
            args.spec.display()
        );
    }
    let target = args.target.target()?;
    let planner = SearchPlanner::load(&spec)?.with_target(target);
    // Every row records the framework its plans run in.
    let cases: Vec<_> = spec
        .cases(|name| planner.cluster_gpus(name))?
        .into_iter()
        .map(|c| autoplan_sweep::Case {
            framework: target.framework.spec(),
            ..c
        })
        .collect();
    let shard = args.shard.unwrap_or(Shard::ALL);
    let mine = shard.select(&cases);
    let opts = FileOptions {
        threads: args.threads,
        resume: args.resume,
        max_cases: args.max_cases,
        progress: true,
    };
    let s = sweep_file(&mine, &args.out, &planner, &opts)?;
    eprintln!(
        "{}: {} of {} case(s){} done ({} resumed, {} run now){}",
        args.out.display(),
        s.resumed + s.ran,
        s.cases,
        if shard == Shard::ALL {
            String::new()
        } else {
            format!(" of shard {shard}")
        },
        s.resumed,
        s.ran,
        if s.complete() {
            ""
        } else {
            "; finish with --resume"
        },
    );
    if let (Some(front), Some(budget)) = (&args.front, &spec.budget) {
        anyhow::ensure!(
            s.complete(),
            "--front {}: not written, the sweep is not complete (finish it with --resume)",
            front.display()
        );
        let name = args.out.display().to_string();
        let text = fs::read_to_string(&args.out).with_context(|| format!("cannot read {name}"))?;
        let table = SweepTable::parse(&name, &text)?;
        let csv = autoplan_sweep::front::front_csv(&table, budget, |c| planner.hbm_bytes(c))
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        fs::write(front, csv).with_context(|| format!("cannot write {}", front.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn merge(args: MergeArgs) -> anyhow::Result<ExitCode> {
    let texts = args
        .inputs
        .iter()
        .map(|p| fs::read_to_string(p).with_context(|| format!("{}: cannot read", p.display())))
        .collect::<anyhow::Result<Vec<String>>>()?;
    let names: Vec<String> = args
        .inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let inputs: Vec<(&str, &str)> = names
        .iter()
        .zip(&texts)
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let expected = match &args.spec {
        Some(path) => {
            let spec = SweepSpec::read(path)?;
            let planner = SearchPlanner::load(&spec)?;
            Some(spec.cases(|name| planner.cluster_gpus(name))?)
        }
        None => None,
    };
    let merged = autoplan_sweep::merge(&inputs, expected.as_deref())?;
    match &args.out {
        Some(out) => {
            let name = out.display();
            let target =
                crate::outfile::target(out).with_context(|| format!("{name}: cannot write"))?;
            // Not into a file a sweep is writing (its rows would be lost on its next append).
            let _lock = crate::outfile::open_locked(&target)
                .with_context(|| format!("{name}: cannot open for writing"))?;
            crate::outfile::replace(&target, &merged)
                .with_context(|| format!("{name}: cannot write"))?;
        }
        None => std::io::stdout().lock().write_all(merged.as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Largest `--threshold` (see the check in [`diff`]).
const MAX_THRESHOLD: f64 = 100.0;

/// Exit status 0 when the sweeps agree, 1 when there are differences (as diff(1)).
pub fn diff(args: DiffArgs) -> anyhow::Result<ExitCode> {
    // A fraction of the old value (0.02 = 2 %). 100 (a shift of 10 000 %) is far past any
    // useful threshold, and the bound keeps the report's percentage finite (1e308 printed
    // "inf%"). A shift from 0 is infinite and reported at any threshold.
    if !(0.0..=MAX_THRESHOLD).contains(&args.threshold) {
        bail!(
            "--threshold {:?}: expected a relative shift in [0, {MAX_THRESHOLD}] (a fraction: 0.02 = 2 %)",
            args.threshold
        );
    }
    let read = |p: &Path| -> anyhow::Result<SweepTable> {
        let text =
            fs::read_to_string(p).with_context(|| format!("{}: cannot read", p.display()))?;
        Ok(SweepTable::parse(&p.display().to_string(), &text)?)
    };
    let report = autoplan_sweep::diff(&read(&args.old)?, &read(&args.new)?, args.threshold);
    // Through the checked writer: a reader that stops early (`| head`) ends the command
    // quietly (exit.rs), where `print!` panicked.
    let mut out = std::io::stdout().lock();
    write!(out, "{report}")?;
    out.flush()?;
    Ok(if report.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
