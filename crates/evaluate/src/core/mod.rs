//! The evaluator: per-(model, cluster) precomputation, and per plan the communication
//! inventory, the stage times, the pipeline composition and the metrics.
//!
//! Split by what each part prices:
//! - [`classes`]: the layer classes precomputed from the graph ([`classes::ClassId`]);
//! - [`ctx`]: the per-plan context (degrees, tokens, groups);
//! - [`compute`]: each class's GEMMs, attention core and elementwise kernels;
//! - [`recompute`]: what recompute runs again;
//! - [`costs`]: one micro-batch of each class, compute and communication parts;
//! - [`moe`]: a MoE layer's router, token permutation copies and per-expert launches;
//! - [`tp`], [`cp`], [`ep`], [`dp`]: the collectives of each kind of parallelism;
//! - [`pipeline`]: the stages, the busiest one, the pipeline hops;
//! - [`optimizer`]: the optimizer step; [`offload`]: its offload to host memory;
//! - [`step`]: `run`, composing them into the step time, breakdown and metrics;
//! - [`emit`], [`memo`]: booking a communication row, and the per-evaluation price cache;
//! - [`floor`]: the same computation with the open knobs at their best.

use std::sync::OnceLock;

use autoplan_cluster::{Cluster, Gpu, Precision};
use autoplan_cost::compute::{arch_efficiency, gemm_peak, peak_flops, ArchEfficiency, GemmPricer};
use autoplan_cost::CostModel;
use autoplan_graph::ModelSpec;
use autoplan_plan::{Invalid, Plan, Recompute, StageLayout};

mod classes;
mod compute;
mod costs;
mod cp;
mod ctx;
mod dp;
mod dualpipe;
mod elementwise;
mod emit;
mod ep;
mod ep_overlap;
mod floor;
mod floor_parts;
mod floor_table;
mod memo;
mod moe;
mod offload;
mod optimizer;
mod pipeline;
mod recompute;
mod replica;
mod step;
mod tp;
#[cfg(test)]
mod view_tests;

use crate::comm::{CommRow, Pass};
use crate::flops::ModelFlops;
use crate::{AttentionKernel, EvalOptions, Infeasible, Metrics, Report, StageSummary};
use classes::Class;
pub use elementwise::{unfused_elementwise_bytes, UnfusedBytes};
use ep::BALANCED_R;
pub use floor::OpenLists;
pub use moe::MoeWorkRow;
pub use optimizer::{ADAM_BYTES_PER_PARAM, ADAM_STEP_BYTES};

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
    /// This evaluator's key in the per-thread collective cache (`ctx::coll`): unique per
    /// `Evaluator::new`, shared by clones (which price alike: an evaluator never changes).
    cache_id: u64,
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
    /// The attention core's kernel shapes (heads, head dims, block kinds).
    attn: compute::AttnShape,
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
    /// Group-limited routing (`Moe::groups`, `Moe::group_top_k`): (groups, groups a token's
    /// experts come from); (1, 1) without a limit.
    route_groups: (u32, u32),
    k_eff: f64,
    imbalance: f64,
    capacity: Option<f64>,
    /// Max/mean expert load per GPU under `placement=balanced:R`, and where the replicated
    /// experts sit ([`crate::balanced_packing`]), one slot per EP degree dividing the experts and `R ≤
    /// BALANCED_R`, filled on first use ([`Evaluator::ep_imbalance`]): models and searches
    /// that never ask pay nothing, later evaluations read it without allocating.
    balanced: Vec<(u32, [OnceLock<crate::Packing>; BALANCED_R + 1])>,
    /// The GPU's efficiency constants (`EvalOptions::efficiency`, else `ARCH_TABLE`'s).
    eff: ArchEfficiency,
    /// `eff` as the attention core's kernel runs (`EvalOptions::attention`): FlashAttention-2's
    /// rates where the framework runs it (`ArchEfficiency::with_flash_attention_2`).
    attn_eff: ArchEfficiency,
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

