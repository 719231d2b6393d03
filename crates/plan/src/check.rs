//! Validity of a plan for a model on a GPU count ([`Plan::check`]) and the pipeline stage
//! layout ([`Plan::stage_blocks`]).
//!
//! The rules are Megatron-LM's where Megatron has one, except where a rule only reflects an
//! implementation limit that costs memory rather than correctness (kv-head replication, vocab
//! padding); those are allowed here and their cost is counted by `autoplan-memory`.

use autoplan_graph::{Attention, ModelSpec};

use crate::knob::Knob;
use crate::{PipelineSplit, Plan, RecomputeModules, Schedule};

/// Why a plan cannot run a model on a cluster. Every variant carries the numbers involved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// `offload_params` without what autoplan prices it with (`offload_params.rs`).
    #[error("offload_params=on needs {needs}")]
    OffloadParams { needs: &'static str },
    #[error("{dim} is 0")]
    ZeroDegree { dim: &'static str },
    #[error("the plan uses tp·cp·dp·pp = {plan} GPUs but the cluster has {gpus}")]
    GpuCount { plan: u64, gpus: u32 },
    #[error(
        "zero={zero} is not a sharding mode (0, 1, 2, 3 or 3-noreshard, :G only from stage 1)"
    )]
    ZeroStage { zero: crate::Zero },
    #[error(
        "zero=…:{group}: an HSDP shard group of {group} ranks must divide the dp·cp = {dp_cp} \
         data-parallel ranks, be smaller (the whole group is plain sharding, without :G) and \
         share a factor with the expert data-parallel group"
    )]
    ShardGroup { group: u32, dp_cp: u32 },
    #[error("tp={tp} does not divide the {heads} attention heads")]
    TpHeads { tp: u32, heads: u32 },
    #[error(
        "tp={tp} and the {kv_heads} key/value heads: neither divides the other (kv heads are \
         split when tp divides them and replicated tp/kv_heads times when kv_heads divides tp)"
    )]
    TpKvHeads { tp: u32, kv_heads: u32 },
    #[error("tp={tp} does not divide the dense FFN hidden size {ffn_hidden}")]
    TpFfn { tp: u32, ffn_hidden: u32 },
    #[error("tp={tp} does not divide the shared experts' hidden size {shared_ffn}")]
    TpSharedFfn { tp: u32, shared_ffn: u64 },
    #[error("moe_tp={moe_tp} does not divide the expert FFN hidden size {expert_ffn_hidden}")]
    MoeTpFfn { moe_tp: u32, expert_ffn_hidden: u32 },
    #[error("ep={ep} and moe_tp={moe_tp} need an MoE model; {model} has no experts")]
    ExpertDegreesWithoutMoe { ep: u32, moe_tp: u32, model: String },
    #[error("ep={ep} does not divide the {experts} experts")]
    EpExperts { ep: u32, experts: u32 },
    #[error(
        "parallel folding: moe_tp·ep = {moe_tp}·{ep} does not divide tp·cp·dp = {dense} \
         (the MoE layers reuse the GPUs of the attention layers)"
    )]
    Folding { moe_tp: u32, ep: u32, dense: u64 },
    #[error(
        "MoE with tp={tp} needs sequence parallelism (sp=on): Megatron-LM requires it, tokens \
         would otherwise be dispatched tp times"
    )]
    MoeTpNeedsSp { tp: u32 },
    #[error("global batch {global_batch} is not a multiple of mbs·dp = {mbs}·{dp}")]
    Batch {
        global_batch: u32,
        mbs: u32,
        dp: u32,
    },
    #[error("pp={pp} is more than the {blocks} transformer blocks")]
    PpBlocks { pp: u32, blocks: u32 },
    #[error("vpp={vpp} needs schedule=interleaved (and interleaved needs vpp ≥ 2); schedule is {schedule}")]
    VppSchedule { vpp: u32, schedule: &'static str },
    #[error("interleaved schedule: pp={pp} must be ≥ 2")]
    InterleavedPp { pp: u32 },
    #[error(
        "interleaved schedule: stage {stage} has {blocks} blocks, fewer than its vpp={vpp} \
         model chunks"
    )]
    VppBlocks { stage: u32, blocks: u32, vpp: u32 },
    #[error(
        "interleaved schedule needs at least pp={pp} micro-batches per step, the plan has \
         {microbatches} (global batch / (mbs·dp))"
    )]
    InterleavedMicrobatches { pp: u32, microbatches: u32 },
    #[error("dualpipe needs an even pp ≥ 2 (ranks pair stage i with stage pp−1−i); pp={pp}")]
    DualPipePp { pp: u32 },
    #[error(
        "uneven stages: first_stage_layers={first:?}, last_stage_layers={last:?} do not fit \
         {blocks} blocks on pp={pp} stages (every stage needs at least one block)"
    )]
    UnevenStages {
        first: Option<u32>,
        last: Option<u32>,
        blocks: u32,
        pp: u32,
    },
    #[error(
        "pipeline_split={split}: the {blocks} blocks and the {parts} counted part(s) need \
         pp·vpp = {chunks} chunks of equal slots ({total} slots do not divide), leave \
         first/last_stage_layers out and a block on the first and last stages (Megatron's \
         --account-for-embedding/loss-in-pipeline-split, frameworks.md §1.2)"
    )]
    PipelineSplit {
        split: &'static str,
        blocks: u32,
        parts: u32,
        chunks: u32,
        total: u32,
    },
    #[error(
        "cp={cp}: the sequence length {seq_len} must be a multiple of 2·cp (causal load \
         balancing gives each CP rank two chunks)"
    )]
    CpSeq { cp: u32, seq_len: u32 },
    #[error(
        "{mode} needs {what} ({n}) divisible by tp·{group} ({prod}): Ulysses splits the heads \
         of each TP rank over the all-to-all group"
    )]
    CpHeads {
        mode: &'static str,
        what: &'static str,
        n: u32,
        group: &'static str,
        prod: u32,
    },
    #[error(
        "cp_comm=a2a+p2p:{a2a} needs an a2a group size N with 2 ≤ N ≤ cp/2 dividing cp={cp} \
         (Megatron's --hierarchical-context-parallel-sizes N cp/N, both levels > 1)"
    )]
    CpHierarchy { a2a: u32, cp: u32 },
    #[error(
        "offload_activations={layers} is not below the {blocks} blocks of the largest of \
         pp={pp} stages: it counts the layers offloaded per pipeline stage, and every layer of \
         every stage is offload_activations=all"
    )]
    OffloadActivationsExceedStage { layers: u32, blocks: u32, pp: u32 },
    #[error("recompute_layers={layers} given with recompute=none")]
    RecomputeLayersWithoutRecompute { layers: u32 },
    #[error(
        "recompute_layers={layers} is more than the {max} blocks of the largest model chunk \
         ({blocks} blocks on the largest of pp={pp} stages, vpp={vpp} chunks each): it counts \
         the blocks recomputed per (virtual) pipeline stage"
    )]
    RecomputeLayersExceedStage {
        layers: u32,
        max: u32,
        blocks: u32,
        pp: u32,
        vpp: u32,
    },
    #[error("{knob}={value} does not apply to {model}: it has no experts (MoE layers); leave {knob} out")]
    MoeKnobWithoutMoe {
        knob: &'static str,
        value: String,
        model: String,
    },
    #[error("recompute module {module} does not apply to {model}: {reason}")]
    RecomputeModule {
        module: &'static str,
        model: String,
        reason: &'static str,
    },
    /// A knob value whose implementation the cluster's hardware cannot run (autoplan-evaluate's
    /// `hardware` rules: the plan alone is valid, the GPUs or their node are not).
    #[error("{knob}={value} needs {needs}, and the cluster has {found} ({cite})")]
    Hardware {
        knob: &'static str,
        value: String,
        needs: &'static str,
        found: &'static str,
        cite: &'static str,
    },
}

