//! The per-plan context every part reads: the degrees, the token counts of one micro-batch and
//! where each communication group sits on the cluster.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use autoplan_cluster::GroupPlacement;
use autoplan_cost::{AlgoMode, Collective, CollectiveCost};
use autoplan_plan::{Dim, Plan};

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
        // Groups are placed on NVLink domains (a host, or an NVL72 rack of 18 hosts), as many
        // GPUs of each as the job's grids align with (`Cluster::job_domain_gpus`).
        let gpn = self.cluster.job_domain_gpus(&[&dense[..], &moe[..]]);
        let g_tp = GroupPlacement::of(gpn, &dense, &sel(&[Dim::Tp]));
        let g_cp = GroupPlacement::of(gpn, &dense, &sel(&[Dim::Cp]));
        let g_dp = GroupPlacement::of(gpn, &dense, &sel(&[Dim::Cp, Dim::Dp]));
        let g_pp = GroupPlacement::of(gpn, &dense, &sel(&[Dim::Pp]));
        let g_mt = GroupPlacement::of(gpn, &moe, &sel(&[Dim::Tp]));
        let g_ep = GroupPlacement::of(gpn, &moe, &sel(&[Dim::Cp]));
        let g_edp = GroupPlacement::of(gpn, &moe, &sel(&[Dim::Dp]));
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
            replicas: self.mem.replicas_per_gpu(plan),
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
pub(super) type Slots<K, V, const N: usize> = [Cell<Option<(K, V)>>; N];

/// The value of `key` in slot `slot` of the direct-mapped per-thread cache `cache`, computed by
/// `f` (and kept) where the slot holds another key. Exact keys: a hit is what `f` gives.
#[inline]
pub(super) fn cached<K: Copy + PartialEq + 'static, V: Copy + 'static, const N: usize>(
    cache: &'static std::thread::LocalKey<Slots<K, V, N>>,
    slot: usize,
    key: K,
    f: impl FnOnce() -> V,
) -> V {
    cache.with(|c| {
        let cell = &c[slot];
        match cell.get() {
            Some((k, v)) if k == key => v,
            _ => {
                let v = f();
                cell.set(Some((key, v)));
                v
            }
        }
    })
}

/// Evaluators made so far: each takes the next number as its cache key.
static CACHE_IDS: AtomicU64 = AtomicU64::new(0);

/// A fresh key for a new evaluator's entries in the collective cache.
pub(super) fn next_cache_id() -> u64 {
    CACHE_IDS.fetch_add(1, Ordering::Relaxed)
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
        h ^= (u64::from(self.group.size) << 40)
            ^ (u64::from(self.group.ranks_per_node) << 20)
            ^ u64::from(self.group.nodes);
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
    static COLL_CACHE: [Cell<Option<(CollKey, CollectiveCost)>>; 1 << COLL_CACHE_BITS] =
        const { [const { Cell::new(None) }; 1 << COLL_CACHE_BITS] };
}
