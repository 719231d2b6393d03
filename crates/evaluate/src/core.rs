//! The evaluator: per-(model, cluster) precomputation, and per plan the communication
//! inventory, the stage times, the pipeline composition and the metrics.

use std::sync::OnceLock;

use autoplan_cluster::{Cluster, Gpu, GroupPlacement, Precision};
use autoplan_cost::compute::{
    arch_efficiency, attention_core_time_with, gemm_peak, memory_bound_time_with, peak_flops,
    ArchEfficiency, GemmPricer,
};
use autoplan_cost::{AlgoMode, Collective, CollectiveCost, CostModel};
use autoplan_graph::{LayerKind, ModelSpec, Optimizer, TpSplit};
use autoplan_placement::{balanced_imbalance, contiguous_imbalance};
use autoplan_plan::{
    CpComm, Dim, Dispatcher, Invalid, MoeTpScheme, PlacementPolicy, Plan, Recompute,
    RecomputeModules, StageLayout, TpSpTransition, Zero,
};

mod floor;

use crate::comm::{CommKind, CommRow, Pass, Sink};
use crate::flops::ModelFlops;
use crate::{
    AttentionKernel, EvalOptions, Infeasible, Metrics, Report, StageSummary, StepBreakdown,
};

/// Bytes of a 16-bit activation element (activations move in bf16/fp16 even under FP8 GEMMs).
const ACT: f64 = 2.0;
/// Bytes of a 16-bit parameter (ZeRO parameter all-gathers).
const PARAM: f64 = 2.0;
/// Without sequence parallelism, the LayerNorm/dropout/residual tensors are replicated on every
/// TP rank: Korthikanti 2022 eq. 2, `sbh(10 + 24/t + ...)` of `34·sbh` → 10/34 of the
/// elementwise traffic is not divided by `tp`.
const NON_TP_ACT_FRACTION: f64 = 10.0 / 34.0;
/// HBM bytes per parameter of one mixed-precision Adam step: read fp32 grad (4), read + write
/// fp32 master, m and v (3 × 8), write the 16-bit weight (2), grad-norm read for clipping (4).
const ADAM_BYTES_PER_PARAM: f64 = 34.0;
/// Adam with BF16 moments: m and v read + write at 2 bytes instead of 4 (34 − 8).
const ADAM_BF16_MOMENTS_BYTES_PER_PARAM: f64 = 26.0;
/// SGD with momentum: grad (4) + master and momentum read/write (16) + weight (2) + norm (4).
const SGD_BYTES_PER_PARAM: f64 = 26.0;

/// One weight matrix in the form the hot path needs.
#[derive(Debug, Clone, Copy)]
struct G {
    in_f: f64,
    out_f: f64,
    count: f64,
    rows_per_token: f64,
    split: TpSplit,
    /// A routed expert (sharded over `ep` and `moe_tp`, tokens arrive by dispatch).
    expert: bool,
}

/// One kind of layer, precomputed from the graph (all blocks of a kind are identical).
#[derive(Debug, Clone)]
struct Class {
    kind: LayerKind,
    gemms: Vec<G>,
    /// MLA's up-projections `q_b`, `kv_b` (`mla_up_proj` recompute); empty otherwise.
    up_proj: Vec<G>,
    /// The shared experts' GEMMs (`shared_experts` recompute); empty otherwise.
    shared: Vec<G>,
    attn_core: f64,
    /// Q + K + V + O elements per token (attention-core HBM traffic and Ulysses all-to-alls).
    q_elems: f64,
    o_elems: f64,
    act: f64,
    score: f64,
    tp_fwd: f64,
    tp_bwd: f64,
    cp_kv: f64,
    ep_elems: f64,
    non_expert_params: f64,
    expert_params: f64,
}

impl Class {
    fn of(model: &ModelSpec, l: &autoplan_graph::Layer) -> Class {
        let heads = model.heads as f64;
        let has_attn = l.attn_core_flops_per_token > 0.0;
        let g_of = |g: &autoplan_graph::Gemm| G {
            in_f: g.in_features as f64,
            out_f: g.out_features as f64,
            count: g.count as f64,
            rows_per_token: g.rows_per_token,
            split: g.split,
            expert: g.count > 1 && l.experts > 0,
        };
        let gemms = fuse_shared_input(l.gemms.iter().map(g_of));
        let shared = if l.experts > 0 {
            gemms
                .iter()
                .filter(|g| !g.expert && g.split != TpSplit::Replicated)
                .copied()
                .collect()
        } else {
            Vec::new()
        };
        Class {
            kind: l.kind,
            gemms,
            up_proj: l
                .gemms
                .iter()
                .filter(|g| matches!(g.name, "q_b" | "kv_b"))
                .map(g_of)
                .collect(),
            shared,
            attn_core: l.attn_core_flops_per_token,
            q_elems: if has_attn {
                heads * model.head_dim() as f64
            } else {
                0.0
            },
            o_elems: if has_attn {
                heads * model.v_head_dim() as f64
            } else {
                0.0
            },
            act: l.act_bytes_per_token,
            score: l.attn_score_bytes_per_token,
            tp_fwd: l.tp_fwd_allreduce_elems_per_token,
            tp_bwd: l.tp_bwd_allreduce_elems_per_token,
            cp_kv: l.cp_kv_elems_per_token,
            ep_elems: l.ep_dispatch_elems_per_token,
            non_expert_params: l.non_expert_params(),
            expert_params: l.experts as f64 * l.expert_params,
        }
    }
}

/// The GEMMs as the framework launches them: consecutive column-parallel matrices that read the
/// same input are one GEMM with their output features concatenated — Megatron-Core's fused
/// `linear_qkv` (q, k, v of MHA/GQA) and `linear_fc1` (SwiGLU's gate and up, per expert too).
/// The graph lists them apart because their parameters and TP splits are separate facts; one
/// launch of the sum has the larger GEMM's efficiency.
fn fuse_shared_input(gemms: impl Iterator<Item = G>) -> Vec<G> {
    let mut out: Vec<G> = Vec::new();
    for g in gemms {
        match out.last_mut() {
            Some(p)
                if p.split == TpSplit::Column
                    && g.split == TpSplit::Column
                    && p.in_f == g.in_f
                    && p.count == g.count
                    && p.rows_per_token == g.rows_per_token
                    && p.expert == g.expert =>
            {
                p.out_f += g.out_f;
            }
            _ => out.push(g),
        }
    }
    out
}

/// DeepEP's four transfers of a MoE layer: dispatch and combine forward, their gradients back.
const DEEPEP_CALLS: [(&str, Pass); 4] = [
    ("EP dispatch (DeepEP)", Pass::Forward),
    ("EP combine (DeepEP)", Pass::Forward),
    ("EP combine-grad (DeepEP)", Pass::Backward),
    ("EP dispatch-grad (DeepEP)", Pass::Backward),
];

/// Mean and busiest-rank bytes one rank sends in a DeepEP dispatch: dropless `k_eff` rows per
/// token, the busiest rank `ep_imb` times the mean; capacity-padded `cf · top_k` rows for all.
fn deepep_bytes(capacity: Option<f64>, k_eff: f64, x: &Ctx, h: f64) -> (f64, f64) {
    match capacity {
        Some(_) => {
            let b = x.t_rank * x.recv * h * ACT;
            (b, b)
        }
        None => {
            let mean = x.t_rank * k_eff * h * ACT;
            (mean, mean * x.ep_imb)
        }
    }
}

/// The share of an all-to-all's network traffic that DeepEP's node-deduplicated dispatch still
/// sends: a token routed uniformly to `k` of `experts` spread evenly over `nodes` nodes reaches
/// `nodes · (1 − P₀)` distinct nodes on average, `P₀ = C(E − E/N, k) / C(E, k)` the
/// hypergeometric chance that a node holds none of its `k` experts; an all-to-all sends all `k`
/// copies, so the ratio (of the remote parts alike) is `N · (1 − P₀) / k`, at most 1.
fn node_dedup(experts: f64, top_k: f64, nodes: f64) -> f64 {
    let k = top_k.round().max(1.0);
    if nodes <= 1.0 || experts < k {
        return 1.0;
    }
    let m = experts / nodes;
    let mut p0 = 1.0;
    let mut i = 0.0;
    while i < k {
        p0 *= ((experts - m - i) / (experts - i)).max(0.0);
        i += 1.0;
    }
    (nodes * (1.0 - p0) / k).min(1.0)
}

/// Indices of the classes in `Evaluator::classes`.
const EMB: usize = 0;
const ATTN: usize = 1;
const MLP: usize = 2;
const MOE: usize = 3;
const NORM: usize = 4;
const HEAD: usize = 5;
const CE: usize = 6;
const MTP: usize = 7;
const NCLASS: usize = 8;

/// A partial plan for branch-and-bound: the degrees fixed so far. The current bound
/// ([`Evaluator::lower_bound`]) holds for every completion and does not tighten with them yet.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Partial {
    pub tp: Option<u32>,
    pub pp: Option<u32>,
    pub recompute: Option<Recompute>,
}

/// Scores plans of one model on one cluster. See the crate docs.
#[derive(Debug, Clone)]
pub struct Evaluator {
    model: ModelSpec,
    cluster: Cluster,
    gpu: Gpu,
    cost: CostModel,
    opts: EvalOptions,
    precision: Precision,
    /// The attention core runs in 16 bits even in FP8 training (FP8 covers the linear layers).
    attn_precision: Precision,
    /// Datasheet dense peak at the training precision (MFU's and HFU's denominator).
    peak: f64,
    /// The rate GEMMs are priced from (`autoplan_cost::compute::gemm_peak`: FP8 derated).
    gemm_peak: f64,
    classes: Vec<Class>,
    flops: ModelFlops,
    seq: f64,
    hidden: f64,
    vocab: f64,
    global_batch: u32,
    blocks: u32,
    dense_blocks: u32,
    mtp: u32,
    kv_heads: f64,
    experts: f64,
    top_k: f64,
    k_eff: f64,
    imbalance: f64,
    capacity: Option<f64>,
    /// Max/mean expert load per GPU under `placement=balanced:R` (autoplan-placement's
    /// `balanced_imbalance`), one slot per EP degree dividing the experts and `R ≤
    /// BALANCED_R`, filled on first use ([`Evaluator::ep_imbalance`]): models and searches
    /// that never ask pay nothing, later evaluations read it without allocating.
    balanced: Vec<(u32, [OnceLock<f64>; BALANCED_R + 1])>,
    /// The GPU's efficiency constants (`EvalOptions::efficiency`, else `ARCH_TABLE`'s).
    eff: ArchEfficiency,
    /// GEMM times at the training precision under `eff`.
    gemm: GemmPricer,
    /// GEMM times at the 16-bit precision of the attention core (FP8 runs' LM head).
    gemm16: GemmPricer,
    /// `gemm_eff_max`: a GEMM in full waves (u = 1); none runs faster (admissible bounds).
    eff_max: f64,
    /// Forward FLOPs per token of the routed-expert GEMMs (all MoE layers and MTP modules).
    expert_gemm_fwd: f64,
    /// The MTP class's GEMMs are its projection followed by exactly those of the attention,
    /// MLP/MoE and head classes (so their times can be reused).
    mtp_reuse: bool,
    mem: autoplan_memory::ModelMemory,
    /// The memory options, with `flash_attention` and `fp32_main_grads` following
    /// `EvalOptions::attention` and `grad_bytes`.
    mem_opts: autoplan_memory::MemoryOptions,
}

