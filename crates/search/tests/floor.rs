//! The communication floor (`Evaluator::step_floor`) on real bundled models: below the step
//! time of every plan it covers, equal to it when nothing is left open, and the search that
//! cuts with it finds what exhaustive enumeration finds on a small MoE case with every
//! communication knob open.

use autoplan_cluster::Cluster;
use autoplan_cost::calibration::{dgx_a100, dgx_h100, hgx_h800};
use autoplan_evaluate::{EvalOptions, Evaluator, OpenLists};
use autoplan_graph::resolve_model;
use autoplan_plan::{PlacementPolicy, Plan, Schedule};
use autoplan_search::{
    resolve_space, search, Depth, Objective, Partial, Reject, Scorer, SearchOptions, Space,
};
use proptest::prelude::*;

mod common;
use common::random_plan;

/// (model, cluster): DeepSeek-V3 on 2048 H800s, Mixtral 8x7B on 64 H100s, GPT-3 on 1024 A100s.
fn case(i: usize) -> (&'static str, Cluster) {
    match i {
        0 => ("deepseek-v3", hgx_h800(256)),
        1 => ("mixtral-8x7b", dgx_h100(8)),
        _ => ("gpt3-175b", dgx_a100(128)),
    }
}

/// An evaluator whose GPUs never run out of memory, so every valid plan has a step time (the
/// step time does not read the HBM size).
fn unbounded(i: usize) -> Evaluator {
    let (model, mut cluster) = case(i);
    cluster.gpu.hbm_bytes = 1e30;
    Evaluator::new(
        &resolve_model(model).expect("bundled model"),
        &cluster,
        EvalOptions::default(),
    )
}

/// `own`, then the other values of `all` whose bit is set in `mask`.
fn subset<T: Copy + PartialEq>(all: &[T], own: T, mask: u32) -> Vec<T> {
    let mut v = vec![own];
    for (i, x) in all.iter().enumerate() {
        if mask >> i & 1 == 1 && *x != own {
            v.push(*x);
        }
    }
    v
}

/// The open lists of a floor: each the plan's own value, then the space's values whose bit is
/// set in the mask of the same position.
struct Lists {
    orders: Vec<autoplan_plan::RankOrder>,
    zeros: Vec<autoplan_plan::Zero>,
    tpsp: Vec<autoplan_plan::TpSpTransition>,
    cpc: Vec<autoplan_plan::CpComm>,
    disp: Vec<autoplan_plan::Dispatcher>,
    mts: Vec<autoplan_plan::MoeTpScheme>,
    schedules: Vec<(Schedule, u32)>,
    recomputes: Vec<(autoplan_plan::Recompute, autoplan_plan::RecomputeModules)>,
}

impl Lists {
    /// The plan's own value alone in every list.
    fn own(plan: &Plan) -> Lists {
        Lists {
            orders: vec![plan.order],
            zeros: vec![plan.zero],
            tpsp: vec![plan.tp_sp_transition],
            cpc: vec![plan.cp_comm],
            disp: vec![plan.dispatcher],
            mts: vec![plan.moe_tp_scheme],
            schedules: vec![(plan.schedule, plan.vpp)],
            recomputes: vec![(plan.recompute, plan.recompute_modules)],
        }
    }

    fn open(&self) -> OpenLists<'_> {
        OpenLists {
            orders: &self.orders,
            recomputes: &self.recomputes,
            schedules: &self.schedules,
            zeros: &self.zeros,
            tp_sp: &self.tpsp,
            cp_comm: &self.cpc,
            dispatchers: &self.disp,
            schemes: &self.mts,
        }
    }
}