impl Evaluator {
    /// Precompute everything that does not depend on the plan.
    pub fn new(model: &ModelSpec, cluster: &Cluster, opts: EvalOptions) -> Evaluator {
        // What the GPUs decide whatever the options say.
        let opts = opts.on(cluster);
        let layers = model.layers();
        let mut classes = classes::classes_of(model);
        for c in &mut classes {
            c.unfused = unfused_elementwise_bytes(model, c.kind, &opts.elementwise);
        }
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
        let mtp_reuse = classes::mtp_reuses(&classes);
        let eff = opts.efficiency.unwrap_or(*arch_efficiency(gpu.arch));
        let gemm = GemmPricer::new(&gpu, &eff, precision);
        // Low-precision recipes keep the attention core in 16 bits (Transformer Engine's FP8
        // autocast covers the linear layers).
        let attn_precision = if precision.is_low_precision() {
            Precision::Bf16
        } else {
            precision
        };
        // Full waves (u = 1): no GEMM beats it.
        let eff_max = eff.gemm_eff_max;
        Evaluator {
            cache_id: ctx::next_cache_id(),
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
            attn: compute::AttnShape::of(model),
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
            route_groups: model
                .moe
                .as_ref()
                .map_or((1, 1), |m| (m.groups, m.group_top_k)),
            k_eff,
            imbalance,
            capacity,
            balanced: ep::balanced_table(experts as u32),
            gemm,
            gemm16: GemmPricer::new(&cluster.gpu, &eff, attn_precision),
            attn_eff: match opts.attention {
                AttentionKernel::FlashAttention2 => eff.with_flash_attention_2(),
                AttentionKernel::Flash | AttentionKernel::Unfused => eff,
            },
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
                flash_attention: opts.attention.is_fused(),
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
        self.check(plan)?;
        self.layout(plan)?;
        Ok(self.memory_peak(plan))
    }

    /// Of `dispatchers`, the first whose plans hold the least memory (the memory model's
    /// `least_memory_dispatcher`; `None` for an empty list).
    pub fn least_memory_dispatcher(
        &self,
        plan: &Plan,
        dispatchers: &[autoplan_plan::Dispatcher],
    ) -> Option<autoplan_plan::Dispatcher> {
        self.mem.least_memory_dispatcher(plan, dispatchers)
    }

    /// The memory breakdown of `plan`'s most loaded GPU, fitting or not (what `report` shows;
    /// an out-of-memory plan has no report). The same validity checks as `evaluate`.
    pub fn memory_breakdown(
        &self,
        plan: &Plan,
    ) -> Result<autoplan_memory::MemoryBreakdown, Infeasible> {
        self.check(plan)?;
        self.layout(plan)?;
        Ok(self.memory(plan))
    }

    /// The memory of every pipeline stage's GPU of a checked plan, in stage order (the report's
    /// `memory` is the most loaded of them).
    pub fn stage_memory(&self, plan: &Plan) -> Vec<autoplan_memory::MemoryBreakdown> {
        (0..plan.pp.max(1))
            .map(|i| self.mem.stage_breakdown(plan, &self.mem_opts, i))
            .collect()
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
        let costs = self.class_costs(plan, &x, &mut (), 0.0, 0);
        let layout = self.layout(plan)?;
        let mut start = 0;
        let (_, pp_t) = self.pp_hop(&x);
        for i in 0..plan.pp {
            let st = self.stage(plan, &x, &costs, &layout, i, start, pp_t);
            start += st.blocks;
            stages.push(StageSummary {
                stage: i,
                blocks: st.blocks,
                dense_blocks: st.dense,
                moe_blocks: st.moe,
                time_per_microbatch_s: st.t,
            });
        }
        let moe = self.moe_table(plan, &x, f64::from(o.micro), o.bottleneck);
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
            attention_flops: self.opts.flops,
            comm: rows,
            moe,
            stages,
            bottleneck_stage: o.bottleneck,
            memory,
            hbm_bytes: self.gpu.hbm_bytes,
            groups,
        })
    }

    /// The MoE work table of stage `bottleneck` (`micro` micro-batches): the MoE layers' and
    /// a MoE MTP module's router, permutation copies and per-expert launches.
    fn moe_table(&self, plan: &Plan, x: &ctx::Ctx, micro: f64, bottleneck: u32) -> Vec<MoeWorkRow> {
        let mut out = Vec::new();
        if self.experts == 0.0 {
            return out;
        }
        let (counts, _) = self.table_counts(plan, bottleneck);
        for id in [classes::ClassId::Moe, classes::ClassId::Mtp] {
            let c = &self.classes[id as usize];
            let w = self.moe_work(c, x);
            self.moe_rows(c.kind, &w, counts[id as usize] * micro, &mut out);
        }
        out
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

    /// The pipeline layout of a checked plan.
    /// `plan` is valid for the model and GPU count ([`Plan::check`]) and runs on the cluster's
    /// hardware ([`crate::check_hardware`]). The search's floors check the first alone (their
    /// bounds hold over a superset of the plans).
    fn check(&self, plan: &Plan) -> Result<(), Invalid> {
        plan.check(&self.model, self.cluster.gpus())?;
        crate::check_hardware(plan, &self.model, &self.cluster)
    }

    fn layout(&self, plan: &Plan) -> Result<StageLayout, Infeasible> {
        plan.stage_blocks(&self.model)
            .ok_or(Infeasible::Invalid(Invalid::UnevenStages {
                first: plan.first_stage_layers,
                last: plan.last_stage_layers,
                blocks: self.blocks,
                pp: plan.pp,
            }))
    }

    fn memory_peak(&self, plan: &Plan) -> f64 {
        self.memory(plan).total
    }

    /// Memory of the most loaded GPU (autoplan-memory; allocation-free), through a per-thread
    /// cache: a search asks for the same memory under every communication knob.
    fn memory(&self, plan: &Plan) -> autoplan_memory::MemoryBreakdown {
        let key = ctx::PlanKey {
            evaluator: self.cache_id,
            plan: memory_view(plan),
        };
        ctx::cached(&MEM_CACHE, key.slot(MEM_CACHE_BITS), key, || {
            self.mem.breakdown(plan, &self.mem_opts)
        })
    }
}

