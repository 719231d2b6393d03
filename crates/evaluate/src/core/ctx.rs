//! The per-plan context every part reads: the degrees, the token counts of one micro-batch and
//! where each communication group sits on the cluster.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use autoplan_cluster::GroupPlacement;
use autoplan_cost::{AlgoMode, Collective, CollectiveCost};
use autoplan_plan::{CpComm, Dim, PlacementPolicy, Plan, RankOrder};

use super::Evaluator;

/// Per-plan derived quantities.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ctx {
    pub(super) tp: f64,
    pub(super) cp: f64,
    pub(super) pp: u32,
    pub(super) ep: f64,
    pub(super) mt: f64,
    pub(super) vpp: f64,
    pub(super) micro: f64,
    /// Token rows of a TP-split GEMM per GPU: `mbs · s / cp`.
    pub(super) m_tok: f64,
    /// Tokens a rank dispatches to the experts: `m_tok / tp` (sequence-parallel split).
    pub(super) t_rank: f64,
    /// Max/mean tokens reaching one GPU of the EP group under the plan's expert placement
    /// ([`Evaluator::ep_imbalance`]).
    pub(super) ep_imb: f64,
    /// Expert rows per dispatched token on the busiest GPU of the EP group: capacity-padded
    /// `cf · top_k`, dropless `k_eff · ep_imb` (seed 004 §3.2).
    pub(super) recv: f64,
    /// Redundant expert copies per GPU per MoE block (`placement=balanced:R`, capped as
    /// `autoplan_memory::ModelMemory::replicas_per_gpu` caps it); 0 under contiguous placement.
    pub(super) replicas: f64,
    pub(super) sp: bool,
    pub(super) algo: AlgoMode,
    pub(super) g_tp: GroupPlacement,
    pub(super) g_cp: GroupPlacement,
    pub(super) g_dp: GroupPlacement,
    pub(super) g_ep: GroupPlacement,
    pub(super) g_mt: GroupPlacement,
    pub(super) g_edp: GroupPlacement,
    pub(super) hop_cp: GroupPlacement,
    pub(super) hop_pp: GroupPlacement,
}

impl Ctx {
    /// Every group of the plan (two plans with the same groups cost the same: the floor's
    /// rank orders).
    /// The groups the class costs' communication parts read (`tp_comm`: TP; `cp_comm`: CP
    /// and its ring hop; `ep_comm`: EP and `moe_tp`): two rank orders placing these alike
    /// have the same class costs, whatever their DP and pipeline groups.
    pub(super) fn class_groups(&self) -> [GroupPlacement; 5] {
        [self.g_tp, self.g_cp, self.hop_cp, self.g_ep, self.g_mt]
    }

    pub(super) fn groups(&self) -> [GroupPlacement; 8] {
        [
            self.g_tp,
            self.g_cp,
            self.g_dp,
            self.g_ep,
            self.g_mt,
            self.g_edp,
            self.hop_cp,
            self.hop_pp,
        ]
    }
}

/// The point-to-point hop between neighbours of group `g` (CP ring, pipeline): inside a node
/// when the whole group is, across nodes otherwise.
pub(super) fn hop(g: GroupPlacement) -> GroupPlacement {
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
}

impl Evaluator {
    pub(super) fn ctx(&self, plan: &Plan) -> Ctx {
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
        let order = plan.order.0;
        let dense = order.map(dense_deg);
        // Megatron's parallel folding (`Plan::moe_degree`).
        let moe = order.map(|d| plan.moe_degree(d));
        // The groups are the grids' alone (and the cluster's): kept per thread, as every plan
        // of a degree choice and rank order asks for the same.
        let key = GroupsKey {
            evaluator: self.cache_id,
            dense,
            moe,
            order: plan.order,
        };
        let [g_tp, g_cp, g_dp, g_pp, g_mt, g_ep, g_edp] =
            cached(&GROUPS_CACHE, key.slot(), key, || {
                let sel = |dims: &[Dim]| order.map(|d| dims.contains(&d));
                // Groups are placed on NVLink domains (a host, or an NVL72 rack of 18 hosts),
                // as many GPUs of each as the job's grids align with
                // (`Cluster::job_domain_gpus`).
                let gpn = self.cluster.job_domain_gpus(&[&dense[..], &moe[..]]);
                [
                    GroupPlacement::of(gpn, &dense, &sel(&[Dim::Tp])),
                    GroupPlacement::of(gpn, &dense, &sel(&[Dim::Cp])),
                    GroupPlacement::of(gpn, &dense, &sel(&[Dim::Cp, Dim::Dp])),
                    GroupPlacement::of(gpn, &dense, &sel(&[Dim::Pp])),
                    GroupPlacement::of(gpn, &moe, &sel(&[Dim::Tp])),
                    GroupPlacement::of(gpn, &moe, &sel(&[Dim::Cp])),
                    GroupPlacement::of(gpn, &moe, &sel(&[Dim::Dp])),
                ]
            });
        Ctx {
            g_tp,
            g_cp,
            g_dp,
            g_ep,
            g_mt,
            g_edp,
            hop_cp: hop(g_cp),
            hop_pp: hop(g_pp),
            ..self.ctx_ungrouped(plan)
        }
    }