/// How the transformer blocks are spread over the pipeline stages. `Copy`, no heap.
///
/// Stage 0 also holds the embedding, stage `pp−1` the final norm, LM head, loss and MTP modules.
/// Without explicit `first_stage_layers`/`last_stage_layers`, with `blocks = q·pp + r`:
/// - `r = 0`: `q` blocks everywhere;
/// - otherwise the middle stages take `q+1` (the smallest possible maximum) and the first and
///   last stages share the rest, the first the smaller half (it holds `pp` micro-batches in
///   flight, the last one) — a layout Megatron-LM expresses with
///   `--decoder-first/last-pipeline-num-layers`;
/// - if that leaves the first stage empty (few blocks per stage), every stage gets `q` and the
///   middle stages `1..=r` one more (the last stage when `r = pp−1`).
///
/// With explicit first/last counts the remaining blocks are spread over the middle stages by
/// the last rule.
///
/// With a [`PipelineSplit`] counting the embedding and/or the loss (Megatron's account-for
/// flags), the `blocks + parts` slots split evenly over the stages: the middle stages hold
/// `per = (blocks + parts)/pp` blocks, stage 0 `per − embedding`, the last `per − loss`; each of
/// the `vpp` model chunks of a stage holds `per/vpp` slots ([`StageLayout::chunk_blocks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageLayout {
    pub pp: u32,
    pub vpp: u32,
    /// Blocks on stage 0.
    pub first: u32,
    /// Blocks on stage `pp−1` (equal to `first` when pp = 1).
    pub last: u32,
    /// Blocks on each middle stage before the remainder.
    pub middle: u32,
    /// Middle stages `1..=middle_extra` carry one block more.
    pub middle_extra: u32,
    /// What takes block slots besides the blocks (the embedding, the loss).
    pub split: PipelineSplit,
}

