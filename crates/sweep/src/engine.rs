//! Running cases in parallel: a rayon pool plans them, the calling thread receives each
//! finished case's rows (in completion order) and hands them to the caller's callback, which
//! appends them to the output. The callback runs on one thread, so it needs no locking. When it
//! asks to stop (`ControlFlow::Break`: a case budget), no new case starts and the cases in
//! flight are still handed over; when it fails (disk full), no new case starts and nothing more
//! is handed over.

use std::fmt;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use rayon::prelude::*;

use crate::{render_case, Case, Infeasible, RankedPlan};

/// Plans one case: its ranked plans, best first, or why it has none. Must be deterministic
/// (same case, same answer) for sweeps to be reproducible; `Sync` because cases run in
/// parallel.
pub trait Planner: Sync {
    fn plan(&self, case: &Case) -> Result<Vec<RankedPlan>, Infeasible>;
}

impl<F> Planner for F
where
    F: Fn(&Case) -> Result<Vec<RankedPlan>, Infeasible> + Sync,
{
    fn plan(&self, case: &Case) -> Result<Vec<RankedPlan>, Infeasible> {
        self(case)
    }
}

/// Why [`run`] stopped early.
#[derive(Debug)]
pub enum RunError<E> {
    /// The worker pool could not start.
    Threads(rayon::ThreadPoolBuildError),
    /// The callback failed; no new case was started after that.
    Sink(E),
}

impl<E: fmt::Display> fmt::Display for RunError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Threads(e) => write!(f, "cannot start the worker threads: {e}"),
            RunError::Sink(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for RunError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Threads(e) => Some(e),
            RunError::Sink(e) => Some(e),
        }
    }
}

/// Plan `cases` on `threads` worker threads (0: one per core) and call `done(case, rows)` on
/// the calling thread for each finished case, in completion order, with the case's rows as CSV
/// text ([`render_case`]). Returns the number of cases handed to `done`.
pub fn run<P, E>(
    cases: &[Case],
    planner: &P,
    threads: usize,
    mut done: impl FnMut(&Case, String) -> Result<ControlFlow<()>, E>,
) -> Result<usize, RunError<E>>
where
    P: Planner + ?Sized,
{
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(RunError::Threads)?;
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<(usize, String)>();
    let mut finished = 0;
    let mut failure = None;
    std::thread::scope(|s| {
        let stop = &stop;
        s.spawn(move || {
            pool.install(|| {
                cases
                    .par_iter()
                    .enumerate()
                    .for_each_with(tx, |tx, (i, case)| {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        let rows = render_case(case, &planner.plan(case));
                        // The receiver is gone only after a failed callback: drop the result.
                        let _ = tx.send((i, rows));
                    });
            });
        });
        for (i, rows) in rx {
            match done(&cases[i], rows) {
                Ok(flow) => {
                    finished += 1;
                    if flow.is_break() {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    failure = Some(e);
                    break;
                }
            }
        }
    });
    match failure {
        Some(e) => Err(RunError::Sink(e)),
        None => Ok(finished),
    }
}