/// `plan` with the knobs the memory model does not read at `Plan::default()`'s values: the CP
/// exchange, the `moe_tp` scheme, the algorithm mode, the rank order and both overlaps move
/// time only (`autoplan-memory` reads none of them; `tests/memory_knobs.rs` checks the
/// breakdown is the same under every value).
pub(crate) fn memory_view(plan: &Plan) -> Plan {
    let d = Plan::default();
    Plan {
        cp_comm: d.cp_comm,
        moe_tp_scheme: d.moe_tp_scheme,
        algo: d.algo,
        order: d.order,
        tp_overlap: d.tp_overlap,
        ep_overlap: d.ep_overlap,
        ..*plan
    }
}

/// log2 of the memory cache's slots.
const MEM_CACHE_BITS: u32 = 8;

thread_local! {
    /// Memory breakdowns computed on this thread (exact keys: a hit is what computing again
    /// gives, bit for bit).
    static MEM_CACHE: ctx::Slots<ctx::PlanKey, autoplan_memory::MemoryBreakdown, { 1 << MEM_CACHE_BITS }> =
        const { [const { std::cell::RefCell::new(None) }; 1 << MEM_CACHE_BITS] };
}

/// The evaluators of bundled (model, cluster) pairs that the cache tests walk, each with its
/// model and its cluster's GPU count.
#[cfg(test)]
pub(crate) fn bundled_evaluators(
    pairs: &[(&str, &str)],
) -> Vec<(autoplan_graph::ModelSpec, u32, Evaluator)> {
    pairs
        .iter()
        .map(|&(model, cluster)| {
            let m = autoplan_graph::resolve_model(model).expect("bundled model");
            let c = autoplan_cluster::resolve_cluster(cluster).expect("bundled cluster");
            let ev = Evaluator::new(&m, &c, crate::EvalOptions::default());
            (m, c.gpus(), ev)
        })
        .collect()
}