impl StageLayout {
    /// Blocks on pipeline stage `stage` (0-based, `< pp`).
    pub fn blocks(&self, stage: u32) -> u32 {
        if stage == 0 {
            self.first
        } else if stage + 1 == self.pp {
            self.last
        } else {
            self.middle + u32::from(stage <= self.middle_extra)
        }
    }

    /// Slots of stage `stage`: its blocks, and the embedding (stage 0) and the loss (the last
    /// stage) where the split counts them.
    pub fn slots(&self, stage: u32) -> u32 {
        self.blocks(stage)
            + if stage == 0 {
                self.split.embedding()
            } else {
                0
            }
            + if stage + 1 == self.pp {
                self.split.loss()
            } else {
                0
            }
    }

    /// Blocks of model chunk `chunk` (`< vpp`) of stage `stage`: a stage's `1/vpp` — its
    /// average where the blocks do not divide — except where the split puts the embedding in
    /// stage 0's first chunk or the loss in the last stage's last chunk, which then hold one
    /// block fewer.
    pub fn chunk_blocks(&self, stage: u32, chunk: u32) -> f64 {
        let v = self.vpp.max(1);
        if self.split == PipelineSplit::Blocks || v == 1 {
            return self.blocks(stage) as f64 / v as f64;
        }
        let per_chunk = self.slots(stage) / v;
        let mut b = per_chunk;
        if stage == 0 && chunk == 0 {
            b -= self.split.embedding();
        }
        if stage + 1 == self.pp && chunk + 1 == v {
            b -= self.split.loss();
        }
        b as f64
    }

    /// The largest block count of any stage.
    pub fn max_blocks(&self) -> u32 {
        let mid = if self.pp > 2 {
            self.middle + u32::from(self.middle_extra > 0)
        } else {
            0
        };
        self.first.max(self.last).max(mid)
    }

    /// Blocks on stages before `stage` (the index of its first block).
    pub fn first_block(&self, stage: u32) -> u32 {
        (0..stage).map(|s| self.blocks(s)).sum()
    }

    /// Total blocks.
    pub fn total(&self) -> u32 {
        self.first_block(self.pp)
    }
}