/// Per-plan derived quantities.
#[derive(Debug, Clone, Copy)]
struct Ctx {
    tp: f64,
    cp: f64,
    pp: u32,
    ep: f64,
    mt: f64,
    vpp: f64,
    micro: f64,
    /// Token rows of a TP-split GEMM per GPU: `mbs · s / cp`.
    m_tok: f64,
    /// Tokens a rank dispatches to the experts: `m_tok / tp` (sequence-parallel split).
    t_rank: f64,
    /// Max/mean tokens reaching one GPU of the EP group under the plan's expert placement
    /// ([`Evaluator::ep_imbalance`]).
    ep_imb: f64,
    /// Expert rows per dispatched token on the busiest GPU of the EP group: capacity-padded
    /// `cf · top_k`, dropless `k_eff · ep_imb` (seed 004 §3.2).
    recv: f64,
    sp: bool,
    algo: AlgoMode,
    g_tp: GroupPlacement,
    g_cp: GroupPlacement,
    g_dp: GroupPlacement,
    g_ep: GroupPlacement,
    g_mt: GroupPlacement,
    g_edp: GroupPlacement,
    hop_cp: GroupPlacement,
    hop_pp: GroupPlacement,
}

/// Costs of one class for one micro-batch on one GPU.
#[derive(Debug, Clone, Copy, Default)]
struct ClassCost {
    fwd: f64,
    bwd: f64,
    /// Full recompute of one block: the forward again (+ its communication, in `rc_comm`).
    rc_full: f64,
    /// Exposed forward communication per kind that recompute runs again (the kinds of
    /// [`Evaluator::recompute_comm`]; the floor collects every kind).
    rc_comm: [f64; 5],
    /// Selective recompute: the plan's modules again ([`Evaluator::selective_rc`]).
    rc_sel: f64,
    /// Exposed communication per kind (no recompute).
    exposed: [f64; 5],
}

/// Where the layers go and what each stage costs.
#[derive(Debug, Clone, Copy, Default)]
struct StageTime {
    t: f64,
    compute: f64,
    recompute: f64,
    exposed: [f64; 5],
    blocks: u32,
    dense: u32,
    moe: u32,
    params_dense: f64,
    params_expert: f64,
    fwd: f64,
    bwd: f64,
}

struct Outcome {
    metrics: Metrics,
    breakdown: StepBreakdown,
    micro: u32,
    bottleneck: u32,
}

impl Evaluator {
    /// Precompute everything that does not depend on the plan.
    pub fn new(model: &ModelSpec, cluster: &Cluster, opts: EvalOptions) -> Evaluator {
        let layers = model.layers();
        let find = |k: LayerKind| layers.iter().find(|l| l.kind == k);
        let empty = Class {
            kind: LayerKind::FinalNorm,
            gemms: Vec::new(),
            up_proj: Vec::new(),
            shared: Vec::new(),
            attn_core: 0.0,
            q_elems: 0.0,
            o_elems: 0.0,
            act: 0.0,
            score: 0.0,
            tp_fwd: 0.0,
            tp_bwd: 0.0,
            cp_kv: 0.0,
            ep_elems: 0.0,
            non_expert_params: 0.0,
            expert_params: 0.0,
        };
        let kinds = [
            LayerKind::Embedding,
            LayerKind::Attention,
            LayerKind::DenseMlp,
            LayerKind::Moe,
            LayerKind::FinalNorm,
            LayerKind::LmHead,
            LayerKind::CrossEntropy,
            LayerKind::Mtp,
        ];
        let mut classes: Vec<Class> = kinds
            .iter()
            .map(|&k| {
                find(k).map_or(
                    Class {
                        kind: k,
                        ..empty.clone()
                    },
                    |l| Class::of(model, l),
                )
            })
            .collect();
        // Sliding-window blocks share the attention class at the model's mean attention-core
        // work: exact for a stage holding whole periods of the window pattern, within one
        // block's difference otherwise.
        classes[ATTN].attn_core = model.mean_attn_core_flops_per_token();
        let precision = model.training.precision;
        let (experts, top_k, k_eff, imbalance, capacity) = match &model.moe {
            Some(m) => (
                m.experts as f64,
                m.top_k as f64,
                m.expected_experts_per_token(),
                m.load_imbalance.max(1.0),
                m.capacity_factor,
            ),
            None => (0.0, 0.0, 0.0, 1.0, None),
        };
        let gpu = cluster.gpu.clone();
        let mtp_reuse = {
            let mtp = &classes[MTP];
            let mlp = if mtp.expert_params > 0.0 { MOE } else { MLP };
            !mtp.gemms.is_empty()
                && mtp.gemms.len()
                    == 1 + classes[ATTN].gemms.len()
                        + classes[mlp].gemms.len()
                        + classes[HEAD].gemms.len()
        };
        let eff = opts.efficiency.unwrap_or(*arch_efficiency(gpu.arch));
        let gemm = GemmPricer::new(&gpu, &eff, precision);
        let attn_precision = if precision == Precision::Fp8 {
            Precision::Bf16
        } else {
            precision
        };
        // Full waves (u = 1): no GEMM beats it.
        let eff_max = eff.gemm_eff_max;
        Evaluator {
            model: model.clone(),
            cluster: cluster.clone(),
            cost: CostModel::new(cluster),
            opts,
            precision,
            attn_precision,
            peak: peak_flops(&gpu, precision),
            gemm_peak: gemm_peak(&gpu, &eff, precision),
            gpu,
            classes,
            flops: ModelFlops::of(model),
            seq: model.training.seq_len as f64,
            hidden: model.hidden as f64,
            vocab: model.vocab as f64,
            global_batch: model.training.global_batch,
            blocks: model.layers,
            dense_blocks: model.dense_blocks(),
            mtp: model.mtp_modules,
            kv_heads: model.kv_heads() as f64,
            experts,
            top_k,
            k_eff,
            imbalance,
            capacity,
            balanced: balanced_table(experts as u32),
            gemm,
            gemm16: GemmPricer::new(&cluster.gpu, &eff, attn_precision),
            eff,
            eff_max,
            mtp_reuse,
            expert_gemm_fwd: layers
                .iter()
                .flat_map(|l| l.gemms.iter().filter(move |g| g.count > 1 && l.experts > 0))
                .map(autoplan_graph::Gemm::flops_per_token)
                .sum(),
            mem: autoplan_memory::ModelMemory::new(model),
            mem_opts: autoplan_memory::MemoryOptions {
                flash_attention: opts.attention == AttentionKernel::Flash,
                fp32_main_grads: opts.grad_bytes >= 4.0,
                ..opts.memory
            },
        }
    }