fn lists(plan: &Plan, space: &Space, masks: &[u32]) -> Lists {
    let pairs = [
        (Schedule::OneF1B, 1),
        (Schedule::Interleaved, 2),
        (Schedule::Interleaved, 4),
        (Schedule::ZeroBubble, 1),
        (Schedule::DualPipe, 1),
    ];
    Lists {
        orders: subset(&space.order, plan.order, masks[0]),
        zeros: subset(&space.zero, plan.zero, masks[1]),
        tpsp: subset(&space.tp_sp_transition, plan.tp_sp_transition, masks[2]),
        cpc: subset(&space.cp_comm, plan.cp_comm, masks[3]),
        disp: subset(&space.dispatcher, plan.dispatcher, masks[4]),
        mts: subset(&space.moe_tp_scheme, plan.moe_tp_scheme, masks[5]),
        schedules: subset(&pairs, (plan.schedule, plan.vpp), masks[6]),
        recomputes: subset(
            &space.recompute,
            (plan.recompute, plan.recompute_modules),
            masks[7],
        ),
    }
}

/// The default space with both values of SP and the overlaps, and balanced placements.
fn wide_space() -> Space {
    let mut s = resolve_space("default").expect("bundled space");
    s.sp = vec![false, true];
    s.tp_overlap = vec![false, true];
    s.ep_overlap = vec![false, true];
    s.placement = vec![
        PlacementPolicy::Contiguous,
        PlacementPolicy::Balanced { redundant: 1 },
    ];
    common::with_module_sets(s)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// floor(plan, open lists holding the plan's own values and random others) ≤ the plan's
    /// step time; with only its own values the floor is the step time (less the 1e-12 margin).
    #[test]
    fn floor_is_admissible_and_exact_when_nothing_is_open(
        c in 0usize..3,
        ix in prop::collection::vec(any::<prop::sample::Index>(), 19),
        masks in prop::collection::vec(0u32..1024, 8),
    ) {
        let ev = unbounded(c);
        let space = wide_space();
        let Some(plan) = random_plan(&ev, &space, &ix) else { return Ok(()) };
        let Ok(m) = ev.evaluate(&plan) else { return Ok(()) };
        let t = m.step_time_s;
        let own = ev.step_floor(&plan, &Lists::own(&plan).open());
        prop_assert!(own <= t, "{own} > {t} for {plan}");
        prop_assert!((t - own) <= 2e-12 * t, "own-values floor {own} ≠ {t} for {plan}");
        let l = lists(&plan, &space, &masks);
        let f = ev.step_floor(&plan, &l.open());
        prop_assert!(f <= own, "{f} > {own} for {plan}: opening knobs raised the floor");
        prop_assert!(f > 0.0, "no floor for the valid {plan}");
        // The quick floor (no recompute, no once-per-step rest) is below the full one on the
        // same lists (the ZeRO stages all open), and still a floor.
        let quick = ev.step_floor_quick(&plan, &l.open());
        let all_zeros = ev.step_floor(&plan, &OpenLists { zeros: &space.zero, ..l.open() });
        prop_assert!(quick <= all_zeros, "quick {quick} > {all_zeros} for {plan}");
        prop_assert!(quick > 0.0, "no quick floor for the valid {plan}");
        // The compute floor (no communication) is below the quick one on any open lists.
        let compute = ev.step_floor_compute(&plan, &l.recomputes, &l.schedules);
        prop_assert!(compute <= quick, "compute {compute} > quick {quick} for {plan}");
        prop_assert!(compute > 0.0, "no compute floor for the valid {plan}");
        // The work floor (the model's compute spread evenly over the stages) is below that.
        let work = ev.step_floor_work(&plan);
        prop_assert!(work <= compute, "work {work} > compute {compute} for {plan}");
        prop_assert!(work > 0.0, "no work floor for the valid {plan}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Each entry of `floor_table` is `step_floor` with that (recompute, schedule, sharding)
    /// triple alone and the other lists open (bit for bit: the same operations), ∞ where the
    /// triple makes no valid plan; the plan's own entry is below its step time.
    #[test]
    fn floor_table_entries_are_the_single_triple_floors(
        c in 0usize..3,
        ix in prop::collection::vec(any::<prop::sample::Index>(), 19),
        masks in prop::collection::vec(0u32..1024, 8),
    ) {
        let ev = unbounded(c);
        let space = wide_space();
        let Some(plan) = random_plan(&ev, &space, &ix) else { return Ok(()) };
        let Ok(m) = ev.evaluate(&plan) else { return Ok(()) };
        let l = lists(&plan, &space, &masks);
        let (ns, nz) = (l.schedules.len(), l.zeros.len());
        let mut table = vec![f64::INFINITY; l.recomputes.len() * ns * nz];
        prop_assert!(ev.floor_table(&plan, &l.open(), &mut table));
        for (ri, &r) in l.recomputes.iter().enumerate() {
            for (si, &sv) in l.schedules.iter().enumerate() {
                for (zi, &z) in l.zeros.iter().enumerate() {
                    let q = Plan {
                        recompute: r.0,
                        recompute_modules: r.1,
                        schedule: sv.0,
                        vpp: sv.1,
                        zero: z,
                        ..plan
                    };
                    let one = OpenLists {
                        recomputes: &[r],
                        schedules: &[sv],
                        zeros: &[z],
                        ..l.open()
                    };
                    let f = ev.step_floor(&q, &one);
                    let e = table[(ri * ns + si) * nz + zi];
                    if f == 0.0 {
                        prop_assert!(e == f64::INFINITY, "{e} for the invalid {q}");
                    } else {
                        prop_assert!(e == f, "table {e} ≠ floor {f} for {q}");
                    }
                }
            }
        }
        let own = table[0];
        prop_assert!(own <= m.step_time_s, "own entry {own} > step {} for {plan}", m.step_time_s);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// The scorer's bounds (the communication floor from the ZeRO level down) ≤ the step time
    /// and peak memory of random plans of the three real models, at every depth above them.
    #[test]
    fn scorer_bounds_with_the_floor_are_admissible(
        c in 0usize..3,
        ix in prop::collection::vec(any::<prop::sample::Index>(), 19),
        jx in prop::collection::vec(any::<prop::sample::Index>(), 19),
    ) {
        let (model, cluster) = case(c);
        let s = Scorer::new(&resolve_model(model).expect("bundled model"), &cluster, EvalOptions::default());
        let space = wide_space();
        let Some(mut plan) = random_plan(&s.exact, &space, &ix) else { return Ok(()) };
        // The engine's canonical form: no dispatcher choice without dispatch, no placement
        // choice without EP.
        if plan.ep * plan.moe_tp == 1 {
            plan.dispatcher = Plan::default().dispatcher;
        }
        if plan.ep == 1 {
            plan.placement = Plan::default().placement;
        }
        let m = match Objective::evaluate(&s, &plan) {
            Ok(m) => (m.step_time_s, m.memory_peak_bytes),
            Err(Reject::OutOfMemory { peak_bytes, .. }) => (f64::INFINITY, peak_bytes),
            Err(Reject::Invalid) => return Ok(()),
        };
        // Leaf knobs of another random plan (the degrees do not matter: only the knobs are
        // taken), or the space's first values.
        let other = random_plan(&s.exact, &space, &jx);
        let leaves = other.unwrap_or_else(|| common::first_leaves(&plan, &space));
        for depth in [Depth::MicroBatch, Depth::Recompute, Depth::Schedule, Depth::Zero] {
            let p = Partial { plan: common::partial(&plan, &leaves, &space, depth), depth, space: &space, threshold: f64::INFINITY };
            let b = s.bound(&p);
            prop_assert!(b.step_time_s <= m.0, "{depth:?}: {} > {} for {plan}", b.step_time_s, m.0);
            // The parts the engine asks for separately at a task's root, each admissible, the
            // floors from the compute one up each at least as tight as the one before (the
            // ordering bound checks no validity: where no completion with these leaves is
            // valid the floors give 0, no information, and it may stand above them).
            let (o, c) = (s.order_bound(&p), s.compute_bound(&p));
            let (sc, t) = (s.screen_bound(&p), s.time_bound(&p));
            prop_assert!(
                o <= m.0 && c <= sc && sc <= t && t <= m.0,
                "{depth:?}: order {o}, compute {c}, screen {sc}, time {t}, step {} for {plan}", m.0
            );
            prop_assert!(s.memory_bound(&p) <= m.1, "{depth:?}: memory bound over {} for {plan}", m.1);
            prop_assert!(b.memory_bytes <= m.1, "{depth:?}: memory {} > {} for {plan}", b.memory_bytes, m.1);
        }
    }
}

/// The branch-and-bound with the communication floor finds the exhaustive top-K on a small MoE
/// case where every communication knob is open (both rank-order families, transitions, CP
/// exchanges, dispatchers, `moe_tp` schemes, overlaps on and off, SP on and off).
#[test]
fn bnb_equals_exhaustive_on_small_moe_with_every_knob_open() {
    let m = resolve_model("mixtral-8x7b").expect("bundled model");
    let s = Scorer::new(&m, &dgx_h100(2), EvalOptions::default());
    let mut space = wide_space();
    space
        .fix("mbs=1,recompute=full,schedule=1f1b")
        .expect("valid fix");
    space.pp = vec![1, 2, 4];
    space.zero = vec![autoplan_plan::Zero::stage(1), autoplan_plan::Zero::stage(3)];
    let run = |exhaustive: bool, threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("thread pool");
        let o = pool.install(|| {
            search(
                &s,
                &space,
                &SearchOptions {
                    top_k: 8,
                    exhaustive,
                },
                &(),
            )
        });
        let keys: Vec<String> = o
            .plans
            .iter()
            .map(|r| format!("{} {} {:?}", r.key, r.plan, r.metrics))
            .collect();
        (keys, o.stats)
    };
    let (exact, all) = run(true, 1);
    assert!(!exact.is_empty(), "nothing fits");
    let (bnb, pruned) = run(false, 1);
    assert_eq!(exact, bnb);
    assert_eq!(exact, run(false, 3).0);
    assert!(
        pruned.evaluated < all.evaluated,
        "the floor pruned nothing: {pruned:?}"
    );
}

/// B&B = exhaustive where replicas push plans over HBM: Mixtral 8x7B on 64 A100s, the `moe`
/// space (contiguous and balanced placements) at pp = 1. The bounds of a ZeRO node must not
/// read the leaf knobs (here the placement) left in the plan by the leaves of the node before.
#[test]
fn bnb_equals_exhaustive_with_replicas_over_hbm() {
    let m = resolve_model("mixtral-8x7b").expect("bundled model");
    let c = autoplan_cluster::resolve_cluster("a100x64").expect("bundled cluster");
    let s = Scorer::new(&m, &c, EvalOptions::default());
    let mut space = resolve_space("moe").expect("bundled space");
    space.fix("pp=1").expect("valid fix");
    let run = |exhaustive: bool| {
        let o = search(
            &s,
            &space,
            &SearchOptions {
                top_k: 10,
                exhaustive,
            },
            &(),
        );
        o.plans
            .iter()
            .map(|r| format!("{} {} {:?}", r.key, r.plan, r.metrics))
            .collect::<Vec<_>>()
    };
    let exact = run(true);
    assert!(!exact.is_empty(), "nothing fits");
    assert_eq!(exact, run(false));
}

/// A partial plan carries placeholders for the knobs not yet decided (the engine leaves the
/// space's first value in them): on a dense model a `moe_tp_scheme` other than the default is
/// invalid, and the floor must bound the completions (the open lists) rather than give up on
/// the placeholder. It gave up once, and the dense searches evaluated ~250k plans instead of
/// a few thousand.
#[test]
fn floor_bounds_the_open_values_not_the_placeholders() {
    use autoplan_plan::{Dispatcher, MoeTpScheme};
    let ev = unbounded(2);
    let plan: Plan = "tp=8,sp=on,cp=1,dp=16,pp=8,mbs=1,recompute=selective,zero=1"
        .parse()
        .expect("plan");
    let t = ev.evaluate(&plan).expect("valid plan").step_time_s;
    let mut partial = plan;
    partial.moe_tp_scheme = MoeTpScheme::ScatterGather;
    partial.dispatcher = Dispatcher::AllGather;
    let f = ev.step_floor(&partial, &Lists::own(&plan).open());
    assert!(
        f > 0.0 && f <= t,
        "floor {f} of a dense plan with MoE placeholders (step {t})"
    );
}
