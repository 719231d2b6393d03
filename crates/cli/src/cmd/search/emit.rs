//! `search --explain N --emit FORMAT`: plan N of the ranking (1 by default) exported as
//! `evaluate --emit FORMAT` exports it, instead of the ranking.

use std::io::Write;

use autoplan_evaluate::Metrics;
use autoplan_search::{Outcome, Scorer};

use super::Args;
use crate::cmd::evaluate::{nccl_config, Emit};

/// Writes plan `--explain N`'s export to `out`; an error if fewer plans were ranked, or if the
/// format's framework cannot run it (with the capability table's reason).
pub(super) fn export(
    out: &mut dyn Write,
    args: &Args,
    emit: Emit,
    scorer: &Scorer,
    outcome: &Outcome<Metrics>,
) -> anyhow::Result<()> {
    let n = args.explain.unwrap_or(1);
    let Some(ranked) = outcome.plans.get(n - 1) else {
        anyhow::bail!(
            "--explain {n} --emit: only {} plans were ranked",
            outcome.plans.len()
        );
    };
    let plan = ranked.plan;
    let ev = &scorer.exact;
    let model = ev.model();
    let framework = args.target.framework;
    match emit.framework_export(&plan, model, ev.cluster(), framework) {
        Some(text) => {
            let text = text.map_err(|e| {
                anyhow::anyhow!("--explain {n} --emit: plan {n} ({plan}) is not exported: {e}")
            })?;
            write!(out, "{text}")?;
        }
        None => {
            let report = ev
                .report(&plan)
                .map_err(|e| anyhow::anyhow!("plan {n} no longer evaluates: {e}"))?;
            let mut buf: Vec<u8> = Vec::new();
            nccl_config(&mut buf, &plan.to_string(), ev, &report)?;
            out.write_all(&buf)?;
        }
    }
    Ok(())
}