    pub fn model(&self) -> &ModelSpec {
        &self.model
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    pub fn options(&self) -> &EvalOptions {
        &self.opts
    }

    /// FLOPs per token in the MFU/HFU conventions.
    pub fn model_flops(&self) -> &ModelFlops {
        &self.flops
    }

    /// Fast path: the metrics, or why the plan cannot run. Allocation-free.
    pub fn evaluate(&self, plan: &Plan) -> Result<Metrics, Infeasible> {
        self.run(plan, &mut ()).map(|o| o.metrics)
    }

    /// The per-GPU memory peak of `plan` alone, without the step time: the same validity checks
    /// as [`Evaluator::evaluate`] and the same number (its `memory_peak_bytes`, or the
    /// `OutOfMemory` peak), whatever the HBM. The search's memory floors call it.
    pub fn memory_peak_bytes(&self, plan: &Plan) -> Result<f64, Infeasible> {
        plan.check(&self.model, self.cluster.gpus())?;
        self.layout(plan)?;
        Ok(self.memory_peak(plan))
    }

    /// The memory breakdown of `plan`'s most loaded GPU, fitting or not (what `report` shows;
    /// an out-of-memory plan has no report). The same validity checks as `evaluate`.
    pub fn memory_breakdown(
        &self,
        plan: &Plan,
    ) -> Result<autoplan_memory::MemoryBreakdown, Infeasible> {
        plan.check(&self.model, self.cluster.gpus())?;
        self.layout(plan)?;
        Ok(self.memory(plan))
    }

    /// The full report: breakdown, per-layer communication table, stages, memory.
    pub fn report(&self, plan: &Plan) -> Result<Report, Infeasible> {
        let mut rows: Vec<CommRow> = Vec::new();
        let o = self.run(plan, &mut rows)?;
        // Per-layer rows in layer order, then the pipeline, then the once-per-step collectives.
        rows.sort_by_key(|r| match (r.pass, r.layer) {
            (Pass::Step, _) => 2,
            (_, None) => 1,
            _ => 0,
        });
        let x = self.ctx(plan);
        let mut stages = Vec::with_capacity(plan.pp as usize);
        let mut st = [StageTime::default(); 1];
        let costs = self.class_costs(plan, &x, &mut (), 0.0, 0);
        let layout = self.layout(plan)?;
        let mut start = 0;
        let (_, pp_t) = self.pp_hop(&x);
        for i in 0..plan.pp {
            st[0] = self.stage(plan, &x, &costs, &layout, i, start, pp_t);
            start += st[0].blocks;
            stages.push(StageSummary {
                stage: i,
                blocks: st[0].blocks,
                dense_blocks: st[0].dense,
                moe_blocks: st[0].moe,
                time_per_microbatch_s: st[0].t,
            });
        }
        let memory = self.memory(plan);
        let groups = vec![
            ("tp", x.g_tp.into()),
            ("cp", x.g_cp.into()),
            ("dp×cp (gradients)", x.g_dp.into()),
            ("ep", x.g_ep.into()),
            ("moe_tp", x.g_mt.into()),
            ("edp", x.g_edp.into()),
            ("pp hop", x.hop_pp.into()),
        ];
        Ok(Report {
            metrics: o.metrics,
            breakdown: o.breakdown,
            microbatches: o.micro,
            tokens_per_step: self.global_batch as f64 * self.seq,
            flops: self.flops,
            comm: rows,
            stages,
            bottleneck_stage: o.bottleneck,
            memory,
            hbm_bytes: self.gpu.hbm_bytes,
            groups,
        })
    }

    /// An admissible lower bound on the step time of every completion of `partial` on all of the
    /// cluster's GPUs: the forward + backward GEMM and causal attention FLOPs of one step at the
    /// highest GEMM efficiency, spread perfectly over the GPUs, with no communication, bubble,
    /// memory-bound work or recompute (which `recompute_layers` may reduce to nothing). Padded
    /// expert GEMMs with a capacity below the routed load count at the capacity.
    pub fn lower_bound(&self, _partial: &Partial) -> f64 {
        let tokens = self.global_batch as f64 * self.seq;
        let capped = match self.capacity {
            Some(cf) => (cf * self.top_k / self.k_eff.max(1e-9)).min(1.0),
            None => 1.0,
        };
        let gemm = self.flops.gemm_fwd - self.expert_gemm_fwd * (1.0 - capped);
        let per_token = 3.0 * (gemm + self.flops.attn_fwd_causal);
        let gpus = self.cluster.gpus().max(1) as f64;
        tokens * per_token / (gpus * self.gemm_peak * self.eff_max)
    }

    /// Max/mean tokens reaching one GPU of the plan's EP group, which the dropless all-to-all
    /// (its slowest rank) and the expert GEMMs of the most loaded GPU wait for. Contiguous
    /// placement: autoplan-placement's `contiguous_imbalance(E, ep, load_imbalance)`, the GPU
    /// holding the hottest expert beside `E/ep − 1` average ones. `placement=balanced:R`:
    /// autoplan-placement's `balanced_imbalance(E, ep, R, load_imbalance)`, EPLB-style packing
    /// with `R` redundant slots per GPU (seed 004 §4). Capacity-padded dispatch ignores it:
    /// its buffers have the capacity's size whatever the placement. No allocation once a
    /// (`ep`, `R ≤ BALANCED_R`) pair has been seen (a cached slot); beyond, computed each time.
    pub fn ep_imbalance(&self, plan: &Plan) -> f64 {
        match plan.placement {
            PlacementPolicy::Contiguous => contiguous_imbalance(
                self.experts as usize,
                plan.ep.max(1) as usize,
                self.imbalance,
            ),
            PlacementPolicy::Balanced { redundant } => {
                let (e, ep) = (self.experts as u32, plan.ep.max(1));
                // A GPU holds an expert once: slots beyond E − E/ep stay empty.
                let r = redundant.min(e.saturating_sub(e / ep)) as usize;
                let compute = || balanced_imbalance(e as usize, ep as usize, r, self.imbalance);
                match self.balanced.iter().find(|(d, _)| *d == ep) {
                    Some((_, row)) if r <= BALANCED_R => *row[r].get_or_init(compute),
                    _ => compute(),
                }
            }
        }
    }

    /// The pipeline layout of a checked plan.
    fn layout(&self, plan: &Plan) -> Result<StageLayout, Infeasible> {
        plan.stage_blocks(&self.model)
            .ok_or(Infeasible::Invalid(Invalid::UnevenStages {
                first: plan.first_stage_layers,
                last: plan.last_stage_layers,
                blocks: self.blocks,
                pp: plan.pp,
            }))
    }

    fn ctx(&self, plan: &Plan) -> Ctx {
        let gpn = self.cluster.node.gpus_per_node.max(1);
        let edp = plan.edp().max(1);
        let tp = plan.tp.max(1);
        let cp = plan.cp.max(1);
        let dp = plan.dp.max(1);
        let pp = plan.pp.max(1);
        let dense_deg = |d: Dim| match d {
            Dim::Tp => tp,
            Dim::Cp => cp,
            Dim::Dp => dp,
            Dim::Pp => pp,
        };
        // Megatron's parallel folding: the MoE grid puts moe_tp, ep, edp where the dense grid
        // has tp, cp, dp (same rank order, same pp).
        let moe_deg = |d: Dim| match d {
            Dim::Tp => plan.moe_tp.max(1),
            Dim::Cp => plan.ep.max(1),
            Dim::Dp => edp,
            Dim::Pp => pp,
        };
        let order = plan.order.0;
        let dense = order.map(dense_deg);
        let moe = order.map(moe_deg);
        let sel = |dims: &[Dim]| order.map(|d| dims.contains(&d));
        let g_tp = GroupPlacement::of(gpn, &dense, &sel(&[Dim::Tp]));
        let g_cp = GroupPlacement::of(gpn, &dense, &sel(&[Dim::Cp]));
        let g_dp = GroupPlacement::of(gpn, &dense, &sel(&[Dim::Cp, Dim::Dp]));
        let g_pp = GroupPlacement::of(gpn, &dense, &sel(&[Dim::Pp]));
        let g_mt = GroupPlacement::of(gpn, &moe, &sel(&[Dim::Tp]));
        let g_ep = GroupPlacement::of(gpn, &moe, &sel(&[Dim::Cp]));
        let g_edp = GroupPlacement::of(gpn, &moe, &sel(&[Dim::Dp]));
        let hop = |g: GroupPlacement| {
            if g.size <= 1 {
                GroupPlacement {
                    size: 1,
                    ranks_per_node: 1,
                    nodes: 1,
                }
            } else if g.nodes > 1 {
                GroupPlacement {
                    size: 2,
                    ranks_per_node: 1,
                    nodes: 2,
                }
            } else {
                GroupPlacement {
                    size: 2,
                    ranks_per_node: 2,
                    nodes: 1,
                }
            }
        };
        let mbs = plan.mbs.max(1) as f64;
        let m_tok = mbs * self.seq / cp as f64;
        let ep_imb = self.ep_imbalance(plan);
        let micro = (self.global_batch / (plan.mbs.max(1) * dp)).max(1) as f64;
        Ctx {
            tp: tp as f64,
            cp: cp as f64,
            pp,
            ep: plan.ep.max(1) as f64,
            mt: plan.moe_tp.max(1) as f64,
            vpp: plan.vpp.max(1) as f64,
            micro,
            m_tok,
            t_rank: m_tok / tp as f64,
            ep_imb,
            recv: match self.capacity {
                Some(cf) => cf * self.top_k,
                None => self.k_eff * ep_imb,
            },
            sp: plan.sp || tp == 1,
            algo: plan.algo,
            g_tp,
            g_cp,
            g_dp,
            g_ep,
            g_mt,
            g_edp,
            hop_cp: hop(g_cp),
            hop_pp: hop(g_pp),
        }
    }

    #[inline]
    fn coll(
        &self,
        op: Collective,
        g: GroupPlacement,
        bytes: f64,
        algo: AlgoMode,
    ) -> CollectiveCost {
        if g.size <= 1 || bytes <= 0.0 {
            return CollectiveCost::ZERO;
        }
        self.cost.collective(op, g, bytes, algo)
    }

    /// GEMM time of one class's forward pass on one GPU.
    fn gemm_fwd(&self, kind: LayerKind, gemms: &[G], x: &Ctx) -> f64 {
        let mut t = 0.0;
        // Consecutive GEMMs of one shape (e.g. a MoE layer's identical shared experts) cost the
        // same.
        let mut last = (f64::NAN, f64::NAN, f64::NAN, f64::NAN, 0.0);
        for g in gemms {
            let (rows, count, tp) = self.gemm_rows(kind, g, x);
            let (n, k) = match g.split {
                TpSplit::Column => (g.out_f / tp, g.in_f),
                TpSplit::Row => (g.out_f, g.in_f / tp),
                TpSplit::Replicated => (g.out_f, g.in_f),
            };
            if (rows, n, k, count) == (last.0, last.1, last.2, last.3) {
                t += last.4;
                continue;
            }
            // The local experts' GEMMs: Transformer Engine's `GroupedLinear` (Megatron-Core's
            // `TEGroupedMLP`) issues one cuBLAS GEMM per local expert, so each is priced at its
            // own shape (`rows` tokens of one expert), not their sum, with the tile waves of
            // `time_grouped` (a stand-in on Hopper, see autoplan-cost's compute module); their
            // concurrency over TE's side streams is not credited.
            let e = &self.eff;
            // FP8 training keeps the LM head in 16 bits: Megatron-Core's `output_layer` is a
            // plain `ColumnParallelLinear`, outside Transformer Engine's `fp8_autocast`.
            let head16 = kind == LayerKind::LmHead && self.precision == Precision::Fp8;
            let pricer = if head16 { &self.gemm16 } else { &self.gemm };
            let mut tg = count
                * if g.expert {
                    pricer.time_grouped(2.0 * rows * n * k, rows, n, k)
                } else {
                    pricer.time(2.0 * rows * n * k, rows, n, k)
                };
            if self.precision == Precision::Fp8 && !head16 {
                // FP8 GEMMs quantize their 16-bit input (read 2 B, write 1 B per element;
                // Transformer Engine's cast), a memory-bound pass per GEMM. Current scaling's
                // amax is a second pass (2 B read) not itemised here: on the H100 the pair took
                // 20 µs per 4096 × 2048 input where this term gives 15
                // (results/h100/fp8cast.csv).
                tg += memory_bound_time_with(&self.gpu, e, 3.0 * rows * count * k);
            }
            last = (rows, n, k, count, tg);
            t += tg;
        }
        t
    }

    /// (Rows per matrix, local matrices, the TP-like degree splitting it) of GEMM `g`.
    #[inline]
    fn gemm_rows(&self, kind: LayerKind, g: &G, x: &Ctx) -> (f64, f64, f64) {
        if g.expert {
            // Tokens reaching one local expert: every rank of the expert's moe_tp × ep block
            // sends its t_rank · rows_per_token (= k/E) tokens; padded dispatch fills the
            // capacity `cf · top_k / E` per token, dropless dispatch waits for the most loaded
            // expert (the model's load imbalance).
            let skew = match self.capacity {
                Some(cf) => cf * self.top_k / self.k_eff.max(1e-9),
                None => x.ep_imb,
            };
            let rows = x.t_rank * x.mt * x.ep * g.rows_per_token * skew;
            (rows, g.count / x.ep, x.mt)
        } else if kind == LayerKind::Moe && g.split == TpSplit::Replicated {
            // The router sees the sequence-parallel slice.
            (x.t_rank * g.rows_per_token, g.count, x.tp)
        } else {
            (x.m_tok * g.rows_per_token, g.count, x.tp)
        }
    }

    /// HBM seconds of the activation function between the `fc1` (column) and `fc2` (row)
    /// GEMMs of `gemms`: it reads what `fc1` wrote and writes what `fc2` reads, 16-bit.
    fn activation_fn_time<'g>(
        &self,
        kind: LayerKind,
        gemms: impl Iterator<Item = &'g G>,
        x: &Ctx,
    ) -> f64 {
        let mut bytes = 0.0;
        for g in gemms {
            let (rows, count, tp) = self.gemm_rows(kind, g, x);
            bytes += rows
                * count
                * ACT
                * match g.split {
                    TpSplit::Column => g.out_f / tp,
                    TpSplit::Row => g.in_f / tp,
                    TpSplit::Replicated => 0.0,
                };
        }
        memory_bound_time_with(&self.gpu, &self.eff, bytes)
    }