    /// [`Evaluator::ctx`] with every group a single rank: the degrees, tokens, micro-batches
    /// and routing figures alone, for what reads no group (`class_compute`, whose cache keys
    /// on none: `ComputeKey`). Placing the groups is most of a context's cost.
    pub(super) fn ctx_ungrouped(&self, plan: &Plan) -> Ctx {
        let tp = plan.tp.max(1);
        let cp = plan.cp.max(1);
        let dp = plan.dp.max(1);
        let one = GroupPlacement {
            size: 1,
            ranks_per_node: 1,
            nodes: 1,
        };
        let mbs = plan.mbs.max(1) as f64;
        let m_tok = mbs * self.seq / cp as f64;
        let ep_imb = self.ep_imbalance(plan);
        let micro = (self.global_batch / (plan.mbs.max(1) * dp)).max(1) as f64;
        Ctx {
            tp: tp as f64,
            cp: cp as f64,
            pp: plan.pp.max(1),
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
            replicas: self.mem.replicas_per_gpu(plan),
            sp: plan.sp || tp == 1,
            algo: plan.algo,
            g_tp: one,
            g_cp: one,
            g_dp: one,
            g_ep: one,
            g_mt: one,
            g_edp: one,
            hop_cp: one,
            hop_pp: one,
        }
    }

    /// One collective's cost; nothing for a one-rank group or no bytes.
    #[inline]
    pub(super) fn coll(
        &self,
        op: Collective,
        g: GroupPlacement,
        bytes: f64,
        algo: AlgoMode,
    ) -> CollectiveCost {
        if g.size <= 1 || bytes <= 0.0 {
            return CollectiveCost::ZERO;
        }
        let key = CollKey {
            evaluator: self.cache_id,
            op,
            group: g,
            bytes: bytes.to_bits(),
            algo,
        };
        cached(&COLL_CACHE, key.slot(), key, || {
            self.cost.collective(op, g, bytes, algo)
        })
    }
}

/// A direct-mapped cache's slots: each empty or one key with its value.
pub(super) type Slots<K, V, const N: usize> = [RefCell<Option<(K, V)>>; N];

/// The value of `key` in slot `slot` of the direct-mapped per-thread cache `cache`, computed by
/// `f` (and kept) where the slot holds another key. Exact keys: a hit is what `f` gives. The
/// key is compared in place; only a hit's value is copied out.
#[inline]
pub(super) fn cached<K: PartialEq + 'static, V: Copy + 'static, const N: usize>(
    cache: &'static std::thread::LocalKey<Slots<K, V, N>>,
    slot: usize,
    key: K,
    f: impl FnOnce() -> V,
) -> V {
    cache.with(|c| {
        let cell = &c[slot];
        if let Some((k, v)) = &*cell.borrow() {
            if *k == key {
                return *v;
            }
        }
        let v = f();
        *cell.borrow_mut() = Some((key, v));
        v
    })
}

/// A plan as one of the evaluator's per-thread caches reads it (the caller's view of it, with
/// the knobs it does not read at their defaults) and the evaluator, compared exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct PlanKey {
    pub(super) evaluator: u64,
    pub(super) plan: Plan,
}

impl PlanKey {
    /// The key's slot in a cache of `1 << bits` ([`plan_slot`]).
    #[inline]
    pub(super) fn slot(&self, bits: u32) -> usize {
        plan_slot(self.evaluator, &self.plan, bits)
    }
}

