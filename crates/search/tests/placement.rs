//! Issue 7 item 7: the search trades balanced placement's replicas (memory, and since issue 22
//! their gradient sync) against the expert load imbalance they remove (EP all-to-all and
//! expert compute time).
//!
//! Model: autoplan-evaluate's `tests/fixtures/moe-dynamic.toml` (32 experts, hottest 3× the
//! mean, dynamic top-1/top-2 routing). Every degree and knob is fixed but the placement, so
//! the search chooses among contiguous and balanced with 1, 2 or 4 redundant experts per GPU.

use autoplan_cost::calibration::dgx_h100;
use autoplan_evaluate::{EvalOptions, Evaluator};
use autoplan_plan::{PlacementPolicy, Plan};
use autoplan_search::{resolve_space, search, Scorer, SearchOptions, Space};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../evaluate/tests/fixtures/moe-dynamic.toml"
);

const FIXED: &str = "tp=1,pp=1,cp=1,ep=8,moe_tp=1,mbs=1,recompute=selective,zero=1,\
                     schedule=1f1b,dispatcher=all-to-all,algo=cheapest,order=tp-cp-dp-pp,\
                     ep_overlap=false";

const PLACEMENTS: [PlacementPolicy; 4] = [
    PlacementPolicy::Contiguous,
    PlacementPolicy::Balanced { redundant: 1 },
    PlacementPolicy::Balanced { redundant: 2 },
    PlacementPolicy::Balanced { redundant: 4 },
];

fn space() -> Space {
    let mut s = resolve_space("moe").unwrap();
    s.fix(FIXED).unwrap();
    s.placement = PLACEMENTS.to_vec();
    s
}

/// The best plan's placement on 4 DGX H100 nodes with `hbm` bytes per GPU.
fn best(hbm: f64) -> Option<PlacementPolicy> {
    let model = autoplan_graph::resolve_model(FIXTURE).unwrap();
    let mut cluster = dgx_h100(4);
    cluster.gpu.hbm_bytes = hbm;
    let scorer = Scorer::new(&model, &cluster, EvalOptions::default());
    let opts = SearchOptions {
        top_k: 4,
        exhaustive: false,
    };
    let out = search(&scorer, &space(), &opts, &());
    out.plans.first().map(|r| r.plan.placement)
}

#[test]
fn tight_hbm_trades_replicas_for_memory() {
    let model = autoplan_graph::resolve_model(FIXTURE).unwrap();
    let ev = Evaluator::new(&model, &dgx_h100(4), EvalOptions::default());
    let plan = |p: PlacementPolicy| -> Plan {
        let mut q: Plan = format!("{FIXED},dp=32").parse().expect("plan parses");
        q.placement = p;
        q
    };
    // (step time, peak memory) of each placement, with room for all.
    let m: Vec<(f64, f64)> = PLACEMENTS
        .iter()
        .map(|&p| {
            let x = ev.evaluate(&plan(p)).expect("fits in 80 GB");
            (x.step_time_s, x.memory_peak_bytes)
        })
        .collect();
    // Replicas cost memory (their weights and state) at every count.
    for w in m.windows(2) {
        assert!(w[1].1 > w[0].1, "{m:?}");
    }
    // One replica per GPU saves more all-to-all and expert compute than its gradient sync
    // costs (issue 22); each further one's sync costs more than the little balance it adds.
    assert!(m[1].0 < m[0].0, "{m:?}");
    assert!(m[2].0 > m[1].0 && m[3].0 > m[2].0, "{m:?}");
    let between = |i: usize| 0.5 * (m[i].1 + m[i + 1].1);
    // Ample HBM: the one useful replica; below its memory, none; nothing at the end.
    assert_eq!(best(m[3].1 * 1.01), Some(PLACEMENTS[1]));
    assert_eq!(best(between(1)), Some(PLACEMENTS[1]));
    assert_eq!(best(between(0)), Some(PLACEMENTS[0]));
    assert_eq!(best(m[0].1 * 0.99), None);
}

#[test]
fn space_files_list_placements() {
    let s = resolve_space("moe").unwrap();
    assert_eq!(s.placement[0], PlacementPolicy::Contiguous);
    assert!(s
        .placement
        .iter()
        .any(|p| matches!(p, PlacementPolicy::Balanced { redundant } if *redundant > 0)));
    // Spaces without the key search contiguous placement only.
    assert_eq!(
        resolve_space("dense").unwrap().placement,
        vec![PlacementPolicy::Contiguous]
    );
}

/// The placement knob keeps the bounds admissible: branch-and-bound returns exactly the
/// exhaustive top-K on the skewed model, where replicas change compute, EP time and memory.
#[test]
fn bnb_equals_exhaustive_with_placements() {
    let model = autoplan_graph::resolve_model(FIXTURE).unwrap();
    let mut cluster = dgx_h100(4);
    // Tight enough that some replica counts do not fit with some ZeRO/recompute choices.
    cluster.gpu.hbm_bytes = 8.0 * 1024.0 * 1024.0 * 1024.0;
    let scorer = Scorer::new(&model, &cluster, EvalOptions::default());
    let mut space = resolve_space("moe").unwrap();
    space.fix("tp=1,cp=1,moe_tp=1,mbs=1").unwrap();
    space.placement = PLACEMENTS.to_vec();
    let run = |exhaustive: bool| {
        let opts = SearchOptions {
            top_k: 10,
            exhaustive,
        };
        search(&scorer, &space, &opts, &())
            .plans
            .iter()
            .map(|r| format!("{} {} {}", r.key, r.plan, r.step_time_s))
            .collect::<Vec<_>>()
    };
    let exact = run(true);
    assert!(!exact.is_empty());
    assert!(
        exact.iter().any(|p| p.contains("placement=balanced")),
        "{exact:#?}"
    );
    assert_eq!(exact, run(false));
}