    /// Selective recompute of class `i` (Megatron-Core `--recompute-modules`): the forward work
    /// of the modules in `m` run again before the backward. `fwd` is the class's forward,
    /// `core` the attention core's (`compute`'s `rc_sel`).
    /// - `core_attn`: the attention core (and an unfused softmax);
    /// - `layernorm`: each pre-norm, an HBM pass reading and writing `h` per token of the
    ///   (sequence-parallel) shard;
    /// - `mla_up_proj`: the `q_b` and `kv_b` GEMMs (RoPE is elementwise, not counted);
    /// - `moe_act`: the routed experts' activation function (HBM-bound);
    /// - `shared_experts`: the shared experts' GEMMs and activation function;
    /// - `mlp` / `moe`: the whole forward of the layer (its collectives: `recompute_comm`).
    ///
    /// An MTP module's block is priced by [`Evaluator::selective_rcs`].
    fn selective_rc(
        &self,
        m: RecomputeModules,
        i: usize,
        c: &Class,
        x: &Ctx,
        fwd: f64,
        core: f64,
    ) -> f64 {
        let ln = if m.has(RecomputeModules::LAYERNORM) {
            let shard = if x.sp { 1.0 / x.tp } else { 1.0 };
            memory_bound_time_with(
                &self.gpu,
                &self.eff,
                2.0 * ACT * self.hidden * x.m_tok * shard,
            )
        } else {
            0.0
        };
        let core = if m.has(RecomputeModules::CORE_ATTN) {
            core
        } else {
            0.0
        };
        match i {
            ATTN => {
                let up = if m.has(RecomputeModules::MLA_UP_PROJ) {
                    self.gemm_fwd(c.kind, &c.up_proj, x)
                } else {
                    0.0
                };
                core + ln + up
            }
            MLP if m.has(RecomputeModules::MLP) => fwd,
            MLP => ln,
            MOE if m.has(RecomputeModules::MOE) => fwd,
            MOE => {
                let mut t = ln;
                if m.has(RecomputeModules::SHARED_EXPERTS) {
                    t += self.gemm_fwd(c.kind, &c.shared, x)
                        + self.activation_fn_time(c.kind, c.shared.iter(), x);
                }
                if m.has(RecomputeModules::MOE_ACT) {
                    let routed = c.gemms.iter().filter(|g| g.expert);
                    t += self.activation_fn_time(c.kind, routed, x);
                }
                t
            }
            MTP => core,
            _ => 0.0,
        }
    }

    /// [`Evaluator::selective_rc`] of every class from their forward times `fwd` and attention
    /// cores `core`. An MTP module repeats the last block's attention and MLP/MoE (`mtp_reuse`):
    /// it recomputes what they do; otherwise its attention core only.
    fn selective_rcs(
        &self,
        m: RecomputeModules,
        x: &Ctx,
        fwd: &[f64; NCLASS],
        core: &[f64; NCLASS],
    ) -> [f64; NCLASS] {
        let mut rc = [0.0; NCLASS];
        for (i, c) in self.classes.iter().enumerate() {
            rc[i] = self.selective_rc(m, i, c, x, fwd[i], core[i]);
        }
        if self.mtp_reuse {
            let mlp = if self.classes[MTP].expert_params > 0.0 {
                MOE
            } else {
                MLP
            };
            rc[MTP] = rc[ATTN] + rc[mlp];
        }
        rc
    }

    /// The kinds of forward communication (bits of `CommKind::index`) that the plan's recompute
    /// runs again for class `i`: full recompute re-runs a block's forward with its TP, CP and
    /// EP collectives; selective recompute of `core_attn` the CP exchange inside the attention
    /// core, of `mlp` the MLP's TP collectives, of `moe` the MoE layer's TP and EP ones.
    fn recompute_comm(plan: &Plan, i: usize) -> u8 {
        let bit = |k: CommKind| 1u8 << k.index();
        let all = bit(CommKind::Tp) | bit(CommKind::Cp) | bit(CommKind::Ep);
        let m = plan.recompute_modules;
        match (plan.recompute, i) {
            (Recompute::Full, ATTN | MLP | MOE | MTP) => all,
            (Recompute::Selective, ATTN | MTP) if m.has(RecomputeModules::CORE_ATTN) => {
                bit(CommKind::Cp)
            }
            (Recompute::Selective, MLP) if m.has(RecomputeModules::MLP) => bit(CommKind::Tp),
            (Recompute::Selective, MOE) if m.has(RecomputeModules::MOE) => {
                bit(CommKind::Tp) | bit(CommKind::Ep)
            }
            _ => 0,
        }
    }

    /// Forward/backward/recompute compute of one class (no communication).
    fn compute(&self, c: &Class, x: &Ctx, gemm: Option<f64>) -> (f64, f64, f64, f64, f64) {
        let gemm = gemm.unwrap_or_else(|| self.gemm_fwd(c.kind, &c.gemms, x));
        let (mut core_f, mut core_b, mut score_f) = (0.0, 0.0, 0.0);
        if c.attn_core > 0.0 {
            let heads_div = x.tp;
            let causal = c.attn_core * x.m_tok / heads_div;
            let io = (2.0 * c.q_elems + c.cp_kv) * x.m_tok / heads_div * ACT;
            match self.opts.attention {
                AttentionKernel::Flash => {
                    core_f = attention_core_time_with(
                        &self.gpu,
                        &self.eff,
                        causal,
                        io,
                        self.attn_precision,
                    );
                    core_b = self.eff.attn_bwd * core_f;
                }
                AttentionKernel::Unfused => {
                    // The full s×s scores are computed, masked, soft-maxed and stored.
                    core_f = attention_core_time_with(
                        &self.gpu,
                        &self.eff,
                        2.0 * causal,
                        io,
                        self.attn_precision,
                    );
                    core_b = 2.0 * core_f;
                    score_f = memory_bound_time_with(
                        &self.gpu,
                        &self.eff,
                        2.0 * c.score * x.m_tok / heads_div,
                    );
                }
            }
        }
        let split = match c.kind {
            LayerKind::CrossEntropy | LayerKind::LmHead => 1.0 / x.tp,
            _ if x.sp => 1.0 / x.tp,
            _ => NON_TP_ACT_FRACTION + (1.0 - NON_TP_ACT_FRACTION) / x.tp,
        };
        // Elementwise kernels write what is stored for backward and read it back once.
        let mem_f = memory_bound_time_with(&self.gpu, &self.eff, 2.0 * c.act * x.m_tok * split);
        let fwd = gemm + core_f + score_f + mem_f;
        let bwd = 2.0 * gemm + core_b + 2.0 * score_f + 2.0 * mem_f;
        let rc_sel = core_f + score_f;
        (fwd, bwd, fwd, rc_sel, gemm)
    }

    /// Per-class costs for one micro-batch, pushing the inventory rows into `sink` with
    /// `calls_per_mb × mult` calls per step (mult = micro-batches × blocks on the stage).
    fn class_costs<S: Sink>(
        &self,
        plan: &Plan,
        x: &Ctx,
        sink: &mut S,
        micro: f64,
        bottleneck: u32,
    ) -> [ClassCost; NCLASS] {
        let mut out = [ClassCost::default(); NCLASS];
        let mut rc_frac = 0.0;
        let counts = if S::ENABLED {
            let layout = self.layout(plan).unwrap_or(StageLayout {
                pp: 1,
                vpp: 1,
                first: self.blocks,
                last: self.blocks,
                middle: 0,
                middle_extra: 0,
            });
            let s = self.stage_blocks(&layout, bottleneck, layout.first_block(bottleneck));
            rc_frac = if s.0 == 0 {
                0.0
            } else {
                plan.recompute_layers
                    .map_or(1.0, |r| r.min(s.0) as f64 / s.0 as f64)
            };
            let last = bottleneck + 1 == plan.pp.max(1);
            let first = bottleneck == 0;
            [
                f64::from(u8::from(first)),
                s.0 as f64,
                s.1 as f64,
                s.2 as f64,
                f64::from(u8::from(last)),
                f64::from(u8::from(last)),
                f64::from(u8::from(last)),
                if last { self.mtp as f64 } else { 0.0 },
            ]
        } else {
            [0.0; NCLASS]
        };
        let attn_cc = self.compute(&self.classes[ATTN], x, None);
        let mut gemm_of = [0.0; NCLASS];
        let mut memo = Memo::default();
        for (i, c) in self.classes.iter().enumerate() {
            if i == MOE && self.experts == 0.0 || i == MTP && self.mtp == 0 {
                continue;
            }
            let (fwd, bwd, rc_full, rc_sel, gemm) = if i == ATTN {
                attn_cc
            } else if i == MTP && self.mtp_reuse {
                // An MTP module = projection + the last block's attention and MLP/MoE + the
                // shared head: reuse the GEMM times of those classes.
                let mlp = if c.expert_params > 0.0 { MOE } else { MLP };
                let own = self.gemm_fwd(c.kind, &c.gemms[..1], x);
                let g = own + gemm_of[ATTN] + gemm_of[mlp] + gemm_of[HEAD];
                self.compute(c, x, Some(g))
            } else {
                self.compute(c, x, None)
            };
            gemm_of[i] = gemm;
            let mut cc = ClassCost {
                fwd,
                bwd,
                rc_full,
                rc_sel,
                ..ClassCost::default()
            };
            let mult = counts[i] * micro;
            let mut e = Emitter {
                ev: self,
                x,
                sink,
                memo: &mut memo,
                layer: c.kind,
                mult,
                rc_mult: mult * rc_frac,
                exposed: [0.0; 5],
                rc: [0.0; 5],
                rc_kinds: Self::recompute_comm(plan, i),
            };
            self.tp_comm(plan, c, i, x, gemm, &mut e);
            if i == ATTN || i == MTP {
                self.cp_comm(plan, c, x, &mut e, attn_cc.0, attn_cc.1);
            }
            if (i == MOE || i == MTP) && c.ep_elems > 0.0 {
                let budget = fwd + bwd + attn_cc.0 + attn_cc.1;
                self.ep_comm(plan, c, x, &mut e, budget);
            }
            cc.exposed = e.exposed;
            cc.rc_comm = e.rc;
            out[i] = cc;
        }
        if plan.recompute == Recompute::Selective {
            let fwd = out.map(|c| c.fwd);
            let core = out.map(|c| c.rc_sel);
            let rc = self.selective_rcs(plan.recompute_modules, x, &fwd, &core);
            for (c, r) in out.iter_mut().zip(rc) {
                c.rc_sel = r;
            }
        }
        out
    }

