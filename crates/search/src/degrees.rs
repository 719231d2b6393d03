//! The degree tuples a search enumerates (`pp → tp → ep → moe_tp → cp`, dp what is left) and
//! what each implies for the levels below it: the sharding modes, (schedule, vpp) pairs and
//! leaf-knob values that differ there ([`Knob::matters`]), and the plan key's mixed radix.

use autoplan_plan::knob::{Context, Knob};
use autoplan_plan::Schedule;
use rayon::prelude::*;

use crate::{Shape, Space};

/// The degree knobs a task fixes, in [`Knob::KEY_ORDER`]'s order (`dp` is what is left).
pub(crate) const DEGREE_KNOBS: [Knob; 5] = [Knob::Pp, Knob::Tp, Knob::Ep, Knob::MoeTp, Knob::Cp];
/// The leaf knobs of the odometer, [`Knob::LEAVES`].
pub(crate) const NLEAF: usize = Knob::LEAVES.len();

/// The position of leaf knob `k` in [`Knob::LEAVES`] (a compile-time error in a constant if
/// `k` is not a leaf).
const fn leaf(k: Knob) -> usize {
    let mut i = 0;
    while i < NLEAF {
        if Knob::LEAVES[i] as usize == k as usize {
            return i;
        }
        i += 1;
    }
    NLEAF
}

/// The placement's position among the leaves (its first value bounds the subtree's memory).
pub(crate) const PLACE: usize = leaf(Knob::Placement);

/// One valid degree tuple and what it implies for the levels below it.
#[derive(Debug, Clone)]
pub(crate) struct Degrees {
    pub(crate) pp: u32,
    pub(crate) tp: u32,
    pub(crate) ep: u32,
    pub(crate) moe_tp: u32,
    pub(crate) cp: u32,
    pub(crate) dp: u32,
    /// Space-list indices of the [`DEGREE_KNOBS`].
    pub(crate) idx: [usize; 5],
    /// Space-list indices of the sharding modes that differ here: all, or where nothing is
    /// data-parallel the first one valid at these degrees (an HSDP shard group needs `dp·cp`
    /// ranks to shard over: `Plan::check`; found by the oracle, `tests/oracle.rs`).
    pub(crate) zeros: Vec<usize>,
    /// (schedule index, vpp index; `None` where the schedule has no virtual stages).
    pub(crate) schedules: Vec<(usize, Option<usize>)>,
    /// Allowed space-list indices per leaf knob, in [`Knob::LEAVES`] order (the rank order:
    /// the first of each [`Context::order_class`]).
    pub(crate) knobs: [Vec<usize>; NLEAF],
    /// Leaf knobs that can change this plan's numbers ([`Knob::matters`]); the others are set
    /// to `Plan::default()`'s value so the printed plan does not mention them.
    pub(crate) relevant: [bool; NLEAF],
    pub(crate) knob_product: u64,
}

/// The plan key: a mixed-radix number with one digit per knob of [`Knob::KEY_ORDER`], most
/// significant first, the digit being the value's index in the space's full list (no
/// collapse); the vpp digit is 0 for a schedule without virtual stages and `i + 1` for the
/// space's `i`-th vpp.
pub(crate) struct KeyRadix {
    /// Stride of each knob's digit, by `Knob as usize` (0 for the knobs a search does not
    /// decide).
    pub(crate) stride: [u128; Knob::ALL.len()],
}

impl KeyRadix {
    pub(crate) fn new(s: &Space) -> KeyRadix {
        let mut stride = [0u128; Knob::ALL.len()];
        let mut acc: u128 = 1;
        for &k in Knob::KEY_ORDER.iter().rev() {
            let size = match k {
                Knob::Vpp => s.vpp.len() + 1,
                _ => s.count(k),
            };
            stride[k as usize] = acc;
            acc = acc.saturating_mul(size.max(1) as u128);
        }
        KeyRadix { stride }
    }

    /// The key digit of `k`'s `i`-th space value.
    #[inline]
    pub(crate) fn digit(&self, k: Knob, i: usize) -> u128 {
        i as u128 * self.stride[k as usize]
    }

    /// The vpp digit of a (schedule, vpp) pair.
    pub(crate) fn vpp_digit(&self, vpp: Option<usize>) -> u128 {
        vpp.map_or(0, |i| self.digit(Knob::Vpp, i + 1))
    }
}

/// The space's rank orders that differ for the plan (the first of each order class).
fn orders_for(space: &Space, ctx: &Context) -> Vec<usize> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (i, o) in space.order.iter().enumerate() {
        let r = ctx.order_class(o);
        if !seen.contains(&r) {
            seen.push(r);
            out.push(i);
        }
    }
    out
}

