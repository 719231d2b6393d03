//! What the search's tests on real bundled models share: random plans of a space.

use autoplan_evaluate::Evaluator;
use autoplan_plan::{PlacementPolicy, Plan, Recompute, RecomputeModules, Schedule};
use autoplan_search::{Depth, Space};
use proptest::prelude::*;

/// `v[i]`, the index scaled to the list.
pub fn pick<T: Copy>(v: &[T], i: &prop::sample::Index) -> T {
    v[i.index(v.len())]
}

/// `space` with Megatron's recompute module sets added: DeepSeek-V3's (norms, MLA
/// up-projections, SwiGLU output; invalid without MLA: those plans are skipped), the ModelZoo's
/// (norms, expert activation), whole MLP and MoE layers, and every module.
#[allow(dead_code)]
pub fn with_module_sets(mut space: Space) -> Space {
    use RecomputeModules as M;
    for set in [
        M::LAYERNORM | M::MLA_UP_PROJ | M::MOE_ACT,
        M::LAYERNORM | M::MOE_ACT,
        M::MOE | M::MLP,
        M::ALL.0,
    ] {
        space.recompute.push((Recompute::Selective, M(set)));
    }
    space.recompute.sort();
    space.recompute.dedup();
    space
}

/// A random plan of `space` using all GPUs, or None if the degrees do not divide them.
pub fn random_plan(ev: &Evaluator, space: &Space, ix: &[prop::sample::Index]) -> Option<Plan> {
    let moe = ev.model().moe.is_some();
    let gpus = ev.cluster().gpus();
    // EP degrees dividing the experts (the others are invalid plans: nothing to check).
    let experts = ev.model().moe.as_ref().map_or(1, |m| m.experts);
    let eps: Vec<u32> = space
        .ep
        .iter()
        .copied()
        .filter(|e| experts.is_multiple_of(*e))
        .collect();
    let mut plan = Plan {
        tp: pick(&space.tp, &ix[0]),
        pp: pick(&space.pp, &ix[1]),
        cp: pick(&space.cp, &ix[2]),
        ep: if moe { pick(&eps, &ix[3]) } else { 1 },
        moe_tp: if moe { pick(&space.moe_tp, &ix[4]) } else { 1 },
        mbs: pick(&space.mbs, &ix[5]),
        recompute: pick(&space.recompute, &ix[6]).0,
        recompute_modules: pick(&space.recompute, &ix[6]).1,
        zero: pick(&space.zero, &ix[7]),
        schedule: pick(&space.schedule, &ix[8]),
        sp: pick(&space.sp, &ix[10]),
        cp_comm: pick(&space.cp_comm, &ix[11]),
        tp_sp_transition: pick(&space.tp_sp_transition, &ix[12]),
        moe_tp_scheme: pick(&space.moe_tp_scheme, &ix[13]),
        dispatcher: pick(&space.dispatcher, &ix[14]),
        order: pick(&space.order, &ix[15]),
        tp_overlap: pick(&space.tp_overlap, &ix[16]),
        ep_overlap: pick(&space.ep_overlap, &ix[17]),
        placement: if moe {
            pick(&space.placement, &ix[18])
        } else {
            PlacementPolicy::Contiguous
        },
        ..Plan::default()
    };
    if plan.schedule == Schedule::Interleaved {
        plan.vpp = pick(&space.vpp, &ix[9]);
    }
    let rest = plan.tp * plan.cp * plan.pp;
    if !gpus.is_multiple_of(rest) {
        return None;
    }
    plan.dp = gpus / rest;
    Some(plan)
}

/// `plan` cut down to `depth`: the decisions below it back at the space's first values, and
/// the leaf knobs those of `leaves` (the engine's partial plans hold whatever leaf values were
/// tried last: a bound must not read them).
#[allow(dead_code)]
/// `plan` with every leaf knob at the space's first value.
pub fn first_leaves(plan: &Plan, space: &Space) -> Plan {
    Plan {
        sp: space.sp[0],
        cp_comm: space.cp_comm[0],
        tp_sp_transition: space.tp_sp_transition[0],
        moe_tp_scheme: space.moe_tp_scheme[0],
        dispatcher: space.dispatcher[0],
        algo: space.algo[0],
        order: space.order[0],
        tp_overlap: space.tp_overlap[0],
        ep_overlap: space.ep_overlap[0],
        placement: space.placement[0],
        ..*plan
    }
}

pub fn partial(plan: &Plan, leaves: &Plan, space: &Space, depth: Depth) -> Plan {
    let mut p = *plan;
    if depth < Depth::Recompute {
        (p.recompute, p.recompute_modules) = space.recompute[0];
    }
    if depth < Depth::Zero {
        p.zero = space.zero[0];
    }
    if depth < Depth::Schedule {
        p.schedule = space.schedule[0];
        p.vpp = 1;
    }
    p.sp = leaves.sp;
    p.cp_comm = leaves.cp_comm;
    p.tp_sp_transition = leaves.tp_sp_transition;
    p.moe_tp_scheme = leaves.moe_tp_scheme;
    p.dispatcher = leaves.dispatcher;
    p.algo = leaves.algo;
    p.order = leaves.order;
    p.tp_overlap = leaves.tp_overlap;
    p.ep_overlap = leaves.ep_overlap;
    p.placement = leaves.placement;
    p
}