fn layout(
    pp: u32,
    vpp: u32,
    blocks: u32,
    first: Option<u32>,
    last: Option<u32>,
    split: PipelineSplit,
) -> Option<StageLayout> {
    if pp == 0 || pp > blocks {
        return None;
    }
    if split != PipelineSplit::Blocks {
        return split_layout(pp, vpp, blocks, first, last, split);
    }
    if pp == 1 {
        let ok = first.is_none_or(|f| f == blocks) && last.is_none_or(|l| l == blocks);
        return ok.then_some(StageLayout {
            pp,
            vpp,
            first: blocks,
            last: blocks,
            middle: 0,
            middle_extra: 0,
            split,
        });
    }
    let (q, r) = (blocks / pp, blocks % pp);
    let mid_stages = pp - 2;
    let (f, l) = match (first, last) {
        (None, None) if r == 0 => (q, q),
        (None, None) => {
            // Megatron-expressible first: middle stages q+1 (the optimum max), the first and
            // last stages share the rest, the first taking the smaller half.
            let rest = blocks as i64 - mid_stages as i64 * (q as i64 + 1);
            let (f, l) = (rest / 2, rest - rest / 2);
            if f >= 1 && l <= q as i64 + 1 {
                return Some(StageLayout {
                    pp,
                    vpp,
                    first: f as u32,
                    last: l as u32,
                    middle: q + 1,
                    middle_extra: 0,
                    split,
                });
            }
            (q, q + u32::from(r > mid_stages))
        }
        _ => {
            // One side given: the other takes an even share of what is left.
            let f = first.unwrap_or(0);
            let l = last.unwrap_or(0);
            if f + l > blocks {
                return None;
            }
            let share = |rest: u32, stages: u32| rest / stages;
            match (first, last) {
                (Some(f), Some(l)) => (f, l),
                (Some(f), None) => (f, share(blocks - f, pp - 1)),
                (None, Some(l)) => (share(blocks - l, pp - 1), l),
                (None, None) => unreachable!(),
            }
        }
    };
    if f == 0 || l == 0 || f + l > blocks {
        return None;
    }
    let rest = blocks - f - l;
    if mid_stages == 0 {
        return (rest == 0).then_some(StageLayout {
            pp,
            vpp,
            first: f,
            last: l,
            middle: 0,
            middle_extra: 0,
            split,
        });
    }
    let (m, extra) = (rest / mid_stages, rest % mid_stages);
    (m > 0).then_some(StageLayout {
        pp,
        vpp,
        first: f,
        last: l,
        middle: m,
        middle_extra: extra,
        split,
    })
}

/// The layout of a [`PipelineSplit`] counting the embedding and/or the loss (Megatron-Core
/// `TransformerConfig.__post_init__`, frameworks.md §1.2): `None` where the slots do not divide
/// into `pp·vpp` equal chunks, where first/last counts are given (Megatron forbids combining
/// them) or where the first or last stage would hold no block.
fn split_layout(
    pp: u32,
    vpp: u32,
    blocks: u32,
    first: Option<u32>,
    last: Option<u32>,
    split: PipelineSplit,
) -> Option<StageLayout> {
    let total = blocks + split.embedding() + split.loss();
    let vpp = vpp.max(1);
    if first.is_some() || last.is_some() || !total.is_multiple_of(pp * vpp) {
        return None;
    }
    let per = total / pp;
    let (f, l) = if pp == 1 {
        (blocks, blocks)
    } else {
        (per - split.embedding(), per - split.loss())
    };
    (f >= 1 && l >= 1).then_some(StageLayout {
        pp,
        vpp,
        first: f,
        last: l,
        middle: per,
        middle_extra: 0,
        split,
    })
}

impl Plan {
    /// Micro-batches per optimizer step: `global_batch / (mbs·dp)` (0 if the batch does not
    /// divide; [`Plan::check`] rejects that).
    pub fn microbatches(&self, model: &ModelSpec) -> u32 {
        let per = self.mbs as u64 * self.dp as u64;
        let gb = model.training.global_batch as u64;
        if per == 0 || !gb.is_multiple_of(per) {
            0
        } else {
            (gb / per) as u32
        }
    }

    /// Blocks per pipeline stage. `None` when pp is 0, exceeds the blocks, or the uneven
    /// first/last counts do not fit ([`Plan::check`] says which).
    pub fn stage_blocks(&self, model: &ModelSpec) -> Option<StageLayout> {
        self.stage_layout_for_blocks(model.layers)
    }

    /// [`Plan::stage_blocks`] for a model of `blocks` transformer blocks.
    pub fn stage_layout_for_blocks(&self, blocks: u32) -> Option<StageLayout> {
        layout(
            self.pp,
            self.vpp.max(1),
            blocks,
            self.first_stage_layers,
            self.last_stage_layers,
            self.pipeline_split,
        )
    }

