//! A search space restricted to what a framework runs (`--framework`): the capability table of
//! `autoplan_plan::framework` applied to the space's lists before the search starts, so a
//! value the framework never runs is not enumerated; the rules that depend on the whole plan
//! (EP overlap with pp > 1 without virtual stages, ZeRO-2/3 with pipelining, ...) are checked
//! on each complete plan by the [`crate::Scorer`], which rejects what the framework refuses.
//! Pruning stays exact: the bounds are lower bounds over a superset of the runnable plans.

use autoplan_plan::framework::Capabilities;
use autoplan_plan::knob::{cp_comm_name, DISPATCHERS, MOE_TP_SCHEMES, SCHEDULES, TRANSITIONS};
use autoplan_plan::{CpComm, Dim, Framework, PlacementPolicy, Recompute, RecomputeModules, Zero};

use crate::Space;

/// `space` without the values `framework` never runs, with `false` added to the overlap lists
/// where the framework refuses the overlap for some plans (so those plans keep a runnable
/// variant). An error names the first list left empty.
pub fn restrict(space: &Space, framework: Framework) -> Result<Space, String> {
    if framework == Framework::Any {
        return Ok(space.clone());
    }
    let c = framework.capabilities();
    let mut s = space.clone();
    let empty = |what: &str, listed: String| {
        format!(
            "{framework} runs none of the space's {what} ({listed}); try --framework any or \
             another space (docs/frameworks.md)"
        )
    };
    keep(&mut s.schedule, |x| c.schedules.contains(x));
    if s.schedule.is_empty() {
        return Err(empty(
            "schedules",
            names(&space.schedule, |x| SCHEDULES.name(*x).to_string()),
        ));
    }
    keep(&mut s.cp_comm, |x| cp_ok(&c, *x));
    if s.cp_comm.is_empty() {
        // Only matters with cp > 1: keep cp = 1 plans.
        s.cp_comm = space.cp_comm.clone();
        s.cp.retain(|&x| x == 1);
        if s.cp.is_empty() {
            return Err(empty(
                "CP exchanges",
                names(&space.cp_comm, |x| cp_comm_name(*x)),
            ));
        }
    }
    keep(&mut s.tp_sp_transition, |x| c.transitions.contains(x));
    if s.tp_sp_transition.is_empty() {
        return Err(empty(
            "TP→SP transitions",
            names(&space.tp_sp_transition, |x| {
                TRANSITIONS.name(*x).to_string()
            }),
        ));
    }
    keep(&mut s.moe_tp_scheme, |x| c.moe_tp_schemes.contains(x));
    if s.moe_tp_scheme.is_empty() {
        // Only matters with moe_tp > 1 (`MOE_TP_SCHEMES`: scatter-gather, group-all-to-all).
        let _ = MOE_TP_SCHEMES;
        s.moe_tp_scheme = space.moe_tp_scheme.clone();
        s.moe_tp.retain(|&x| x == 1);
    }
    keep(&mut s.dispatcher, |x| c.dispatchers.contains(x));
    if s.dispatcher.is_empty() {
        return Err(empty(
            "dispatchers",
            names(&space.dispatcher, |x| DISPATCHERS.name(*x).to_string()),
        ));
    }
    if !c.balanced_placement {
        keep(&mut s.placement, |p| *p == PlacementPolicy::Contiguous);
        if s.placement.is_empty() {
            return Err(empty("expert placements", "balanced only".into()));
        }
    }
    if !c.rank_orders.is_empty() {
        keep(&mut s.order, |o| c.rank_orders.contains(&o.0));
        if s.order.is_empty() {
            // The order of a plan is judged by its class (dims of size 1 dropped): an order
            // the framework does not name can still equal one it runs for some plans.
            s.order = space.order.clone();
            if !s.order.iter().any(|o| o.0.contains(&Dim::Tp)) {
                return Err(empty("rank orders", names(&space.order, |o| o.to_string())));
            }
        }
    }
    keep(&mut s.zero, |z| zero_possible(&c, *z));
    if s.zero.is_empty() {
        return Err(empty("sharding modes", names(&space.zero, |z| z.name())));
    }
    keep(&mut s.recompute, |r| recompute_ok(&c, *r));
    if s.recompute.is_empty() {
        return Err(empty(
            "recompute modes",
            names(&space.recompute, |r| format!("{:?}:{:?}", r.0, r.1)),
        ));
    }
    if !c.expert_parallel {
        s.ep.retain(|&x| x == 1);
        s.moe_tp.retain(|&x| x == 1);
        if s.ep.is_empty() || s.moe_tp.is_empty() {
            return Err(empty("expert degrees", "ep/moe_tp > 1 only".into()));
        }
    }
    if c.sp_always_with_tp && s.sp.contains(&true) {
        s.sp = vec![true];
    }
    // The overlaps: off where never run; `false` added where refused for some plans.
    if !c.tp_overlap {
        s.tp_overlap = vec![false];
    } else if c.tp_overlap_needs_sp && s.sp.contains(&false) {
        with_false(&mut s.tp_overlap);
    }
    let e = &c.ep_overlap;
    if !e.supported {
        s.ep_overlap = vec![false];
    } else if e.only_schedule.is_some()
        || e.pp_needs_vpp
        || e.no_full_recompute
        || e.no_moe_recompute
        || e.no_all_gather_dispatcher
        || e.needs_ep
        || e.no_recompute
    {
        with_false(&mut s.ep_overlap);
    }
    // Optimizer offload: none where the framework never runs it (no offload is always a
    // plan); the rules that depend on the ZeRO stage are the leaf check's. A framework that
    // offloads the optimizer only with the parameters (torchtitan) offloads it only where the
    // space offloads parameters.
    let o = c.offload;
    if !o.optimizer || o.together && !(o.params && s.offload_params.contains(&true)) {
        s.offload_optimizer = vec![0];
    } else if (o.needs_zero1 || o.needs_zero || o.partial_needs_zero3 || o.together)
        && !s.offload_optimizer.contains(&0)
    {
        s.offload_optimizer.insert(0, 0);
    }
    // Parameter offload: none where never run; off kept beside on (it needs ZeRO-3 and the
    // whole optimizer on the host, `Plan::check`).
    if !o.params {
        s.offload_params = vec![false];
    } else {
        with_false(&mut s.offload_params);
    }
    // Activation offload: none where never run; `all` dropped where every layer cannot be
    // offloaded (Megatron-Core: N < num_layers), counts dropped where only `all` can
    // (DeepSpeed's `cpu_checkpointing`); none kept beside the rest (the recompute and pipeline
    // rules are the leaf check's).
    let all = autoplan_plan::offload_activations::ALL;
    let listed = names(&space.offload_activations, |&n| {
        autoplan_plan::offload_activations::name(n)
    });
    if !o.activations {
        s.offload_activations.retain(|&n| n == 0);
    } else {
        if o.activations_below_all {
            s.offload_activations.retain(|&n| n != all);
        }
        if o.activations_checkpoints {
            s.offload_activations.retain(|&n| n == 0 || n == all);
        }
    }
    if s.offload_activations.is_empty() {
        return Err(empty("activation offloads", listed));
    }
    if o.activations && s.offload_activations.first() != Some(&0) {
        s.offload_activations.insert(0, 0);
    }
    Ok(s)
}

