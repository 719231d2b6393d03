//! Expert parallelism: the per-GPU expert load under the plan's placement, the token dispatch
//! and combine over the EP group (all-to-all, DeepEP, all-gather dispatchers) and the `moe_tp`
//! collectives inside an expert's group.

use std::sync::OnceLock;

use autoplan_cluster::{GroupPlacement, Precision};
use autoplan_cost::compute::memory_bound_time_with;
use autoplan_cost::Collective::{self, AllGather, AllToAll, Gather, ReduceScatter, Scatter};
use autoplan_plan::{Dispatcher, MoeTpScheme, PlacementPolicy, Plan};

use super::compute::ACT;
use super::ctx::Ctx;
use super::emit::{Comm, Emitter};
use super::ep_overlap::{EpHide, EpWindows};
use super::Evaluator;
use crate::balance::{balanced_packing, contiguous_imbalance, Packing};
use crate::comm::{CommKind, Pass, Sink};

/// Redundant slots per GPU covered by [`Evaluator`]'s cached balanced-placement values.
pub(super) const BALANCED_R: usize = 8;

/// Empty cache slots for every EP degree dividing `E` (the valid ones, `Plan::check`) and
/// `R ≤ BALANCED_R`; no slots for dense models. The values are a pure function of (E, ep, R,
/// load_imbalance), so which thread fills a slot first does not change any result.
pub(super) fn balanced_table(experts: u32) -> Vec<(u32, [OnceLock<Packing>; BALANCED_R + 1])> {
    (1..=experts)
        .filter(|&d| experts.is_multiple_of(d))
        .map(|ep| (ep, std::array::from_fn(|_| OnceLock::new())))
        .collect()
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

/// Bytes of DeepEP's FP8 transfer per BF16 byte: one e4m3 byte per element and one fp32 scale
/// per 1×128 tile, over two bytes (DeepEP README: "FP8 dispatching and BF16 combining" with
/// 1×128 scales).
const FP8_DISPATCH: f64 = (1.0 + 4.0 / 128.0) / ACT;

impl Evaluator {
    /// The byte factor of DeepEP transfer `i` (`DEEPEP_CALLS` order) under the training precision,
    /// where the framework quantizes the dispatch (`EvalOptions::fp8_dispatch`: DeepSeek's own, not
    /// Megatron-Core's): with DeepSeek's fine-grained FP8 recipe the activations entering the
    /// experts' up-projection and the activation gradients entering their down-projection are
    /// quantized before they travel — the forward dispatch and the backward of the combine — while
    /// the forward combine and the backward of the dispatch stay BF16 (DeepSeek-V3 report §3.3.3,
    /// "Low-Precision Storage and Communication"). Other recipes and frameworks send BF16.
    #[inline]
    fn deepep_scale(&self, i: usize) -> f64 {
        if self.opts.fp8_dispatch && self.precision == Precision::Fp8Block && (i == 0 || i == 2) {
            FP8_DISPATCH
        } else {
            1.0
        }
    }
}

/// The share of an all-to-all's network traffic that DeepEP's node-deduplicated dispatch still
/// sends: a token routed uniformly to `k` of `experts` spread evenly over `nodes` nodes reaches
/// `nodes · (1 − P₀)` distinct nodes on average, `P₀ = C(E − E/N, k) / C(E, k)` the
/// hypergeometric chance that a node holds none of its `k` experts; an all-to-all sends all `k`
/// copies, so the ratio (of the remote parts alike) is `N · (1 − P₀) / k`, at most 1.
///
/// Under group-limited routing (`groups` = (G, g): a token's experts come from g of G groups of
/// consecutive experts, `Moe::groups`) with contiguous placement, node `n` holds experts
/// `[n·E/N, (n+1)·E/N)` (EP ranks fill the group's nodes in rank order, as Megatron-Core's
/// orders place them), so the groups and nodes nest. A token's g groups are taken as chosen
/// uniformly (the router's random logits of a forced-balance benchmark, or a balanced one),
/// each holding `k/g` of its experts (Megatron-Core scores a group by its top `k/g` experts,
/// `group_limited_topk`, and takes the token's top k inside the chosen groups):
/// - G a multiple of N (whole groups per node): at most `N · (1 − C(G − G/N, g) / C(G, g))`
///   distinct nodes (DeepSeek-V3, 8 groups on 8 nodes: 4, its report's "at most 4 nodes");
/// - N a multiple of G (a group over N/G nodes): `g · (N/G) · (1 − C(E/G − E/N, k/g) /
///   C(E/G, k/g))`;
/// - otherwise the uniform count. Never more than the uniform count.
fn node_dedup(experts: f64, top_k: f64, nodes: f64, groups: (u32, u32)) -> f64 {
    let k = top_k.round().max(1.0);
    if nodes <= 1.0 || experts < k {
        return 1.0;
    }
    // P(a set of `m` of `total` holds none of `draws` distinct picks).
    let miss = |total: f64, m: f64, draws: f64| {
        let (mut p, mut i) = (1.0, 0.0);
        while i < draws {
            p *= ((total - m - i) / (total - i)).max(0.0);
            i += 1.0;
        }
        p
    };
    let uniform = nodes * (1.0 - miss(experts, experts / nodes, k));
    let (g_all, g_top) = groups;
    let (g, gk, n) = (f64::from(g_all), f64::from(g_top), nodes.round() as u64);
    let grouped = if g_all <= 1 || g_top >= g_all || n == 0 {
        uniform
    } else if u64::from(g_all).is_multiple_of(n) {
        nodes * (1.0 - miss(g, g / nodes, gk))
    } else if n.is_multiple_of(u64::from(g_all)) {
        let per_group = (k / gk).round().max(1.0);
        gk * (nodes / g) * (1.0 - miss(experts / g, experts / nodes, per_group))
    } else {
        uniform
    };
    (grouped.min(uniform) / k).min(1.0)
}

/// One EP collective of a table: what it does, its pass, the collective.
type EpCall = (&'static str, Pass, Collective);

/// The all-gather dispatcher: every rank gathers the EP group's tokens, keeps those of its
/// experts, and reduce-scatters the outputs back.
const ALL_GATHER_DISPATCH: [EpCall; 4] = [
    ("EP token all-gather", Pass::Forward, AllGather),
    ("EP output reduce-scatter", Pass::Forward, ReduceScatter),
    ("EP output-grad all-gather", Pass::Backward, AllGather),
    (
        "EP token-grad reduce-scatter",
        Pass::Backward,
        ReduceScatter,
    ),
];
/// Seed 000 §7.5 (15), `moe_tp` scheme 1: scatter/gather from a master rank.
const MOE_TP_SCHEME1: [EpCall; 4] = [
    ("moe_tp token scatter (scheme 1)", Pass::Forward, Scatter),
    ("moe_tp output gather (scheme 1)", Pass::Forward, Gather),
    (
        "moe_tp output-grad scatter (scheme 1)",
        Pass::Backward,
        Scatter,
    ),
    (
        "moe_tp input-grad gather (scheme 1)",
        Pass::Backward,
        Gather,
    ),
];
/// Scheme 2: all-gather/reduce-scatter after a group-wise all-to-all.
const MOE_TP_SCHEME2: [EpCall; 4] = [
    (
        "moe_tp token all-gather (scheme 2)",
        Pass::Forward,
        AllGather,
    ),
    (
        "moe_tp output reduce-scatter (scheme 2)",
        Pass::Forward,
        ReduceScatter,
    ),
    (
        "moe_tp output-grad all-gather (scheme 2)",
        Pass::Backward,
        AllGather,
    ),
    (
        "moe_tp input-grad reduce-scatter (scheme 2)",
        Pass::Backward,
        ReduceScatter,
    ),
];

/// Books every call of `calls` on group `g`, each of `bytes`, hidden per `w`.
#[inline]
fn book<S: Sink>(
    e: &mut Emitter<'_, S>,
    calls: &[EpCall],
    g: GroupPlacement,
    bytes: f64,
    w: EpHide,
) {
    for (i, &(what, pass, op)) in calls.iter().enumerate() {
        e.emit(Comm::new(CommKind::Ep, what, pass, op, g, bytes).hide(w.at(i)));
    }
}

impl Evaluator {
    /// Max/mean tokens reaching one GPU of the plan's EP group, which the dropless all-to-all
    /// (its slowest rank) and the expert GEMMs of the most loaded GPU wait for. Contiguous
    /// placement: [`contiguous_imbalance`]`(E, ep, load_imbalance)`, the GPU
    /// holding the hottest expert beside `E/ep − 1` average ones. `placement=balanced:R`:
    /// [`crate::balanced_imbalance`]`(E, ep, R, load_imbalance)`, EPLB-style packing
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
            PlacementPolicy::Balanced { .. } => {
                self.with_packing(plan, |p| p.max_over_mean).unwrap_or(1.0)
            }
        }
    }

    /// Calls `f` with the balanced packing of `plan` (`None` under contiguous placement): the
    /// cached one when `R ≤ BALANCED_R`, else computed for the call. A GPU holds an expert
    /// once, so slots beyond `E − E/ep` stay empty (the cap of
    /// `autoplan_memory::ModelMemory::replicas_per_gpu`).
    pub(super) fn with_packing<T>(&self, plan: &Plan, f: impl FnOnce(&Packing) -> T) -> Option<T> {
        let PlacementPolicy::Balanced { redundant } = plan.placement else {
            return None;
        };
        let (e, ep) = (self.experts as u32, plan.ep.max(1));
        let r = redundant.min(e.saturating_sub(e / ep)) as usize;
        let compute = || balanced_packing(e as usize, ep as usize, r, self.imbalance);
        Some(match self.balanced.iter().find(|(d, _)| *d == ep) {
            Some((_, row)) if r <= BALANCED_R => f(row[r].get_or_init(compute)),
            _ => f(&compute()),
        })
    }

    /// The EP and `moe_tp` collectives of a MoE class (or MTP module), hidden under EP overlap
    /// behind the other micro-batch's sub-modules `windows` (`ep_overlap.rs`).
    pub(super) fn ep_comm<S: Sink>(
        &self,
        plan: &Plan,
        x: &Ctx,
        e: &mut Emitter<'_, S>,
        windows: EpWindows,
    ) {
        // EP overlap (DualPipe, Megatron's a2a overlap; `ep_overlap.rs`): each transfer hides
        // behind the sub-module beside it (shared by the EP and `moe_tp` transfers of a phase);
        // what exceeds it is exposed, and what hides slows it by the SMs the transfer takes.
        let per_phase = if x.ep > 1.0 { 1.0 } else { 0.0 } + if x.mt > 1.0 { 1.0 } else { 0.0 };
        let paired = e
            .ep_paired
            .unwrap_or_else(|| super::ep_overlap::paired_share(plan, x.micro));
        let w = self.ep_hide(plan, paired, windows, per_phase);
        if x.ep > 1.0 {
            // Grouped routing nests in the nodes (and ranks) only under contiguous placement
            // (`balanced` reorders the experts).
            let groups = match plan.placement {
                PlacementPolicy::Contiguous => self.route_groups,
                PlacementPolicy::Balanced { .. } => (1, 1),
            };
            match plan.dispatcher {
                Dispatcher::AllToAll => self.ep_all_to_all(x, e, w),
                Dispatcher::DeepEp if x.g_ep.nodes > 1 => self.ep_deepep_internode(x, e, w, groups),
                Dispatcher::DeepEp => {
                    // Inside one NVLink domain DeepEP's intranode kernels send a token once to
                    // each rank holding any of its experts (`rank_dedup`).
                    let (mean, max) = deepep_bytes(self.capacity, self.k_eff, x, self.hidden);
                    let rho = self.rank_dedup(x, groups);
                    let (mean, max) = (rho * mean, rho * max);
                    for (i, (what, pass)) in DEEPEP_CALLS.into_iter().enumerate() {
                        let f = self.deepep_scale(i);
                        let c = Comm::new(CommKind::Ep, what, pass, AllToAll, x.g_ep, f * mean);
                        e.emit_a2a(c.hide(w.at(i)), f * max);
                    }
                }
                Dispatcher::AllGather => {
                    // All-gather dispatcher: every rank gathers the EP group's tokens, keeps
                    // those of its experts, and reduce-scatters the outputs back.
                    let b = x.t_rank * self.hidden * ACT * x.ep;
                    book(e, &ALL_GATHER_DISPATCH, x.g_ep, b, w);
                }
            }
        }
        if x.mt > 1.0 {
            // Seed 000 §7.5 (15): the expert group's tokens (datasize = moe_tp × what one rank
            // receives) are spread over its moe_tp ranks — scheme 1 by scatter/gather from a
            // master rank, scheme 2 by all-gather/reduce-scatter after a group-wise all-to-all.
            let data = x.t_rank * x.recv * self.hidden * ACT * x.mt;
            let calls = match plan.moe_tp_scheme {
                MoeTpScheme::ScatterGather => &MOE_TP_SCHEME1,
                MoeTpScheme::GroupAllToAll => &MOE_TP_SCHEME2,
            };
            book(e, calls, x.g_mt, data, w);
        }
    }

    /// The all-to-all dispatcher. Seed 000 §7.5: dispatch and combine each move top_k ×
    /// tokens × hidden. Capacity-padded dispatch (GShard) sends `cf · top_k` rows per token to
    /// every rank, dynamic top-1/top-2 included (seed 004 §3.2: padding to two experts saves
    /// nothing): an equal all-to-all whose sizes are static, so no host round trip. Dropless
    /// dispatch is seed 004's unequal all-to-all: `k_eff` rows per token on average (1 +
    /// two_expert_fraction under dynamic routing), the busiest rank `ep_imb` times the mean
    /// (its receive side: every rank sends the same), plus `cpufetch` for the split sizes.
    ///
    /// With more than one local expert the dispatcher reorders the received rows by local
    /// expert after the dispatch ("Permutation 2", `sort_chunks_by_idxs`, or the padded
    /// layout's transposed copy) and back before the combine, and its backward likewise:
    /// one memory-bound copy (read and write) of the rank's received rows beside each of the
    /// four all-to-alls (`token_dispatcher.py` @ core 0.19.2 L746-781, L789-815), priced in
    /// the call's time (the layer's compute reads no dispatcher; DeepEP's flex path has no such
    /// sort).
    fn ep_all_to_all<S: Sink>(&self, x: &Ctx, e: &mut Emitter<'_, S>, w: EpHide) {
        let h = self.hidden;
        let local_experts = self.experts / x.ep + x.replicas;
        let sorted = local_experts > 1.0;
        let rows = ["EP dispatch all-to-all", "EP combine all-to-all"];
        let grads = ["EP combine-grad all-to-all", "EP dispatch-grad all-to-all"];
        let calls = rows
            .iter()
            .map(|w| (*w, Pass::Forward))
            .chain(grads.iter().map(|w| (*w, Pass::Backward)));
        // Bytes a rank sends per call, and the busiest rank receives (all alike when padded).
        let (sent, received) = match self.capacity {
            Some(_) => (x.t_rank * x.recv * h * ACT, None),
            None => {
                let mean = x.t_rank * self.k_eff * h * ACT;
                (mean, Some(mean * x.ep_imb))
            }
        };
        let sort = if sorted {
            memory_bound_time_with(&self.gpu, &self.eff, 2.0 * received.unwrap_or(sent))
        } else {
            0.0
        };
        for (i, (what, pass)) in calls.enumerate() {
            let c = Comm::new(CommKind::Ep, what, pass, AllToAll, x.g_ep, sent).hide(w.at(i));
            match received {
                None => e.emit_with(c, sort),
                Some(max) => e.emit_a2a_with(c, max, sort),
            }
        }
    }

    /// The share of a dropless dispatch's rows that DeepEP moves: it sends a token once to each
    /// rank holding any of its experts, not once per expert (`Buffer::get_dispatch_layout`'s
    /// `is_token_in_rank`, which Megatron-Core's flex dispatcher passes to `Buffer::dispatch`,
    /// `transformer/moe/fused_a2a.py` @ core 0.14.0; the receiving rank expands its rows per
    /// local expert, `_DeepepManager::get_permuted_hidden_states_by_experts`, and sums a
    /// token's local experts before the combine sends it back), so the rows per token are
    /// the distinct ranks its `k` experts reach: [`node_dedup`] over the EP group's ranks.
    /// Capacity-padded dispatch (which the flex dispatcher refuses) keeps its padded rows.
    fn rank_dedup(&self, x: &Ctx, groups: (u32, u32)) -> f64 {
        match self.capacity {
            Some(_) => 1.0,
            None => node_dedup(self.experts, self.top_k, x.ep, groups),
        }
    }

    /// DeepEP normal kernels across nodes (DeepSeek-V3 report §3.2.2): a token goes over the
    /// network once per distinct destination node, rank i to rank i of that node on its own
    /// NIC, then to its experts' GPUs over NVLink; the RDMA and NVLink stages are pipelined, so
    /// the slower one sets the time. Dropless: the busiest rank moves `ep_imb` times the mean;
    /// with a capacity, every rank moves the padded `cf · top_k` rows (as the all-to-all
    /// branch). The network stage is priced as a direct all-to-all between the nodes' NIC
    /// shares; DeepEP keeps it on one rail (rank i to rank i), which the cost model charges as
    /// cross-rail: the same unless the fabric is oversubscribed. `groups`: the routing groups
    /// the network stage's node deduplication counts with ([`node_dedup`]).
    fn ep_deepep_internode<S: Sink>(
        &self,
        x: &Ctx,
        e: &mut Emitter<'_, S>,
        w: EpHide,
        groups: (u32, u32),
    ) {
        let g = x.g_ep;
        let (mean, max) = deepep_bytes(self.capacity, self.k_eff, x, self.hidden);
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
        let rho = node_dedup(self.experts, self.top_k, g.nodes as f64, groups);
        // The NVLink stage forwards a token once to each rank of the node holding any of its
        // experts (`rank_dedup`).
        let rho_rank = self.rank_dedup(x, groups);
        let price = |f: f64| {
            let ci = self
                .cost
                .alltoall_unequal(inter, f * rho * max, f * rho * mean, x.algo);
            let cn =
                self.cost
                    .alltoall_unequal(intra, f * rho_rank * max, f * rho_rank * mean, x.algo);
            if ci.time >= cn.time {
                ci
            } else {
                cn
            }
        };
        let bf16 = price(1.0);
        let fp8 = if self.deepep_scale(0) < 1.0 {
            price(FP8_DISPATCH)
        } else {
            bf16
        };
        for (i, (what, pass)) in DEEPEP_CALLS.into_iter().enumerate() {
            let f = self.deepep_scale(i);
            let call = Comm::new(CommKind::Ep, what, pass, AllToAll, g, f * mean);
            e.emit_priced(call.hide(w.at(i)), if f < 1.0 { fp8 } else { bf16 });
        }
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
        assert!((node_dedup(128.0, 8.0, 4.0, (1, 1)) - want).abs() < 1e-12);
        assert!(want < 0.5);
        // One node, or one expert per token: nothing to deduplicate.
        assert_eq!(node_dedup(128.0, 8.0, 1.0, (1, 1)), 1.0);
        assert!((node_dedup(64.0, 1.0, 8.0, (1, 1)) - 1.0).abs() < 1e-12);
        // More nodes, fewer shared destinations: the ratio rises towards 1.
        assert!(node_dedup(256.0, 8.0, 8.0, (1, 1)) > node_dedup(256.0, 8.0, 2.0, (1, 1)));
    }

    #[test]
    fn group_limited_routing_reaches_fewer_nodes() {
        // DeepSeek-V3 (256 experts in 8 groups, a token in 4 of them) on EP 64 over 8 nodes:
        // one group per node, so at most 4 nodes of 8 copies (report §2.1.2), where uniform
        // routing reaches 8 · (1 − C(224, 8) / C(256, 8)) ≈ 5.3 nodes.
        let grouped = node_dedup(256.0, 8.0, 8.0, (8, 4));
        assert!((grouped - 0.5).abs() < 1e-12);
        let p0 = choose(224, 8) as f64 / choose(256, 8) as f64;
        assert!((node_dedup(256.0, 8.0, 8.0, (1, 1)) - (1.0 - p0)).abs() < 1e-12);
        // Two groups per node (EP 32 over 4 nodes): 4 · (1 − C(6, 4) / C(8, 4)) nodes.
        let want = 4.0 * (1.0 - 15.0 / 70.0) / 8.0;
        assert!((node_dedup(256.0, 8.0, 4.0, (8, 4)) - want).abs() < 1e-12);
        // A group over 4 nodes (32 nodes): 4 groups × 4 nodes × (1 − C(24, 2) / C(32, 2)).
        let want = 4.0 * 4.0 * (1.0 - 276.0 / 496.0) / 8.0;
        assert!((node_dedup(256.0, 8.0, 32.0, (8, 4)) - want).abs() < 1e-12);
        // Every group allowed, or groups that do not nest in the nodes: the uniform count.
        for (nodes, groups) in [(8.0, (8, 8)), (8.0, (1, 1)), (3.0, (8, 4))] {
            let uniform = node_dedup(256.0, 8.0, nodes, (1, 1));
            assert_eq!(node_dedup(256.0, 8.0, nodes, groups), uniform);
        }
        // Never more than the uniform count.
        for nodes in [2.0, 4.0, 8.0, 16.0, 32.0, 64.0] {
            let uniform = node_dedup(256.0, 8.0, nodes, (1, 1));
            assert!(node_dedup(256.0, 8.0, nodes, (8, 4)) <= uniform + 1e-12);
        }
    }
}