    /// Check the plan against the model and the GPU count; the first violated rule, in the
    /// order: degrees, GPU count, attention/FFN divisibility, MoE, batch, pipeline, CP, recompute.
    pub fn check(&self, model: &ModelSpec, gpus: u32) -> Result<(), Invalid> {
        self.check_degrees(gpus)?;
        self.check_tp(model)?;
        self.check_moe(model)?;
        let stages = self.check_pipeline(model)?;
        let seq = model.training.seq_len;
        if self.cp > 1 && !seq.is_multiple_of(2 * self.cp) {
            return Err(Invalid::CpSeq {
                cp: self.cp,
                seq_len: seq,
            });
        }
        self.check_cp_comm(model)?;
        if let (Some(layers), crate::Recompute::None) = (self.recompute_layers, self.recompute) {
            return Err(Invalid::RecomputeLayersWithoutRecompute { layers });
        }
        // recompute_layers counts blocks of one model chunk (autoplan-memory recomputes the
        // first N of each virtual stage; Megatron's `--recompute-num-layers`): more than the
        // largest chunk holds is a mistake, not "all of them".
        if let Some(layers) = self.recompute_layers {
            let vpp = self.vpp.max(1);
            let blocks = stages.max_blocks();
            let max = blocks.div_ceil(vpp);
            if layers > max {
                return Err(Invalid::RecomputeLayersExceedStage {
                    layers,
                    max,
                    blocks,
                    pp: self.pp,
                    vpp,
                });
            }
        }
        // offload_activations counts the layers of a stage (Megatron's
        // `--cpu-offloading-num-layers`): a count reaching the largest stage offloads every
        // layer of every stage, which is `all`; one spelling per plan, so that a search never
        // lists one plan twice.
        let n = self.offload_activations;
        if n != crate::offload_activations::ALL && n >= stages.max_blocks() {
            return Err(Invalid::OffloadActivationsExceedStage {
                layers: n,
                blocks: stages.max_blocks(),
                pp: self.pp,
            });
        }
        self.check_recompute(model)?;
        self.check_offload_params()
    }

    /// Every degree at least 1, their product the cluster's GPU count, and a ZeRO stage.
    fn check_degrees(&self, gpus: u32) -> Result<(), Invalid> {
        for (dim, v) in [
            ("tp", self.tp),
            ("cp", self.cp),
            ("dp", self.dp),
            ("pp", self.pp),
            ("ep", self.ep),
            ("moe_tp", self.moe_tp),
            ("mbs", self.mbs),
            ("vpp", self.vpp),
        ] {
            if v == 0 {
                return Err(Invalid::ZeroDegree { dim });
            }
        }
        if self.gpus() != gpus as u64 {
            return Err(Invalid::GpuCount {
                plan: self.gpus(),
                gpus,
            });
        }
        let z = self.zero;
        if z.stage > 3 || (z.stage < 3 && !z.reshard) || (z.stage == 0 && z.group > 0) {
            return Err(Invalid::ZeroStage { zero: z });
        }
        // HSDP: shard groups of G ranks tile the dense data-parallel group (dp·cp ranks,
        // frameworks.md §2.1: torchtitan's `dp_replicate · dp_shard`); G = dp·cp is plain
        // sharding, written without `:G` (one name per plan).
        let dp_cp = self.dp.saturating_mul(self.cp);
        // The experts' EDP group shards over gcd(G, edp) ranks (`Zero::shard_size`): at least
        // two where it has two, so HSDP never holds whole expert weights that full sharding
        // would shard (the memory floor's stages 0–3 bound it, `autoplan-memory`'s `floor`).
        let edp = self.edp();
        let experts_unsharded = edp > 1 && z.shard_size(edp) == 1;
        if z.group > 0
            && (z.group < 2
                || z.group >= dp_cp
                || !dp_cp.is_multiple_of(z.group)
                || experts_unsharded)
        {
            return Err(Invalid::ShardGroup {
                group: z.group,
                dp_cp,
            });
        }
        Ok(())
    }

    /// Tensor parallelism against the heads, kv heads and FFN width.
    fn check_tp(&self, model: &ModelSpec) -> Result<(), Invalid> {
        let tp = self.tp;
        if !model.heads.is_multiple_of(tp) {
            return Err(Invalid::TpHeads {
                tp,
                heads: model.heads,
            });
        }
        // GQA: Megatron splits the kv heads (tp | kv_heads); when tp > kv_heads we replicate
        // each kv head tp/kv_heads times (as vLLM does) and count the extra K/V weights and
        // activations. MLA keys/values are per query head: `tp | heads` suffices.
        if let Attention::Gqa { kv_heads, .. } = model.attention {
            if kv_heads % tp != 0 && !tp.is_multiple_of(kv_heads) {
                return Err(Invalid::TpKvHeads { tp, kv_heads });
            }
        }
        if model.dense_blocks() > 0 && !model.ffn_hidden.is_multiple_of(tp) {
            return Err(Invalid::TpFfn {
                tp,
                ffn_hidden: model.ffn_hidden,
            });
        }
        // The vocabulary needs no check: Megatron pads it to a multiple of 128·tp
        // (`--make-vocab-size-divisible-by`), and autoplan-memory counts the padded size.
        Ok(())
    }