    fn tp_comm<S: Sink>(
        &self,
        plan: &Plan,
        c: &Class,
        i: usize,
        x: &Ctx,
        gemm: f64,
        e: &mut Emitter<'_, S>,
    ) {
        if x.tp <= 1.0 {
            return;
        }
        let g = x.g_tp;
        let a = x.m_tok * self.hidden * ACT;
        // TP-comm overlap (tiled GEMM + collective, Calculon `tensor_par_overlap`): one tile is
        // exposed, the rest hide behind the GEMM of the same pass.
        let ov = |t: f64, gemm_pass: f64| -> f64 {
            if plan.tp_overlap {
                t / x.tp + (x.tp - 1.0) / x.tp * (t - gemm_pass).max(0.0)
            } else {
                t
            }
        };
        use Collective::*;
        match i {
            ATTN | MLP => {
                // Seed 003 §4: the conjugate f/g pair of Megatron's attention and MLP: one
                // all-reduce of b·s·h forward (g, after the row-parallel GEMM) and one backward
                // (f, the input gradient). With SP (Korthikanti 2022 §4.2.2) each becomes an
                // all-gather before the column-parallel GEMM + a reduce-scatter after the
                // row-parallel one, forward and (swapped) backward, each (t−1)/t of b·s·h.
                if i == ATTN && plan.tp_sp_transition == TpSpTransition::AllToAll {
                    // Seed 001 scheme 2: all-to-all of the attention output (b·s·a·d_v/t per
                    // rank) to the sequence layout, then a replicated out_linear.
                    let y = x.m_tok * c.o_elems / x.tp * ACT;
                    e.emit(
                        CommKind::Tp,
                        "attention input all-gather (SP)",
                        Pass::Forward,
                        AllGather,
                        g,
                        a,
                        1.0,
                        ov,
                        gemm,
                    );
                    e.emit(
                        CommKind::Tp,
                        "attention out TP→SP all-to-all (seed 001)",
                        Pass::Forward,
                        AllToAll,
                        g,
                        y,
                        1.0,
                        |t, _| t,
                        gemm,
                    );
                    e.emit(
                        CommKind::Tp,
                        "attention input grad reduce-scatter (SP)",
                        Pass::Backward,
                        ReduceScatter,
                        g,
                        a,
                        1.0,
                        ov,
                        2.0 * gemm,
                    );
                    e.emit(
                        CommKind::Tp,
                        "attention out SP→TP all-to-all (grad)",
                        Pass::Backward,
                        AllToAll,
                        g,
                        y,
                        1.0,
                        |t, _| t,
                        2.0 * gemm,
                    );
                } else if x.sp {
                    let (ag, rs, bag, brs) = if i == ATTN {
                        (
                            "attention input all-gather (SP)",
                            "attention out reduce-scatter (SP)",
                            "attention out-grad all-gather (SP)",
                            "attention input-grad reduce-scatter (SP)",
                        )
                    } else {
                        (
                            "mlp input all-gather (SP)",
                            "mlp out reduce-scatter (SP)",
                            "mlp out-grad all-gather (SP)",
                            "mlp input-grad reduce-scatter (SP)",
                        )
                    };
                    e.emit(
                        CommKind::Tp,
                        ag,
                        Pass::Forward,
                        AllGather,
                        g,
                        a,
                        1.0,
                        ov,
                        gemm,
                    );
                    e.emit(
                        CommKind::Tp,
                        rs,
                        Pass::Forward,
                        ReduceScatter,
                        g,
                        a,
                        1.0,
                        ov,
                        gemm,
                    );
                    e.emit(
                        CommKind::Tp,
                        bag,
                        Pass::Backward,
                        AllGather,
                        g,
                        a,
                        1.0,
                        ov,
                        2.0 * gemm,
                    );
                    e.emit(
                        CommKind::Tp,
                        brs,
                        Pass::Backward,
                        ReduceScatter,
                        g,
                        a,
                        1.0,
                        ov,
                        2.0 * gemm,
                    );
                } else {
                    let (fg, ff) = if i == ATTN {
                        (
                            "attention out all-reduce (g)",
                            "attention input-grad all-reduce (f)",
                        )
                    } else {
                        ("mlp out all-reduce (g)", "mlp input-grad all-reduce (f)")
                    };
                    e.emit(
                        CommKind::Tp,
                        fg,
                        Pass::Forward,
                        AllReduce,
                        g,
                        a,
                        1.0,
                        ov,
                        gemm,
                    );
                    e.emit(
                        CommKind::Tp,
                        ff,
                        Pass::Backward,
                        AllReduce,
                        g,
                        a,
                        1.0,
                        ov,
                        2.0 * gemm,
                    );
                }
            }
            MOE if self.classes[MOE]
                .gemms
                .iter()
                .any(|g| !g.expert && g.split != TpSplit::Replicated) =>
            {
                // Shared experts run tensor-parallel over `tp` on the sequence-parallel input
                // (Megatron SharedExpertMLP): all-gather in, reduce-scatter out.
                e.emit(
                    CommKind::Tp,
                    "shared-expert input all-gather (SP)",
                    Pass::Forward,
                    AllGather,
                    g,
                    a,
                    1.0,
                    ov,
                    gemm,
                );
                e.emit(
                    CommKind::Tp,
                    "shared-expert out reduce-scatter (SP)",
                    Pass::Forward,
                    ReduceScatter,
                    g,
                    a,
                    1.0,
                    ov,
                    gemm,
                );
                e.emit(
                    CommKind::Tp,
                    "shared-expert out-grad all-gather (SP)",
                    Pass::Backward,
                    AllGather,
                    g,
                    a,
                    1.0,
                    ov,
                    2.0 * gemm,
                );
                e.emit(
                    CommKind::Tp,
                    "shared-expert input-grad reduce-scatter (SP)",
                    Pass::Backward,
                    ReduceScatter,
                    g,
                    a,
                    1.0,
                    ov,
                    2.0 * gemm,
                );
            }
            EMB => {
                // Vocab-parallel embedding (seed 003 §4): partial lookups all-reduced; with SP
                // reduce-scattered straight into the sequence layout.
                if x.sp {
                    e.emit(
                        CommKind::Tp,
                        "vocab-parallel embedding reduce-scatter",
                        Pass::Forward,
                        ReduceScatter,
                        g,
                        a,
                        1.0,
                        |t, _| t,
                        0.0,
                    );
                } else {
                    e.emit(
                        CommKind::Tp,
                        "vocab-parallel embedding all-reduce",
                        Pass::Forward,
                        AllReduce,
                        g,
                        a,
                        1.0,
                        |t, _| t,
                        0.0,
                    );
                }
            }
            HEAD => {
                if x.sp {
                    e.emit(
                        CommKind::Tp,
                        "lm-head input all-gather (SP)",
                        Pass::Forward,
                        AllGather,
                        g,
                        a,
                        1.0,
                        ov,
                        gemm,
                    );
                    e.emit(
                        CommKind::Tp,
                        "lm-head input-grad reduce-scatter (SP)",
                        Pass::Backward,
                        ReduceScatter,
                        g,
                        a,
                        1.0,
                        ov,
                        2.0 * gemm,
                    );
                } else {
                    e.emit(
                        CommKind::Tp,
                        "lm-head input-grad all-reduce (f)",
                        Pass::Backward,
                        AllReduce,
                        g,
                        a,
                        1.0,
                        ov,
                        2.0 * gemm,
                    );
                }
            }
            CE => {
                // Parallel cross-entropy (seed 003 §5.2): all-reduce of the b·s row max, the
                // target logit and the sum of exponentials (fp32), not an all-gather of logits.
                let b = x.m_tok * 4.0;
                e.emit(
                    CommKind::Tp,
                    "cross-entropy max/target/sum-exp all-reduce",
                    Pass::Forward,
                    AllReduce,
                    g,
                    b,
                    3.0,
                    |t, _| t,
                    0.0,
                );
            }
            MTP => {
                let (f, b) = (x.m_tok * c.tp_fwd * ACT, x.m_tok * c.tp_bwd * ACT);
                e.emit(
                    CommKind::Tp,
                    "mtp module all-reduces (fwd)",
                    Pass::Forward,
                    AllReduce,
                    g,
                    f,
                    1.0,
                    ov,
                    gemm,
                );
                e.emit(
                    CommKind::Tp,
                    "mtp module all-reduces (bwd)",
                    Pass::Backward,
                    AllReduce,
                    g,
                    b,
                    1.0,
                    ov,
                    2.0 * gemm,
                );
            }
            _ => {}
        }
    }

    fn cp_comm<S: Sink>(
        &self,
        plan: &Plan,
        c: &Class,
        x: &Ctx,
        e: &mut Emitter<'_, S>,
        attn_fwd: f64,
        attn_bwd: f64,
    ) {
        if x.cp <= 1.0 || c.cp_kv <= 0.0 {
            return;
        }
        // K/V heads per TP rank: GQA's kv heads are split over tp, replicated when tp > g.
        let kv_div = x.tp.min(self.kv_heads).max(1.0);
        match plan.cp_comm {
            CpComm::Ring => {
                // Ring attention (Megatron CP): cp−1 steps, each passing this rank's K/V block
                // to the next rank while attention runs on the block in hand; backward passes
                // K/V and their gradients (2×). Exposed: what a step's transfer exceeds one
                // block's attention time (cp blocks per pass).
                let blk = x.m_tok * c.cp_kv / kv_div * ACT;
                let steps = x.cp - 1.0;
                let (f, b) = (attn_fwd / x.cp, attn_bwd / x.cp);
                e.emit(
                    CommKind::Cp,
                    "ring attention K/V exchange",
                    Pass::Forward,
                    Collective::SendRecv,
                    x.hop_cp,
                    blk,
                    steps,
                    |t, w| (t - w).max(0.0),
                    f,
                );
                e.emit(
                    CommKind::Cp,
                    "ring attention K/V + dK/dV exchange",
                    Pass::Backward,
                    Collective::SendRecv,
                    x.hop_cp,
                    2.0 * blk,
                    steps,
                    |t, w| (t - w).max(0.0),
                    b,
                );
            }
            CpComm::AllToAll => {
                // Ulysses: all-to-all of Q, K, V (sequence → heads) before the core and of the
                // output (heads → sequence) after it; the same backward.
                let qkv = x.m_tok * (c.q_elems / x.tp + c.cp_kv / kv_div) * ACT;
                let o = x.m_tok * c.o_elems / x.tp * ACT;
                let g = x.g_cp;
                e.emit(
                    CommKind::Cp,
                    "Ulysses Q/K/V all-to-all",
                    Pass::Forward,
                    Collective::AllToAll,
                    g,
                    qkv,
                    1.0,
                    |t, _| t,
                    0.0,
                );
                e.emit(
                    CommKind::Cp,
                    "Ulysses output all-to-all",
                    Pass::Forward,
                    Collective::AllToAll,
                    g,
                    o,
                    1.0,
                    |t, _| t,
                    0.0,
                );
                e.emit(
                    CommKind::Cp,
                    "Ulysses output-grad all-to-all",
                    Pass::Backward,
                    Collective::AllToAll,
                    g,
                    o,
                    1.0,
                    |t, _| t,
                    0.0,
                );
                e.emit(
                    CommKind::Cp,
                    "Ulysses Q/K/V-grad all-to-all",
                    Pass::Backward,
                    Collective::AllToAll,
                    g,
                    qkv,
                    1.0,
                    |t, _| t,
                    0.0,
                );
            }
        }
    }