/// The direct-mapped slot (of `1 << bits`) of a per-thread cache keyed by an evaluator and a
/// plan: a multiplicative hash of the fields a search varies (equal keys share a slot, which
/// is all a cache needs; fields a key sets aside hash as their defaults).
#[inline]
pub(super) fn plan_slot(evaluator: u64, p: &Plan, bits: u32) -> usize {
    let cp_comm = match p.cp_comm {
        CpComm::Ring => 0,
        CpComm::AllToAll => 1,
        CpComm::AllGather => 2,
        CpComm::Hierarchical { a2a } => 3 + a2a,
    };
    let placement = match p.placement {
        PlacementPolicy::Contiguous => 0,
        PlacementPolicy::Balanced { redundant } => 1 + redundant,
    };
    let order = p.order.0.iter().fold(0, |h, &d| h << 2 | d as u32);
    let mut h = evaluator;
    for v in [
        p.tp | p.cp << 8 | p.pp << 16,
        p.dp,
        p.ep | p.moe_tp << 12 | p.mbs << 20,
        p.vpp | order << 8 | cp_comm << 16,
        p.recompute as u32 | u32::from(p.recompute_modules.0) << 4,
        p.schedule as u32
            | (p.dispatcher as u32) << 4
            | (p.tp_sp_transition as u32) << 8
            | (p.moe_tp_scheme as u32) << 12
            | u32::from(p.sp) << 16
            | u32::from(p.tp_overlap) << 17
            | u32::from(p.ep_overlap) << 18,
        placement ^ p.recompute_layers.unwrap_or(0) << 8,
        u32::from(p.zero.stage) | p.zero.group << 4,
        p.offload_activations ^ u32::from(p.offload_optimizer) << 24,
    ] {
        h = fx_step(h, u64::from(v));
    }
    (h >> (64 - bits)) as usize
}

/// FxHash's step: `v` mixed into all the bits of `h` (the caches' keys are exact, so no keyed
/// hash is needed).
#[inline]
pub(super) fn fx_step(h: u64, v: u64) -> u64 {
    (h.rotate_left(5) ^ v).wrapping_mul(0x517C_C1B7_2722_0A95)
}

/// A group placement as one word (size, ranks per node, nodes), for the caches' hashes.
#[inline]
pub(super) fn group_word(g: GroupPlacement) -> u64 {
    u64::from(g.size) << 40 ^ u64::from(g.ranks_per_node) << 20 ^ u64::from(g.nodes)
}

/// Evaluators made so far: each takes the next number as its cache key.
static CACHE_IDS: AtomicU64 = AtomicU64::new(0);

/// A fresh key for a new evaluator's entries in the collective cache.
pub(super) fn next_cache_id() -> u64 {
    CACHE_IDS.fetch_add(1, Ordering::Relaxed)
}

/// A plan's grids as `ctx` places its groups: the evaluator (its cluster), the dense and
/// MoE degrees in rank order, and the order.
#[derive(Debug, Clone, Copy, PartialEq)]
struct GroupsKey {
    evaluator: u64,
    dense: [u32; 4],
    moe: [u32; 4],
    order: RankOrder,
}

impl GroupsKey {
    /// The direct-mapped slot of the key (a multiplicative hash of its fields).
    #[inline]
    fn slot(&self) -> usize {
        let mut h = self.evaluator;
        for (i, (d, m)) in self.dense.iter().zip(self.moe).enumerate() {
            h ^= (u64::from(*d) | u64::from(m) << 32).rotate_left(13 * i as u32);
        }
        h ^= self.order.0.iter().fold(0, |h, &d| h << 2 | d as u64) << 56;
        h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> (64 - GROUPS_CACHE_BITS)) as usize
    }
}

/// log2 of the group cache's slots: the search's work floor asks for the groups of every task
/// root (thousands of degree tuples and rank orders), in the order of their compute.
const GROUPS_CACHE_BITS: u32 = 10;

thread_local! {
    /// The seven groups of the grids placed on this thread (exact keys).
    static GROUPS_CACHE: Slots<GroupsKey, [GroupPlacement; 7], { 1 << GROUPS_CACHE_BITS }> =
        const { [const { RefCell::new(None) }; 1 << GROUPS_CACHE_BITS] };
}

/// A collective as priced: the evaluator (its cluster and cost model), the primitive, the group,
/// the exact bytes and the algorithm mode — everything `CostModel::collective` reads.
#[derive(Debug, Clone, Copy, PartialEq)]
struct CollKey {
    evaluator: u64,
    op: Collective,
    group: GroupPlacement,
    bytes: u64,
    algo: AlgoMode,
}

impl CollKey {
    /// The direct-mapped slot of the key (a multiplicative hash of its fields).
    #[inline]
    fn slot(&self) -> usize {
        let mut h = self.evaluator ^ self.bytes.rotate_left(17);
        h ^= group_word(self.group);
        h ^= (self.op as u64) << 56;
        h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> (64 - COLL_CACHE_BITS)) as usize
    }
}

/// log2 of the cache's slots.
const COLL_CACHE_BITS: u32 = 8;

thread_local! {
    /// Collectives priced on this thread, across evaluations: the plans of one search repeat
    /// the same collectives on the same groups (every leaf-knob variant of a degree choice,
    /// every plan's floor), and `CostModel::collective` compares every algorithm each time.
    /// Exact keys, so a hit returns what pricing again would, bit for bit.
    static COLL_CACHE: Slots<CollKey, CollectiveCost, { 1 << COLL_CACHE_BITS }> =
        const { [const { RefCell::new(None) }; 1 << COLL_CACHE_BITS] };
}