#[cfg(test)]
mod memory_cache_tests {
    use autoplan_cost::{AlgoMode, Algorithm};
    use autoplan_plan::{
        CpComm, Dispatcher, MoeTpScheme, Plan, RankOrder, Recompute, RecomputeModules, Schedule,
        TpSpTransition, Zero,
    };

    use super::memory_view;

    /// The knobs `memory_view` sets aside move no byte of the memory model (computed without
    /// the cache), and the cached `memory` answers what the model computes, in any order of
    /// asking: every plan of a grid over the degrees and the memory knobs of three bundled
    /// models, each under every value of the set-aside knobs.
    #[test]
    fn the_memory_cache_keys_on_everything_the_memory_model_reads() {
        let orders: Vec<RankOrder> = ["tp-cp-dp-pp", "tp-pp-cp-dp", "pp-dp-cp-tp"]
            .iter()
            .map(|o| o.parse().expect("rank order"))
            .collect();
        let cp_comms = [
            CpComm::Ring,
            CpComm::AllToAll,
            CpComm::AllGather,
            CpComm::Hierarchical { a2a: 2 },
        ];
        let algos = [
            AlgoMode::Cheapest,
            AlgoMode::NcclLike,
            AlgoMode::Fixed(Algorithm::Ring),
        ];
        let mut checked = 0;
        for (m, gpus, ev) in super::bundled_evaluators(&[
            ("deepseek-v3", "h800x2048"),
            ("mixtral-8x7b", "h100x256"),
            ("llama3-8b", "dgx-h100"),
        ]) {
            let moe = m.moe.is_some();
            for (tp, cp, pp) in [(1, 1, 1), (2, 2, 2), (4, 1, 4), (8, 2, 1)] {
                let Some(dp) = gpus
                    .checked_div(tp * cp * pp)
                    .filter(|d| d * tp * cp * pp == gpus)
                else {
                    continue;
                };
                for (recompute, modules) in [
                    (Recompute::None, RecomputeModules::DEFAULT),
                    (Recompute::Selective, RecomputeModules::DEFAULT),
                    (Recompute::Full, RecomputeModules::DEFAULT),
                ] {
                    for (zero, dispatcher, sp) in
                        [Zero::stage(1), Zero::stage(3)].into_iter().flat_map(|z| {
                            [Dispatcher::AllToAll, Dispatcher::AllGather]
                                .into_iter()
                                .flat_map(move |d| [(z, d, true), (z, d, false)])
                        })
                    {
                        let base = Plan {
                            tp,
                            cp,
                            pp,
                            dp,
                            ep: if moe { 8.min(dp * cp * tp) } else { 1 },
                            recompute,
                            recompute_modules: modules,
                            zero,
                            dispatcher,
                            sp,
                            schedule: if pp > 1 {
                                Schedule::Interleaved
                            } else {
                                Schedule::OneF1B
                            },
                            vpp: if pp > 1 { 2 } else { 1 },
                            tp_sp_transition: TpSpTransition::AllReduceSlice,
                            ..Plan::default()
                        };
                        let fresh = ev.mem.breakdown(&base, &ev.mem_opts);
                        for (i, &order) in orders.iter().enumerate() {
                            let v = Plan {
                                order,
                                cp_comm: cp_comms[i % cp_comms.len()],
                                algo: algos[i % algos.len()],
                                moe_tp_scheme: if i % 2 == 0 {
                                    MoeTpScheme::ScatterGather
                                } else {
                                    MoeTpScheme::GroupAllToAll
                                },
                                tp_overlap: i % 2 == 1,
                                ep_overlap: i % 2 == 0,
                                ..base
                            };
                            assert_eq!(memory_view(&v), memory_view(&base));
                            assert_eq!(ev.mem.breakdown(&v, &ev.mem_opts), fresh, "{v}");
                            assert_eq!(ev.memory(&v), fresh, "cached, {v}");
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 100, "{checked} plans checked");
    }
}