    fn ep_comm<S: Sink>(
        &self,
        plan: &Plan,
        _c: &Class,
        x: &Ctx,
        e: &mut Emitter<'_, S>,
        budget: f64,
    ) {
        let h = self.hidden;
        // EP all-to-all overlap (DualPipe, DeepEP, Megatron's a2a overlap): the dispatch and
        // combine of one micro-batch hide behind another's compute; what exceeds it is exposed.
        // Each EP collective of the layer gets an equal share of the compute to hide behind.
        let n_ep = if x.ep > 1.0 { 4.0 } else { 0.0 } + if x.mt > 1.0 { 4.0 } else { 0.0 };
        let w = if plan.ep_overlap && n_ep > 0.0 {
            budget / n_ep
        } else {
            0.0
        };
        let ov = |t: f64, w: f64| (t - w).max(0.0);
        use Collective::*;
        if x.ep > 1.0 {
            match plan.dispatcher {
                Dispatcher::AllToAll => {
                    // Seed 000 §7.5: dispatch and combine each move top_k × tokens × hidden.
                    // Capacity-padded dispatch (GShard) sends `cf · top_k` rows per token to
                    // every rank, dynamic top-1/top-2 included (seed 004 §3.2: padding to two
                    // experts saves nothing): an equal all-to-all whose sizes are static, so no
                    // host round trip. Dropless dispatch is seed 004's unequal all-to-all:
                    // `k_eff` rows per token on average (1 + two_expert_fraction under dynamic
                    // routing), the busiest rank `ep_imb` times the mean (its receive side:
                    // every rank sends the same), plus `cpufetch` for the split sizes.
                    let rows = ["EP dispatch all-to-all", "EP combine all-to-all"];
                    let grads = ["EP combine-grad all-to-all", "EP dispatch-grad all-to-all"];
                    let calls = rows
                        .iter()
                        .map(|w| (*w, Pass::Forward))
                        .chain(grads.iter().map(|w| (*w, Pass::Backward)));
                    let mean = x.t_rank * self.k_eff * h * ACT;
                    for (what, pass) in calls {
                        match self.capacity {
                            Some(_) => {
                                let b = x.t_rank * x.recv * h * ACT;
                                e.emit(CommKind::Ep, what, pass, AllToAll, x.g_ep, b, 1.0, ov, w);
                            }
                            None => e.emit_a2a(what, pass, x.g_ep, mean * x.ep_imb, mean, w),
                        }
                    }
                }
                Dispatcher::DeepEp if x.g_ep.nodes > 1 => {
                    // DeepEP normal kernels (DeepSeek-V3 report §3.2.2): a token goes over the
                    // network once per distinct destination node, rank i to rank i of that
                    // node on its own NIC, then to its experts' GPUs over NVLink; the RDMA and
                    // NVLink stages are pipelined, so the slower one sets the time. Dropless:
                    // the busiest rank moves `ep_imb` times the mean; with a capacity, every
                    // rank moves the padded `cf · top_k` rows (as the all-to-all branch). The
                    // network stage is priced as a direct all-to-all between the nodes' NIC
                    // shares; DeepEP keeps it on one rail (rank i to rank i), which the cost
                    // model charges as cross-rail: the same unless the fabric is oversubscribed.
                    let g = x.g_ep;
                    let (mean, max) = deepep_bytes(self.capacity, self.k_eff, x, h);
                    let inter = GroupPlacement {
                        size: g.nodes,
                        ranks_per_node: 1,
                        nodes: g.nodes,
                    };
                    let intra = GroupPlacement {
                        size: g.ranks_per_node,
                        ranks_per_node: g.ranks_per_node,
                        nodes: 1,
                    };
                    let rho = node_dedup(self.experts, self.top_k, g.nodes as f64);
                    let ci = self
                        .cost
                        .alltoall_unequal(inter, rho * max, rho * mean, x.algo);
                    let cn = self.cost.alltoall_unequal(intra, max, mean, x.algo);
                    let c = if ci.time >= cn.time { ci } else { cn };
                    for (what, pass) in DEEPEP_CALLS {
                        e.emit_cost(CommKind::Ep, what, pass, AllToAll, g, mean, c, w);
                    }
                }
                Dispatcher::DeepEp => {
                    // Inside one node DeepEP's intranode kernels move what an all-to-all does
                    // (so the plan ties with `dispatcher=all-to-all`).
                    let (mean, max) = deepep_bytes(self.capacity, self.k_eff, x, h);
                    for (what, pass) in DEEPEP_CALLS {
                        e.emit_a2a(what, pass, x.g_ep, max, mean, w);
                    }
                }
                Dispatcher::AllGather => {
                    // All-gather dispatcher: every rank gathers the EP group's tokens, keeps
                    // those of its experts, and reduce-scatters the outputs back.
                    let b = x.t_rank * h * ACT * x.ep;
                    e.emit(
                        CommKind::Ep,
                        "EP token all-gather",
                        Pass::Forward,
                        AllGather,
                        x.g_ep,
                        b,
                        1.0,
                        ov,
                        w,
                    );
                    e.emit(
                        CommKind::Ep,
                        "EP output reduce-scatter",
                        Pass::Forward,
                        ReduceScatter,
                        x.g_ep,
                        b,
                        1.0,
                        ov,
                        w,
                    );
                    e.emit(
                        CommKind::Ep,
                        "EP output-grad all-gather",
                        Pass::Backward,
                        AllGather,
                        x.g_ep,
                        b,
                        1.0,
                        ov,
                        w,
                    );
                    e.emit(
                        CommKind::Ep,
                        "EP token-grad reduce-scatter",
                        Pass::Backward,
                        ReduceScatter,
                        x.g_ep,
                        b,
                        1.0,
                        ov,
                        w,
                    );
                }
            }
        }
        if x.mt > 1.0 {
            // Seed 000 §7.5 (15): the expert group's tokens (datasize = moe_tp × what one rank
            // receives) are spread over its moe_tp ranks — scheme 1 by scatter/gather from a
            // master rank, scheme 2 by all-gather/reduce-scatter after a group-wise all-to-all.
            let data = x.t_rank * x.recv * h * ACT * x.mt;
            match plan.moe_tp_scheme {
                MoeTpScheme::ScatterGather => {
                    e.emit(
                        CommKind::Ep,
                        "moe_tp token scatter (scheme 1)",
                        Pass::Forward,
                        Scatter,
                        x.g_mt,
                        data,
                        1.0,
                        ov,
                        w,
                    );
                    e.emit(
                        CommKind::Ep,
                        "moe_tp output gather (scheme 1)",
                        Pass::Forward,
                        Gather,
                        x.g_mt,
                        data,
                        1.0,
                        ov,
                        w,
                    );
                    e.emit(
                        CommKind::Ep,
                        "moe_tp output-grad scatter (scheme 1)",
                        Pass::Backward,
                        Scatter,
                        x.g_mt,
                        data,
                        1.0,
                        ov,
                        w,
                    );
                    e.emit(
                        CommKind::Ep,
                        "moe_tp input-grad gather (scheme 1)",
                        Pass::Backward,
                        Gather,
                        x.g_mt,
                        data,
                        1.0,
                        ov,
                        w,
                    );
                }
                MoeTpScheme::GroupAllToAll => {
                    e.emit(
                        CommKind::Ep,
                        "moe_tp token all-gather (scheme 2)",
                        Pass::Forward,
                        AllGather,
                        x.g_mt,
                        data,
                        1.0,
                        ov,
                        w,
                    );
                    e.emit(
                        CommKind::Ep,
                        "moe_tp output reduce-scatter (scheme 2)",
                        Pass::Forward,
                        ReduceScatter,
                        x.g_mt,
                        data,
                        1.0,
                        ov,
                        w,
                    );
                    e.emit(
                        CommKind::Ep,
                        "moe_tp output-grad all-gather (scheme 2)",
                        Pass::Backward,
                        AllGather,
                        x.g_mt,
                        data,
                        1.0,
                        ov,
                        w,
                    );
                    e.emit(
                        CommKind::Ep,
                        "moe_tp input-grad reduce-scatter (scheme 2)",
                        Pass::Backward,
                        ReduceScatter,
                        x.g_mt,
                        data,
                        1.0,
                        ov,
                        w,
                    );
                }
            }
        }
    }

    /// Blocks on stage `i` whose first block is `start`: (total, dense, moe). The layout is
    /// `Plan::stage_blocks` (autoplan-plan); dense blocks are the model's first `dense_blocks`.
    fn stage_blocks(&self, layout: &StageLayout, i: u32, start: u32) -> (u32, u32, u32) {
        let n = layout.blocks(i);
        let end = start + n;
        let dense = self
            .dense_blocks
            .min(end)
            .saturating_sub(start.min(self.dense_blocks));
        (n, dense, n.saturating_sub(dense))
    }

    #[allow(clippy::too_many_arguments)]
    fn stage(
        &self,
        plan: &Plan,
        x: &Ctx,
        c: &[ClassCost; NCLASS],
        layout: &StageLayout,
        i: u32,
        start: u32,
        pp_t: f64,
    ) -> StageTime {
        let (n, dense, moe) = self.stage_blocks(layout, i, start);
        let first = i == 0;
        let last = i + 1 == x.pp;
        let mut counts = [0.0; NCLASS];
        counts[EMB] = f64::from(u8::from(first));
        counts[ATTN] = n as f64;
        counts[MLP] = dense as f64;
        counts[MOE] = moe as f64;
        counts[NORM] = f64::from(u8::from(last));
        counts[HEAD] = counts[NORM];
        counts[CE] = counts[NORM];
        counts[MTP] = if last { self.mtp as f64 } else { 0.0 };
        let rc_frac = if n == 0 {
            0.0
        } else {
            plan.recompute_layers
                .map_or(1.0, |r| r.min(n) as f64 / n as f64)
        };
        let mut s = StageTime {
            blocks: n,
            dense,
            moe,
            ..StageTime::default()
        };
        for (k, cc) in c.iter().enumerate() {
            let w = counts[k];
            if w == 0.0 {
                continue;
            }
            s.fwd += w * cc.fwd;
            s.bwd += w * cc.bwd;
            s.compute += w * (cc.fwd + cc.bwd);
            let block = matches!(k, ATTN | MLP | MOE | MTP);
            if block {
                match plan.recompute {
                    Recompute::Full => s.recompute += w * rc_frac * cc.rc_full,
                    Recompute::Selective => s.recompute += w * rc_frac * cc.rc_sel,
                    Recompute::None => {}
                }
                let kinds = Self::recompute_comm(plan, k);
                for (j, v) in cc.rc_comm.iter().enumerate() {
                    if kinds >> j & 1 == 1 {
                        s.exposed[j] += w * rc_frac * v;
                    }
                }
            }
            for (e, v) in s.exposed.iter_mut().zip(cc.exposed.iter()) {
                *e += w * v;
            }
            let cl = &self.classes[k];
            s.params_dense += w * cl.non_expert_params;
            s.params_expert += w * cl.expert_params;
        }
        s.params_dense /= x.tp;
        s.params_expert /= x.ep * x.mt;
        s.exposed[CommKind::Pp.index()] += 2.0 * pp_t;
        s.t = s.compute + s.recompute + s.exposed.iter().sum::<f64>();
        s
    }

