//! `--emit`: a plan as a framework's launch configuration, and the parsers that read those
//! configurations back into plans (the round trip the exports are tested by).
//!
//! | format       | what it writes                                                   | home |
//! |--------------|------------------------------------------------------------------|------|
//! | `megatron`   | Megatron-LM `pretrain_gpt.py` flags                               | `autoplan_plan::Plan::megatron_args_for` (flags), [`megatron`] (read back) |
//! | `torchtitan` | torchtitan v0.2.2 TOML job config                                 | [`torchtitan`] |
//! | `deepspeed`  | DeepSpeed 0.19.5 JSON config and Megatron-DeepSpeed arguments     | [`deepspeed`] |
//! | `nccl`       | NCCL's example tuner plugin CSV                                   | `autoplan_cost::nccl`, `cmd::evaluate` |
//!
//! Each export is of one framework: a plan that framework cannot run is refused with its
//! capability table's reason ([`Framework::check`]), and a knob the format has no key for is an
//! error naming it, never a dropped setting.

pub mod deepspeed;
pub mod megatron;
pub mod megatron_model;
pub mod torchtitan;

use autoplan_graph::ModelSpec;
use autoplan_plan::{Framework, Plan, Refusal, Schedule};

/// Why a plan does not export.
#[derive(Debug, Clone, PartialEq)]
pub enum ExportError {
    /// The plan is not valid for the model (`Plan::check`).
    Invalid(String),
    /// The framework's capability table refuses it (its rule and source).
    Refused(Box<Refusal>),
    /// The format has no key for the knob's value.
    Inexpressible {
        framework: Framework,
        knob: &'static str,
        value: String,
        reason: &'static str,
    },
}

impl std::fmt::Display for ExportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExportError::Invalid(e) => write!(f, "invalid plan: {e}"),
            ExportError::Refused(r) => write!(f, "{r}"),
            ExportError::Inexpressible {
                framework,
                knob,
                value,
                reason,
            } => write!(f, "{framework} cannot express {knob}={value}: {reason}"),
        }
    }
}

impl std::error::Error for ExportError {}

/// The checks every export makes first: the plan is valid for the model on its own GPU count,
/// and `framework` runs it on the cluster (`mnnvl`: its NVLink domain spans several nodes,
/// `Framework::check_on`).
pub(crate) fn admit(
    plan: &Plan,
    model: &ModelSpec,
    framework: Framework,
    mnnvl: bool,
) -> Result<(), ExportError> {
    let gpus = u32::try_from(plan.gpus())
        .map_err(|_| ExportError::Invalid(format!("{} GPUs", plan.gpus())))?;
    plan.check(model, gpus)
        .map_err(|e| ExportError::Invalid(e.to_string()))?;
    framework
        .check_on(plan, model, mnnvl)
        .map_err(|r| ExportError::Refused(Box::new(r)))
}

/// One pipeline stage of a framework that lists stages explicitly: the rank that runs it and
/// its transformer blocks (`first..first + blocks`), in model order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stage {
    pub rank: u32,
    pub first: u32,
    pub blocks: u32,
}

/// The rank of pipeline stage `s` of `stages_per_rank·pp`: round-robin (`s mod pp`, the
/// interleaved "loop" placement) or V-shaped (stage `s` and `2pp−1−s` on one rank, DualPipe's;
/// torchtitan's `stage_ids_this_rank`, pipeline_parallel.py @ v0.2.2:L446-466, frameworks.md
/// §2.1).
pub fn stage_rank(s: u32, pp: u32, v_shape: bool) -> u32 {
    if v_shape && s >= pp {
        2 * pp - 1 - s
    } else {
        s % pp
    }
}

/// The stages of `plan` in model order: `pp` under 1F1B, `pp·vpp` under the interleaved
/// schedule, `2·pp` (V-shaped) under DualPipe. Each rank's blocks (the plan's stage layout) go
/// over its stages as the evaluator splits them ([`autoplan_plan::StageLayout::chunk_blocks`]
/// where the split counts the embedding or loss; otherwise evenly, the first stages taking
/// the remainder, as Megatron's `--pipeline-model-parallel-layout` export does).
pub fn stages(plan: &Plan, model: &ModelSpec) -> Option<Vec<Stage>> {
    let layout = plan.stage_blocks(model)?;
    let pp = layout.pp;
    let (per_rank, v_shape) = match plan.schedule {
        _ if pp <= 1 => (1, false),
        Schedule::Interleaved => (plan.vpp.max(1), false),
        Schedule::DualPipe => (2, true),
        _ => (1, false),
    };
    let count = |rank: u32, chunk: u32| -> u32 {
        let b = layout.blocks(rank);
        if layout.split != autoplan_plan::PipelineSplit::Blocks && per_rank == layout.vpp {
            layout.chunk_blocks(rank, chunk) as u32
        } else {
            b / per_rank + u32::from(chunk < b % per_rank)
        }
    };
    // The rank-th stage of a rank is its chunk index: stage `s` is chunk `s / pp` of its rank
    // in both placements.
    let mut out = Vec::new();
    let mut next = 0;
    for s in 0..pp * per_rank {
        let rank = stage_rank(s, pp, v_shape);
        let blocks = count(rank, s / pp);
        out.push(Stage {
            rank,
            first: next,
            blocks,
        });
        next += blocks;
    }
    Some(out)
}

/// The plan whose layout gives `counts` (blocks per stage in model order, `per_rank` stages per
/// rank, V-shaped or not): the even layout, one of Megatron's account-for splits, or explicit
/// first/last-stage block counts, whichever reproduces them first; `None` if none does.
pub fn layout_from_stages(base: Plan, model: &ModelSpec, counts: &[u32]) -> Option<Plan> {
    use autoplan_plan::PipelineSplit as S;
    let pp = base.pp.max(1);
    let rank_blocks = |r: u32| -> u32 {
        (0..counts.len() as u32)
            .filter(|&s| stage_rank(s, pp, base.schedule == Schedule::DualPipe && pp > 1) == r)
            .map(|s| counts[s as usize])
            .sum()
    };
    let first = rank_blocks(0);
    let last = rank_blocks(pp - 1);
    let candidates = [
        (None, None, S::Blocks),
        (None, None, S::EmbeddingLoss),
        (None, None, S::Embedding),
        (None, None, S::Loss),
        (Some(first), Some(last), S::Blocks),
    ];
    candidates.into_iter().find_map(|(f, l, split)| {
        let p = Plan {
            first_stage_layers: f,
            last_stage_layers: l,
            pipeline_split: split,
            ..base
        };
        let got = stages(&p, model)?;
        (got.len() == counts.len() && got.iter().zip(counts).all(|(s, &c)| s.blocks == c))
            .then_some(p)
    })
}