    /// The expert knobs: none on a dense model; dividing the experts and folding onto the
    /// dense ranks on an MoE model.
    fn check_moe(&self, model: &ModelSpec) -> Result<(), Invalid> {
        let tp = self.tp;
        match &model.moe {
            None => {
                if self.ep > 1 || self.moe_tp > 1 {
                    return Err(Invalid::ExpertDegreesWithoutMoe {
                        ep: self.ep,
                        moe_tp: self.moe_tp,
                        model: model.name.clone(),
                    });
                }
                // The other expert knobs set on a dense model would mean nothing (and reach
                // `--emit megatron`): an error rather than silently ignored. The search
                // leaves them at `Plan::default()`'s value, where they do not apply.
                let dflt = Plan::default();
                if let Some(&k) = Knob::moe_only_knobs().iter().find(|k| !k.same(self, &dflt)) {
                    return Err(Invalid::MoeKnobWithoutMoe {
                        knob: k.key(),
                        value: k.value(self),
                        model: model.name.clone(),
                    });
                }
            }
            Some(m) => {
                let shared = m.shared_experts as u64 * m.shared_ffn_hidden as u64;
                if !shared.is_multiple_of(tp as u64) {
                    return Err(Invalid::TpSharedFfn {
                        tp,
                        shared_ffn: shared,
                    });
                }
                if m.expert_ffn_hidden % self.moe_tp != 0 {
                    return Err(Invalid::MoeTpFfn {
                        moe_tp: self.moe_tp,
                        expert_ffn_hidden: m.expert_ffn_hidden,
                    });
                }
                if m.experts % self.ep != 0 {
                    return Err(Invalid::EpExperts {
                        ep: self.ep,
                        experts: m.experts,
                    });
                }
                let dense = tp as u64 * self.cp as u64 * self.dp as u64;
                if !dense.is_multiple_of(self.moe_tp as u64 * self.ep as u64) {
                    return Err(Invalid::Folding {
                        moe_tp: self.moe_tp,
                        ep: self.ep,
                        dense,
                    });
                }
                if tp > 1 && !self.sp && model.moe_blocks() > 0 {
                    return Err(Invalid::MoeTpNeedsSp { tp });
                }
            }
        }
        Ok(())
    }

    /// The micro-batches, the pipeline stages and the schedule; the stage layout.
    fn check_pipeline(&self, model: &ModelSpec) -> Result<StageLayout, Invalid> {
        let micro = self.microbatches(model);
        if micro == 0 {
            return Err(Invalid::Batch {
                global_batch: model.training.global_batch,
                mbs: self.mbs,
                dp: self.dp,
            });
        }
        if self.pp > model.layers {
            return Err(Invalid::PpBlocks {
                pp: self.pp,
                blocks: model.layers,
            });
        }
        let interleaved = self.schedule == Schedule::Interleaved;
        if interleaved != (self.vpp > 1) {
            return Err(Invalid::VppSchedule {
                vpp: self.vpp,
                schedule: self.schedule.name(),
            });
        }
        if self.schedule == Schedule::DualPipe && (self.pp < 2 || !self.pp.is_multiple_of(2)) {
            return Err(Invalid::DualPipePp { pp: self.pp });
        }
        let Some(stages) = self.stage_blocks(model) else {
            let split = self.pipeline_split;
            if split != PipelineSplit::Blocks {
                let parts = split.embedding() + split.loss();
                return Err(Invalid::PipelineSplit {
                    split: crate::knob::PIPELINE_SPLITS.name(split),
                    blocks: model.layers,
                    parts,
                    chunks: self.pp * self.vpp.max(1),
                    total: model.layers + parts,
                });
            }
            return Err(Invalid::UnevenStages {
                first: self.first_stage_layers,
                last: self.last_stage_layers,
                blocks: model.layers,
                pp: self.pp,
            });
        };
        if interleaved {
            if self.pp < 2 {
                return Err(Invalid::InterleavedPp { pp: self.pp });
            }
            // Every model chunk needs a block, or the embedding or loss where the split counts
            // them (`pipeline_split`: Qwen3-235B's 94 blocks on pp = 32, vpp = 3 leave stage 0
            // two blocks and the embedding). Chunks of unequal size are allowed (94 blocks on
            // pp = 8, vpp = 4: stages of 11, 12, ..., 12, 11 blocks).
            for stage in 0..self.pp {
                let blocks = stages.blocks(stage);
                if stages.slots(stage) < self.vpp {
                    return Err(Invalid::VppBlocks {
                        stage,
                        blocks,
                        vpp: self.vpp,
                    });
                }
            }
            // Megatron's interleaved schedule runs micro-batches in groups of pp
            // (`microbatch_group_size_per_vp_stage` = pp).
            if micro < self.pp {
                return Err(Invalid::InterleavedMicrobatches {
                    pp: self.pp,
                    microbatches: micro,
                });
            }
        }
        Ok(stages)
    }