    /// Pipeline point-to-point of one micro-batch: (bytes, seconds per transfer).
    fn pp_hop(&self, x: &Ctx) -> (f64, f64) {
        let bytes = x.m_tok * self.hidden * ACT / if x.sp { x.tp } else { 1.0 };
        let t = if x.pp > 1 {
            self.coll(Collective::SendRecv, x.hop_pp, bytes, x.algo)
                .time
        } else {
            0.0
        };
        (bytes, t)
    }

    /// The optimizer step: memory-bound over this GPU's shard of the parameters of the stage
    /// `pmax` holding the most (dense ones sharded over dp × cp, experts over edp, from ZeRO 1).
    fn optimizer_time(&self, zero: Zero, x: &Ctx, pmax: &StageTime) -> f64 {
        let (shard_d, shard_e) = if zero >= Zero(1) {
            (x.g_dp.size as f64, x.g_edp.size as f64)
        } else {
            (1.0, 1.0)
        };
        let per_param = match self.model.training.optimizer {
            Optimizer::Adam => ADAM_BYTES_PER_PARAM,
            Optimizer::AdamBf16Moments => ADAM_BF16_MOMENTS_BYTES_PER_PARAM,
            Optimizer::Sgd => SGD_BYTES_PER_PARAM,
        };
        let opt_params = pmax.params_dense / shard_d + pmax.params_expert / shard_e;
        memory_bound_time_with(&self.gpu, &self.eff, per_param * opt_params)
    }

    fn run<S: Sink>(&self, plan: &Plan, sink: &mut S) -> Result<Outcome, Infeasible> {
        plan.check(&self.model, self.cluster.gpus())?;
        let layout = self.layout(plan)?;
        // Memory first: a plan over HBM is rejected with its peak, which needs no step time.
        let peak = self.memory_peak(plan);
        if peak > self.gpu.hbm_bytes {
            return Err(Infeasible::OutOfMemory {
                peak_bytes: peak,
                hbm_bytes: self.gpu.hbm_bytes,
            });
        }
        let x = self.ctx(plan);
        let costs = self.class_costs(plan, &x, &mut (), 0.0, 0);

        // Pipeline point-to-point: one activation (b·s/cp·h, /tp under SP) forward and one
        // gradient backward per micro-batch per stage boundary (seed 000 §7.4). Megatron
        // overlaps the extra virtual-stage transfers of the interleaved schedule.
        let (pp_bytes, pp_t) = self.pp_hop(&x);

        let mut tmax = 0.0;
        let mut sum = 0.0;
        let mut b = StageTime::default();
        let mut bi = 0;
        let mut pmax = StageTime::default();
        let mut start = 0;
        // Middle stages with the same block mix cost the same: reuse the previous one.
        let mut prev: Option<StageTime> = None;
        for i in 0..x.pp {
            let (n, dense, _) = self.stage_blocks(&layout, i, start);
            let middle = i > 0 && i + 1 < x.pp;
            let s = match prev {
                Some(p) if middle && p.blocks == n && p.dense == dense => p,
                _ => self.stage(plan, &x, &costs, &layout, i, start, pp_t),
            };
            prev = middle.then_some(s);
            start += s.blocks;
            sum += s.t;
            if s.t > tmax {
                tmax = s.t;
                b = s;
                bi = i;
            }
            if s.params_dense + s.params_expert > pmax.params_dense + pmax.params_expert {
                pmax = s;
            }
        }
        let micro = x.micro;
        let base = sum - tmax;
        let bubble = plan.schedule.bubble(base, plan.vpp, x.pp);

        // Data-parallel gradient reduction on the stage holding the most parameters.
        let (dp_exposed, zero3_per_mb) = self.dp_comm(plan, &x, &pmax, sink, micro);
        let pipeline = micro * (tmax + zero3_per_mb) + bubble;

        let optimizer = self.optimizer_time(plan.zero, &x, &pmax);

        let step = pipeline + dp_exposed + optimizer;

        if S::ENABLED {
            // The per-layer table of the bottleneck stage, and pipeline rows.
            self.class_costs(plan, &x, sink, micro, bi);
            if x.pp > 1 {
                let calls = 2.0 * micro * x.vpp;
                sink.push(CommRow {
                    layer: None,
                    what: "pipeline activation send/recv",
                    kind: CommKind::Pp,
                    pass: Pass::Forward,
                    collective: Collective::SendRecv,
                    algorithm: autoplan_cost::Algorithm::PointToPoint,
                    group: x.hop_pp.into(),
                    bytes: pp_bytes,
                    calls_per_step: calls / 2.0,
                    time_per_call: pp_t,
                    time: calls / 2.0 * pp_t,
                    exposed: micro * pp_t,
                });
                sink.push(CommRow {
                    layer: None,
                    what: "pipeline gradient send/recv",
                    kind: CommKind::Pp,
                    pass: Pass::Backward,
                    collective: Collective::SendRecv,
                    algorithm: autoplan_cost::Algorithm::PointToPoint,
                    group: x.hop_pp.into(),
                    bytes: pp_bytes,
                    calls_per_step: calls / 2.0,
                    time_per_call: pp_t,
                    time: calls / 2.0 * pp_t,
                    exposed: micro * pp_t,
                });
            }
        }

        let mut bd = StepBreakdown {
            compute_s: micro * b.compute,
            recompute_s: micro * b.recompute,
            tp_exposed_s: micro * b.exposed[0],
            cp_exposed_s: micro * b.exposed[1],
            ep_exposed_s: micro * b.exposed[2],
            pp_exposed_s: micro * b.exposed[3],
            dp_exposed_s: micro * b.exposed[4] + dp_exposed + micro * zero3_per_mb,
            bubble_s: bubble,
            optimizer_s: optimizer,
        };
        // Rounding guard: the parts sum to the step.
        let drift = step - bd.total();
        bd.compute_s += drift;

        let tokens = self.global_batch as f64 * self.seq;
        let gpus = plan.gpus() as f64;
        let model_flops = tokens * self.flops.model_per_token();
        let rc_frac = {
            let n = b.blocks.max(1);
            plan.recompute_layers
                .map_or(1.0, |r| r.min(n) as f64 / n as f64)
        };
        let hw_flops = model_flops
            + tokens
                * match plan.recompute {
                    Recompute::Full => self.flops.full_recompute_per_token(rc_frac),
                    Recompute::Selective => self
                        .flops
                        .selective_recompute_per_token(plan.recompute_modules, rc_frac),
                    Recompute::None => 0.0,
                };
        let tflops = model_flops / step / gpus;
        let hw = hw_flops / step / gpus;
        let exposed = [
            bd.tp_exposed_s,
            bd.cp_exposed_s,
            bd.ep_exposed_s,
            bd.pp_exposed_s,
            bd.dp_exposed_s,
        ];
        let mut dominant = CommKind::None;
        let mut dmax = 0.0;
        for (k, v) in CommKind::ALL.iter().zip(exposed.iter()) {
            if *v > dmax {
                dmax = *v;
                dominant = *k;
            }
        }
        let metrics = Metrics {
            step_time_s: step,
            tokens_per_s: tokens / step,
            tokens_per_s_per_gpu: tokens / step / gpus,
            mfu: tflops / self.peak,
            hfu: hw / self.peak,
            tflops_per_gpu: tflops / 1e12,
            hw_tflops_per_gpu: hw / 1e12,
            memory_peak_bytes: peak,
            dominant_comm: dominant,
            exposed_comm_s: exposed.iter().sum(),
            bubble_s: bubble,
        };
        Ok(Outcome {
            metrics,
            breakdown: bd,
            micro: micro as u32,
            bottleneck: bi,
        })
    }