pub(crate) fn degree_tuples(space: &Space, shape: &Shape) -> Vec<Degrees> {
    let gpus = shape.gpus;
    let gpn = shape.gpus_per_node.max(1);
    let moe = shape.experts > 0;
    let c = &space.constraints;
    let in_node = |x: u32| x <= gpn && gpn.is_multiple_of(x);
    let mut out = Vec::new();
    for (ip, &pp) in space.pp.iter().enumerate() {
        if pp > shape.layers || !gpus.is_multiple_of(pp) || c.max_pp.is_some_and(|m| pp > m) {
            continue;
        }
        for (it, &tp) in space.tp.iter().enumerate() {
            if !shape.heads.is_multiple_of(tp)
                || !(gpus / pp).is_multiple_of(tp)
                || c.tp_within_node && !in_node(tp)
            {
                continue;
            }
            // A dense model has no expert degrees: ep = moe_tp = 1 (the first index).
            let eps: Vec<(usize, u32)> = if moe {
                space.ep.iter().copied().enumerate().collect()
            } else {
                vec![(0, 1)]
            };
            let mts: Vec<(usize, u32)> = if moe {
                space.moe_tp.iter().copied().enumerate().collect()
            } else {
                vec![(0, 1)]
            };
            for &(ie, ep) in &eps {
                if moe && !shape.experts.is_multiple_of(ep) {
                    continue;
                }
                for &(im, mt) in &mts {
                    if c.moe_tp_within_node && !in_node(mt) || c.ep_within_node && !in_node(ep * mt)
                    {
                        continue;
                    }
                    for (ic, &cp) in space.cp.iter().enumerate() {
                        let rest = gpus / pp / tp;
                        if !rest.is_multiple_of(cp) {
                            continue;
                        }
                        let dp = rest / cp;
                        if space.dp.is_some_and(|d| d != dp) {
                            continue;
                        }
                        // Megatron's parallel folding: ep·moe_tp divides tp·cp·dp.
                        if !(tp * cp * dp).is_multiple_of(ep * mt) {
                            continue;
                        }
                        out.push(([pp, tp, ep, mt, cp, dp], [ip, it, ie, im, ic]));
                    }
                }
            }
        }
    }
    // What each tuple implies, worked out in parallel (thousands of tuples, each with its
    // lists), in the enumeration's order.
    out.into_par_iter()
        .map(|(d, idx)| degrees(space, shape, d, idx))
        .collect()
}

fn degrees(space: &Space, shape: &Shape, d: [u32; 6], idx: [usize; 5]) -> Degrees {
    let [pp, tp, ep, moe_tp, cp, dp] = d;
    let ctx = Context {
        tp,
        cp,
        dp,
        pp,
        ep,
        moe_tp,
        schedule: Schedule::OneF1B,
        moe: shape.experts > 0,
    };
    let zeros = if Knob::Zero.matters(&ctx) {
        (0..space.zero.len()).collect()
    } else {
        // Nothing to shard over: every mode without a shard group prices alike — but
        // parameter offload needs a ZeRO-3 shard (`Plan::check`), so where the space offers
        // it the first stage-3 mode stays too (found by the oracle, `tests/oracle.rs`).
        let first = space.zero.iter().position(|z| z.group == 0).unwrap_or(0);
        let mut zeros = vec![first];
        if space.offload_params.contains(&true) {
            let third = space
                .zero
                .iter()
                .position(|z| z.group == 0 && z.shards_params());
            if let Some(i) = third.filter(|&i| i != first) {
                zeros.push(i);
            }
        }
        zeros
    };
    let mut schedules = Vec::new();
    if !Knob::Schedule.matters(&ctx) {
        // Without a pipeline every schedule that is valid prices alike: take the space's
        // first one that is (interleaved needs pp > 1, DualPipe an even pp ≥ 2:
        // `Plan::check`), not its first entry, which may be invalid here (found by the
        // oracle, `tests/oracle.rs`).
        let valid = space
            .schedule
            .iter()
            .position(|s| matches!(s, Schedule::OneF1B | Schedule::ZeroBubble));
        schedules.push((valid.unwrap_or(0), None));
    } else {
        for (i, &schedule) in space.schedule.iter().enumerate() {
            if Knob::Vpp.matters(&Context { schedule, ..ctx }) {
                for (v, &vpp) in space.vpp.iter().enumerate() {
                    if pp * vpp <= shape.layers {
                        schedules.push((i, Some(v)));
                    }
                }
            } else {
                schedules.push((i, None));
            }
        }
    }
    let relevant = Knob::LEAVES.map(|k| k.matters(&ctx));
    let knobs: [Vec<usize>; NLEAF] = std::array::from_fn(|d| match Knob::LEAVES[d] {
        Knob::Order => orders_for(space, &ctx),
        k if relevant[d] => (0..space.count(k)).collect(),
        _ => vec![0],
    });
    let knob_product = knobs.iter().map(|k| k.len() as u64).product();
    Degrees {
        pp,
        tp,
        ep,
        moe_tp,
        cp,
        dp,
        idx,
        zeros,
        schedules,
        knobs,
        relevant,
        knob_product,
    }
}