    /// The CP exchange against the heads: Ulysses (`a2a`, and the a2a level of `a2a+p2p`)
    /// gives each rank of the all-to-all group whole heads of its TP rank, so the heads and
    /// the K/V heads must divide by `tp` × the group (Transformer Engine's a2a CP asserts it;
    /// DeepSpeed-Ulysses, Jacobs et al. 2023 §3.1); `a2a+p2p:N` needs `1 < N < cp`, `N | cp`.
    pub fn check_cp_comm(&self, model: &ModelSpec) -> Result<(), Invalid> {
        if self.cp <= 1 {
            return Ok(());
        }
        let (mode, group, a2a) = match self.cp_comm {
            crate::CpComm::AllToAll => ("a2a", "cp", self.cp),
            crate::CpComm::Hierarchical { a2a } => {
                if a2a < 2 || a2a >= self.cp || !self.cp.is_multiple_of(a2a) {
                    return Err(Invalid::CpHierarchy { a2a, cp: self.cp });
                }
                ("a2a+p2p", "a2a", a2a)
            }
            crate::CpComm::Ring | crate::CpComm::AllGather => return Ok(()),
        };
        let prod = self.tp.max(1).saturating_mul(a2a);
        let kv = match model.attention {
            Attention::Gqa { kv_heads, .. } => kv_heads,
            // MLA's K/V are per query head after the up-projection.
            Attention::Mla { .. } => model.heads,
        };
        for (what, n) in [("heads", model.heads), ("kv_heads", kv)] {
            if !n.is_multiple_of(prod) {
                return Err(Invalid::CpHeads {
                    mode,
                    what,
                    n,
                    group,
                    prod,
                });
            }
        }
        Ok(())
    }

    /// The recompute modules against the model: each must name a part the model has (a
    /// selective `mla_up_proj` needs MLA, `moe_act`/`moe` MoE layers, `shared_experts` shared
    /// experts, `mlp` dense MLP layers). Part of [`Plan::check`]; the search drops a space's
    /// entries that fail it for the model.
    pub fn check_recompute(&self, model: &ModelSpec) -> Result<(), Invalid> {
        if self.recompute == crate::Recompute::Selective {
            // A module naming a part the model lacks would recompute nothing: a mistake in the
            // plan, reported rather than silently ignored.
            let m = self.recompute_modules;
            let mla = matches!(model.attention, Attention::Mla { .. });
            let bad = if m.has(RecomputeModules::MLA_UP_PROJ) && !mla {
                Some(("mla_up_proj", "it needs multi-latent attention"))
            } else if m.0 & (RecomputeModules::MOE_ACT | RecomputeModules::MOE) != 0
                && model.moe.is_none()
            {
                let name = if m.has(RecomputeModules::MOE) {
                    "moe"
                } else {
                    "moe_act"
                };
                Some((name, "it has no MoE layers"))
            } else if m.has(RecomputeModules::SHARED_EXPERTS)
                && model.moe.as_ref().is_none_or(|x| x.shared_experts == 0)
            {
                Some(("shared_experts", "it has no shared experts"))
            } else if m.has(RecomputeModules::MLP) && model.dense_blocks() == 0 {
                Some(("mlp", "it has no dense MLP layers"))
            } else {
                None
            };
            if let Some((module, reason)) = bad {
                return Err(Invalid::RecomputeModule {
                    module,
                    model: model.name.clone(),
                    reason,
                });
            }
        }
        Ok(())
    }
}