    /// DP gradient reduction and ZeRO gathers. Returns (exposed once per step, exposed per
    /// micro-batch under ZeRO-3).
    fn dp_comm<S: Sink>(
        &self,
        plan: &Plan,
        x: &Ctx,
        s: &StageTime,
        sink: &mut S,
        micro: f64,
    ) -> (f64, f64) {
        let gb = self.opts.grad_bytes;
        let mut step_exposed = 0.0;
        let mut per_mb = 0.0;
        let groups = [
            (x.g_dp, s.params_dense, "dense"),
            (x.g_edp, s.params_expert, "expert"),
        ];
        for (g, p, which) in groups {
            if g.size <= 1 || p <= 0.0 {
                continue;
            }
            let buckets = (p / self.opts.bucket_params).max(1.0);
            let hide = |t: f64, window: f64| -> f64 {
                if self.opts.dp_overlap {
                    (t / buckets).max(t - window)
                } else {
                    t
                }
            };
            let mut row = |what: &'static str,
                           pass: Pass,
                           op: Collective,
                           bytes: f64,
                           calls: f64,
                           exposed: f64,
                           c: CollectiveCost| {
                if S::ENABLED {
                    sink.push(CommRow {
                        layer: None,
                        what,
                        kind: CommKind::Dp,
                        pass,
                        collective: op,
                        algorithm: c.algorithm,
                        group: g.into(),
                        bytes,
                        calls_per_step: calls,
                        time_per_call: c.time,
                        time: calls * c.time,
                        exposed,
                    });
                }
            };
            let dense = which == "dense";
            if plan.zero >= Zero(3) {
                // ZeRO-3 / FSDP: parameters gathered before each forward and backward of each
                // micro-batch, gradients reduce-scattered after each backward; prefetching
                // hides them behind the same pass's compute.
                let ag = self.coll(Collective::AllGather, g, p * PARAM, x.algo);
                let rs = self.coll(Collective::ReduceScatter, g, p * gb, x.algo);
                let e_f = (ag.time - s.fwd).max(ag.time / buckets);
                let e_b = (ag.time + rs.time - s.bwd).max((ag.time + rs.time) / buckets);
                per_mb += e_f + e_b;
                let (w1, w2, w3) = if dense {
                    (
                        "ZeRO-3 parameter all-gather (fwd)",
                        "ZeRO-3 parameter all-gather (bwd)",
                        "ZeRO-3 gradient reduce-scatter",
                    )
                } else {
                    (
                        "ZeRO-3 expert parameter all-gather (fwd)",
                        "ZeRO-3 expert parameter all-gather (bwd)",
                        "ZeRO-3 expert gradient reduce-scatter",
                    )
                };
                row(
                    w1,
                    Pass::Forward,
                    Collective::AllGather,
                    p * PARAM,
                    micro,
                    micro * e_f,
                    ag,
                );
                row(
                    w2,
                    Pass::Backward,
                    Collective::AllGather,
                    p * PARAM,
                    micro,
                    0.0,
                    ag,
                );
                row(
                    w3,
                    Pass::Backward,
                    Collective::ReduceScatter,
                    p * gb,
                    micro,
                    micro * e_b,
                    rs,
                );
            } else if plan.zero >= Zero(1) {
                // Distributed optimizer / ZeRO-1/2: reduce-scatter of the gradients, all-gather
                // of the updated 16-bit parameters (overlapped with the next forward).
                let rs = self.coll(Collective::ReduceScatter, g, p * gb, x.algo);
                let ag = self.coll(Collective::AllGather, g, p * PARAM, x.algo);
                let e_rs = hide(rs.time, s.bwd);
                let e_ag = hide(ag.time, s.fwd);
                step_exposed += e_rs + e_ag;
                let (w1, w2) = if dense {
                    ("DP gradient reduce-scatter", "DP parameter all-gather")
                } else {
                    (
                        "EDP expert gradient reduce-scatter",
                        "EDP expert parameter all-gather",
                    )
                };
                row(
                    w1,
                    Pass::Step,
                    Collective::ReduceScatter,
                    p * gb,
                    1.0,
                    e_rs,
                    rs,
                );
                row(
                    w2,
                    Pass::Step,
                    Collective::AllGather,
                    p * PARAM,
                    1.0,
                    e_ag,
                    ag,
                );
            } else {
                let ar = self.coll(Collective::AllReduce, g, p * gb, x.algo);
                let e = hide(ar.time, s.bwd);
                step_exposed += e;
                let w = if dense {
                    "DP gradient all-reduce"
                } else {
                    "EDP expert gradient all-reduce"
                };
                row(w, Pass::Step, Collective::AllReduce, p * gb, 1.0, e, ar);
            }
        }
        // Tied embedding and LM head on different stages: their gradients are all-reduced
        // between the first and last stage (seed 003 §4).
        if x.pp > 1 && self.model.tied_embeddings {
            let bytes = self.vocab * self.hidden / x.tp * gb;
            let c = self.coll(Collective::AllReduce, x.hop_pp, bytes, x.algo);
            step_exposed += c.time;
            if S::ENABLED {
                sink.push(CommRow {
                    layer: Some(LayerKind::Embedding),
                    what: "tied embedding gradient all-reduce (first ↔ last stage)",
                    kind: CommKind::Dp,
                    pass: Pass::Step,
                    collective: Collective::AllReduce,
                    algorithm: c.algorithm,
                    group: x.hop_pp.into(),
                    bytes,
                    calls_per_step: 1.0,
                    time_per_call: c.time,
                    time: c.time,
                    exposed: c.time,
                });
            }
        }
        (step_exposed, per_mb)
    }

    fn memory_peak(&self, plan: &Plan) -> f64 {
        self.memory(plan).total
    }

    /// Memory of the most loaded GPU (autoplan-memory; allocation-free).
    fn memory(&self, plan: &Plan) -> autoplan_memory::MemoryBreakdown {
        self.mem.breakdown(plan, &self.mem_opts)
    }
}

/// Redundant slots per GPU covered by [`Evaluator`]'s cached balanced-placement values.
const BALANCED_R: usize = 8;

/// Empty cache slots for every EP degree dividing `E` (the valid ones, `Plan::check`) and
/// `R ≤ BALANCED_R`; no slots for dense models. The values are a pure function of (E, ep, R,
/// load_imbalance), so which thread fills a slot first does not change any result.
fn balanced_table(experts: u32) -> Vec<(u32, [OnceLock<f64>; BALANCED_R + 1])> {
    (1..=experts)
        .filter(|&d| experts.is_multiple_of(d))
        .map(|ep| (ep, std::array::from_fn(|_| OnceLock::new())))
        .collect()
}

/// The collectives already costed in this evaluation (a plan repeats the same collective on
/// the same group many times: the SP all-gather and reduce-scatter of attention and MLP, ...).
/// A fixed array on the stack: no allocation.
#[derive(Default)]
struct Memo {
    n: usize,
    keys: [(Option<Collective>, u32, u32, u64); MEMO],
    vals: [Option<CollectiveCost>; MEMO],
    /// The last unequal all-to-all: (size, ranks per node, max bits, mean bits) → cost.
    a2a: Option<((u32, u32, u64, u64), CollectiveCost)>,
}

const MEMO: usize = 16;

impl Memo {
    #[inline]
    fn get(
        &mut self,
        ev: &Evaluator,
        op: Collective,
        g: GroupPlacement,
        bytes: f64,
        algo: AlgoMode,
    ) -> CollectiveCost {
        let key = (Some(op), g.size, g.ranks_per_node, bytes.to_bits());
        for i in 0..self.n {
            if self.keys[i] == key {
                if let Some(c) = self.vals[i] {
                    return c;
                }
            }
        }
        let c = ev.coll(op, g, bytes, algo);
        if self.n < MEMO {
            self.keys[self.n] = key;
            self.vals[self.n] = Some(c);
            self.n += 1;
        }
        c
    }
}

/// Emits collectives of one class: costs them, accumulates exposed time per kind, and pushes
/// table rows when the sink wants them.
struct Emitter<'a, S: Sink> {
    ev: &'a Evaluator,
    x: &'a Ctx,
    sink: &'a mut S,
    memo: &'a mut Memo,
    layer: LayerKind,
    mult: f64,
    /// Calls per step of the forward recomputation (the recomputed blocks).
    rc_mult: f64,
    exposed: [f64; 5],
    /// Exposed forward communication per kind that recompute runs again.
    rc: [f64; 5],
    /// The kinds (bits of `CommKind::index`) whose forward collectives recompute repeats.
    rc_kinds: u8,
}

impl<S: Sink> Emitter<'_, S> {
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn emit(
        &mut self,
        kind: CommKind,
        what: &'static str,
        pass: Pass,
        op: Collective,
        g: GroupPlacement,
        bytes: f64,
        calls: f64,
        overlap: impl Fn(f64, f64) -> f64,
        window: f64,
    ) {
        if g.size <= 1 || bytes <= 0.0 {
            return;
        }
        let c = self.memo.get(self.ev, op, g, bytes, self.x.algo);
        let t = calls * c.time;
        let exposed = overlap(t, window);
        self.book(kind, what, pass, op, g, bytes, calls, c, exposed);
    }

    /// Books `exposed` seconds of `calls` calls of `c` and lists them; a forward collective that
    /// recompute runs again (`rc_kinds`) is booked in `rc` too and listed as a recompute row.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn book(
        &mut self,
        kind: CommKind,
        what: &'static str,
        pass: Pass,
        op: Collective,
        g: GroupPlacement,
        bytes: f64,
        calls: f64,
        c: CollectiveCost,
        exposed: f64,
    ) {
        self.exposed[kind.index()] += exposed;
        let repeat = pass == Pass::Forward && self.rc_kinds >> kind.index() & 1 == 1;
        if repeat {
            self.rc[kind.index()] += exposed;
        }
        if S::ENABLED {
            // The table row of `pass` done `mult` times per step.
            let layer = Some(self.layer);
            let row = |pass, mult: f64| CommRow {
                layer,
                what,
                kind,
                pass,
                collective: op,
                algorithm: c.algorithm,
                group: g.into(),
                bytes,
                calls_per_step: calls * mult,
                time_per_call: c.time,
                time: calls * mult * c.time,
                exposed: exposed * mult,
            };
            if self.mult > 0.0 {
                self.sink.push(row(pass, self.mult));
            }
            if repeat && self.rc_mult > 0.0 {
                self.sink.push(row(Pass::Recompute, self.rc_mult));
            }
        }
    }

    /// One unequal EP all-to-all (`max` bytes on the busiest rank, `mean` on average), priced
    /// once per distinct shape within the plan, hidden behind `window` seconds.
    fn emit_a2a(
        &mut self,
        what: &'static str,
        pass: Pass,
        g: GroupPlacement,
        max: f64,
        mean: f64,
        window: f64,
    ) {
        if g.size <= 1 || mean <= 0.0 {
            return;
        }
        let key = (g.size, g.ranks_per_node, max.to_bits(), mean.to_bits());
        let c = match self.memo.a2a {
            Some((k, c)) if k == key => c,
            _ => {
                let c = self.ev.cost.alltoall_unequal(g, max, mean, self.x.algo);
                self.memo.a2a = Some((key, c));
                c
            }
        };
        self.emit_cost(
            CommKind::Ep,
            what,
            pass,
            Collective::AllToAll,
            g,
            mean,
            c,
            window,
        );
    }

    /// One call of an already-priced collective `c`, hidden behind `window` seconds.
    #[allow(clippy::too_many_arguments)]
    fn emit_cost(
        &mut self,
        kind: CommKind,
        what: &'static str,
        pass: Pass,
        op: Collective,
        g: GroupPlacement,
        bytes: f64,
        c: CollectiveCost,
        window: f64,
    ) {
        let exposed = (c.time - window).max(0.0);
        self.book(kind, what, pass, op, g, bytes, 1.0, c, exposed);
    }
}

#[cfg(test)]
mod tests {
    use super::node_dedup;

    fn choose(n: u128, k: u128) -> u128 {
        (0..k).fold(1u128, |acc, i| acc * (n - i) / (i + 1))
    }

    #[test]
    fn node_dedup_matches_the_hypergeometric_count() {
        // Qwen3-235B on EP 32 over 4 nodes: 128 experts, 32 per node, top-8.
        let p0 = choose(96, 8) as f64 / choose(128, 8) as f64;
        let want = 4.0 * (1.0 - p0) / 8.0;
        assert!((node_dedup(128.0, 8.0, 4.0) - want).abs() < 1e-12);
        assert!(want < 0.5);
        // One node, or one expert per token: nothing to deduplicate.
        assert_eq!(node_dedup(128.0, 8.0, 1.0), 1.0);
        assert!((node_dedup(64.0, 1.0, 8.0) - 1.0).abs() < 1e-12);
        // More nodes, fewer shared destinations: the ratio rises towards 1.
        assert!(node_dedup(256.0, 8.0, 8.0) > node_dedup(256.0, 8.0, 2.0));
    }
}