fn keep<T>(list: &mut Vec<T>, ok: impl Fn(&T) -> bool) {
    list.retain(|x| ok(x));
}

fn with_false(list: &mut Vec<bool>) {
    if !list.contains(&false) {
        list.insert(0, false);
    }
}

fn names<T>(list: &[T], f: impl Fn(&T) -> String) -> String {
    list.iter().map(f).collect::<Vec<_>>().join(", ")
}

fn cp_ok(c: &Capabilities, x: CpComm) -> bool {
    match x {
        CpComm::Ring => c.cp.ring,
        CpComm::AllToAll => c.cp.all_to_all,
        CpComm::AllGather => c.cp.all_gather,
        CpComm::Hierarchical { .. } => c.cp.hierarchical,
    }
}

/// Whether some plan could run `z` (the plan-dependent rules are the leaf check's).
fn zero_possible(c: &Capabilities, z: Zero) -> bool {
    let s = &c.sharding;
    match (z.stage, z.group > 0) {
        // Plain data parallelism, or no data parallelism at all: always a plan.
        (0, _) => true,
        (1, false) => s.zero1 || s.pp_once_per_step,
        (1, true) => s.hsdp1 || s.pp_once_per_step,
        (2, false) => s.zero2,
        (3, false) if z.keeps_gathered() => s.zero3_noreshard,
        (3, false) => s.zero3,
        (3, true) => s.hsdp3,
        _ => false,
    }
}

fn recompute_ok(c: &Capabilities, (r, m): (Recompute, RecomputeModules)) -> bool {
    match r {
        Recompute::None | Recompute::Full => true,
        Recompute::Selective => c.selective_recompute && m.0 & !c.recompute_modules == 0,
    }
}
