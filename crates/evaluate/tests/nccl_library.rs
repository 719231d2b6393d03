//! Collectives as NCCL runs them (issue 18 items 2 and 3): under the default library every
//! collective a plan books uses an algorithm NCCL has, and the tuner config made from the
//! report parses back to the same algorithm and protocol for every booked collective.

use autoplan_cluster::{resolve_cluster, CollectiveLibrary};
use autoplan_cost::{nccl, nccl_algorithms_of, Collective};
use autoplan_evaluate::{EvalOptions, Evaluator, Report};
use autoplan_plan::Plan;

fn report(model: &str, cluster: &str, plan: &str, library: CollectiveLibrary) -> Report {
    let m = autoplan_graph::resolve_model(model).expect("bundled model");
    let mut c = resolve_cluster(cluster).expect("bundled cluster");
    c.library = library;
    let p = Plan::parse_for_gpus(plan, c.gpus() as u64).expect("plan parses");
    Evaluator::new(&m, &c, EvalOptions::default())
        .report(&p)
        .expect("plan fits")
}

const CASES: [(&str, &str, &str); 3] = [
    (
        "gpt3-175b",
        "a100x1024",
        "tp=8,sp=on,pp=8,schedule=interleaved,vpp=3,mbs=1,recompute=selective",
    ),
    (
        "llama3-8b",
        "h100x256",
        "tp=2,sp=on,pp=1,mbs=1,recompute=selective,zero=1",
    ),
    (
        "deepseek-v3",
        "h800x2048",
        "tp=1,pp=16,dp=128,ep=64,mbs=1,schedule=dualpipe,recompute=full,zero=1",
    ),
];

fn booked(r: &Report) -> Vec<nccl::Booked> {
    r.comm
        .iter()
        .filter(|row| row.calls_per_step > 0.0 && row.bytes > 0.0 && row.group.size > 1)
        .map(|row| nccl::Booked {
            collective: row.collective,
            bytes: row.bytes,
            nodes: row.group.nodes,
            ranks: row.group.size,
            algorithm: row.algorithm,
            protocol: row.protocol,
        })
        .collect()
}

#[test]
fn default_library_books_only_nccl_algorithms() {
    for (m, c, p) in CASES {
        let r = report(m, c, p, CollectiveLibrary::Nccl);
        assert!(!r.comm.is_empty());
        for row in &r.comm {
            assert!(
                nccl_algorithms_of(row.collective).contains(&row.algorithm),
                "{m} on {c}: {} booked as {} which NCCL lacks",
                row.what,
                row.algorithm
            );
        }
    }
}

#[test]
fn library_any_can_pick_what_nccl_lacks() {
    // The example: an 8-GPU 16 MiB all-reduce on A100 is halving-doubling under the
    // seeds' menu, ring under NCCL.
    use autoplan_cluster::GroupPlacement;
    use autoplan_cost::{AlgoMode, Algorithm, CostModel};
    let c = resolve_cluster("a100x64").unwrap();
    let g = GroupPlacement {
        size: 8,
        ranks_per_node: 8,
        nodes: 1,
    };
    let s = 16.0 * 1024.0 * 1024.0;
    let m = CostModel::new(&c);
    let nccl = m.collective(Collective::AllReduce, g, s, AlgoMode::Cheapest);
    let any = m.with_library(CollectiveLibrary::Any).collective(
        Collective::AllReduce,
        g,
        s,
        AlgoMode::Cheapest,
    );
    assert_eq!(nccl.algorithm, Algorithm::Ring);
    assert_eq!(any.algorithm, Algorithm::HalvingDoubling);
    assert!(nccl.time > any.time);
    assert_eq!(
        m.collective(Collective::AllReduce, g, s, AlgoMode::Any),
        any
    );
}

#[test]
fn tuner_config_round_trips_every_booked_collective() {
    for (m, c, p) in CASES {
        let r = report(m, c, p, CollectiveLibrary::Nccl);
        let calls = booked(&r);
        let (lines, other) = nccl::tuner_lines(&calls);
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let back = nccl::parse_tuner_config(&text).expect("emitted config parses");
        assert_eq!(back, lines);
        let mut tuned = 0;
        for b in &calls {
            if nccl::tuner_collective(b.collective).is_none() {
                assert!(other.contains(b));
                continue;
            }
            let l = nccl::lookup(
                &back,
                b.collective,
                b.bytes.round() as u64,
                b.nodes,
                b.ranks,
            )
            .unwrap_or_else(|| panic!("{m}: no line for {b:?}"));
            assert_eq!(
                (l.algorithm, l.protocol),
                (b.algorithm, b.protocol),
                "{m} on {c}: {b:?}"
            );
            tuned += 1;
        }
        assert!(tuned > 0, "{m}: no tunable collective");
    }
}

#[test]
fn a_plan_with_algo_any_keeps_the_seeds_menu() {
    // TP=8 on one A100 node: the seeds' halving-doubling all-gather / reduce-scatter wins under
    // `algo=any`, NCCL's ring (LL128 or Simple) by default; `any` is never slower.
    let (m, c, p) = CASES[0];
    let nccl = report(m, c, p, CollectiveLibrary::Nccl);
    let any = report(m, c, &format!("{p},algo=any"), CollectiveLibrary::Nccl);
    let lacks = |r: &Report| {
        r.comm
            .iter()
            .any(|row| !nccl_algorithms_of(row.collective).contains(&row.algorithm))
    };
    assert!(!lacks(&nccl));
    assert!(lacks(&any));
    assert!(any.metrics.step_time_s < nccl.metrics.step_time_s);
    // The cluster's library `any` gives the same prices as `algo=any`.
    let lib_any = report(m, c, p, CollectiveLibrary::Any);
    assert_eq!(lib_any.metrics.step_time_s, any.metrics.step_time_s);
}
