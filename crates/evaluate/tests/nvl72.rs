//! NVLink domains larger than a host (issue 16, item 3): on a GB200 NVL72 rack (18 trays of 4
//! GPUs, one 72-GPU NVLink domain) a group inside the rack is priced on NVLink exactly as if
//! the rack were one host, a group across racks pays the network; and the precisions of
//! 2025–26 GPUs are priced at their peaks.

use autoplan_cluster::{resolve_cluster, Cluster, Precision};
use autoplan_evaluate::{CommKind, EvalOptions, Evaluator, Report};
use autoplan_graph::{resolve_model, ModelSpec};
use autoplan_plan::Plan;

fn model(name: &str, global_batch: u32) -> ModelSpec {
    let m = resolve_model(name).unwrap();
    let mut t = m.training.clone();
    t.global_batch = global_batch;
    t.seq_len = 4096;
    m.with_training(t).unwrap()
}

fn report(m: &ModelSpec, c: &Cluster, plan: &str) -> Report {
    let p = Plan::parse_for_gpus(plan, u64::from(c.gpus())).unwrap();
    Evaluator::new(m, c, EvalOptions::default())
        .report(&p)
        .unwrap_or_else(|e| panic!("{plan} on {}: {e:?}", c.name))
}

/// Seconds per step of `kind`'s collectives, and whether every one of them stays in a domain.
fn comm(r: &Report, kind: CommKind) -> (f64, bool) {
    let rows: Vec<_> = r.comm.iter().filter(|c| c.kind == kind).collect();
    assert!(!rows.is_empty(), "no {kind:?} row");
    (
        rows.iter().map(|c| c.time).sum(),
        rows.iter().all(|c| c.group.intra_node()),
    )
}

/// The same cluster with a network 100 times slower.
fn slow_network(c: &Cluster) -> Cluster {
    let mut s = c.clone();
    s.network.inter_bw /= 100.0;
    s
}

/// The NVL72 cluster with each rack as one 72-GPU host (domain = node): what "priced as
/// intra-node" means.
fn racks_as_hosts(c: &Cluster) -> Cluster {
    let mut h = c.clone();
    h.nodes = c.gpus() / 72;
    h.node.gpus_per_node = 72;
    h.network.nics_per_node = 72;
    h
}

#[test]
fn tp8_on_trays_of_4_is_priced_on_nvlink_as_inside_a_host() {
    let c = resolve_cluster("gb200-nvl72x4").unwrap();
    let m = model("llama3-8b", 288);
    let plan = "tp=8,sp=on,dp=36,mbs=1,recompute=full";
    let r = report(&m, &c, plan);
    let (tp, intra) = comm(&r, CommKind::Tp);
    assert!(intra && tp > 0.0);
    // Exactly the price of the same group inside one 72-GPU host: every part of the step.
    let h = report(&m, &racks_as_hosts(&c), plan);
    assert_eq!(comm(&h, CommKind::Tp).0, tp);
    assert_eq!(h.metrics.step_time_s, r.metrics.step_time_s);
    // No network term: a slower network leaves TP's time alone.
    assert_eq!(
        comm(&report(&m, &slow_network(&c), plan), CommKind::Tp).0,
        tp
    );
    // Cut NVLink at the tray and the same group crosses the network.
    let mut trays = c.clone();
    trays.node.nvlink_domain = 4;
    let (tp_trays, intra_trays) = comm(&report(&m, &trays, plan), CommKind::Tp);
    assert!(!intra_trays && tp_trays > tp, "{tp_trays} vs {tp}");
}

#[test]
fn ep64_inside_one_nvl72_is_nvlink_only() {
    let c = resolve_cluster("gb200-nvl72x4")
        .unwrap()
        .with_gpus(64)
        .unwrap();
    assert_eq!((c.nodes, c.domain_gpus()), (16, 64));
    let m = model("qwen3-30b-a3b", 64);
    let plan = "tp=1,ep=64,dp=64,mbs=1,recompute=full,zero=1";
    let r = report(&m, &c, plan);
    let (ep, intra) = comm(&r, CommKind::Ep);
    assert!(intra && ep > 0.0);
    let groups: Vec<_> = r.comm.iter().filter(|c| c.kind == CommKind::Ep).collect();
    assert!(groups
        .iter()
        .all(|g| g.group.size == 64 && g.group.nodes == 1));
    // The all-to-alls never touch the network: 100x slower NICs change nothing.
    let s = report(&m, &slow_network(&c), plan);
    assert_eq!(comm(&s, CommKind::Ep).0, ep);
    assert_eq!(s.metrics.step_time_s, r.metrics.step_time_s);
}

/// A 256-GPU job on NVL72 racks with EP = 64 and PP = 4 (the published GB200 Qwen3-235B and
/// DeepSeek-V3 plans): filling 72-GPU racks consecutively would cut three of the four EP
/// groups across two racks (ranks 64..127 straddle rank 72); the job runs in segments of 16
/// trays per rack (`Cluster::job_domain_gpus`, Slurm's block topology), so every EP group is
/// inside one rack and its all-to-alls never touch the network.
#[test]
fn ep64_of_a_256_gpu_job_on_nvl72_racks_stays_in_one_rack() {
    use autoplan_cluster::GroupPlacement;
    let c = resolve_cluster("gb200-nvl72x4")
        .unwrap()
        .with_gpus(256)
        .unwrap();
    assert_eq!((c.nodes, c.domain_gpus()), (64, 72));
    // The MoE grid, innermost first: moe_tp, ep, edp, pp.
    let grid = [1, 64, 1, 4];
    let ep_dim = [false, true, false, false];
    // Consecutive filling of whole racks: the bound of a misaligned grid spans two racks.
    assert_eq!(GroupPlacement::of(72, &grid, &ep_dim).nodes, 2);
    assert_eq!(c.job_domain_gpus(&[&grid]), 64);
    let m = model("qwen3-30b-a3b", 256);
    let plan = "tp=1,pp=4,ep=64,dp=64,mbs=1,recompute=full,zero=1";
    let r = report(&m, &c, plan);
    let (ep, intra) = comm(&r, CommKind::Ep);
    assert!(intra && ep > 0.0);
    assert!(r
        .comm
        .iter()
        .filter(|c| c.kind == CommKind::Ep)
        .all(|g| g.group.size == 64 && g.group.nodes == 1));
    let s = report(&m, &slow_network(&c), plan);
    assert_eq!(comm(&s, CommKind::Ep).0, ep);
}

#[test]
fn a_144_way_group_crosses_racks_and_pays_the_network() {
    let c = resolve_cluster("gb200-nvl72x4").unwrap();
    let m = model("llama3-8b", 288);
    let plan = "tp=2,dp=144,mbs=1,recompute=full,zero=1";
    let r = report(&m, &c, plan);
    let dp_rows: Vec<_> = r.comm.iter().filter(|c| c.kind == CommKind::Dp).collect();
    assert!(dp_rows
        .iter()
        .all(|c| c.group.size == 144 && c.group.nodes == 4));
    let (dp, intra) = comm(&r, CommKind::Dp);
    assert!(!intra);
    let (dp_slow, _) = comm(&report(&m, &slow_network(&c), plan), CommKind::Dp);
    assert!(dp_slow > 2.0 * dp, "{dp_slow} vs {dp}");
    // TP = 2 stays in the rack.
    assert!(comm(&r, CommKind::Tp).1);
}

/// GEMMs run at the peak of their format: an MXFP8 step on GB200 is faster than BF16, NVFP4
/// faster than MXFP8, and the FP8 recipes price alike (their scaling overheads are not told
/// apart: no measurement separates them) except 1×128/128×128 block scaling, measured slower
/// than per-tensor on Hopper (`fp8_block_rate`, results/h200/fp8block.csv), which Blackwell's
/// prior inherits, and delayed scaling, whose norm kernels quantize the QKV and FC1 inputs
/// themselves (Transformer Engine's fully fused quantized norm): a little faster.
#[test]
fn precisions_run_at_their_peaks() {
    let c = resolve_cluster("gb200-nvl72x4")
        .unwrap()
        .with_gpus(64)
        .unwrap();
    let step = |p: Precision| {
        let mut m = model("llama3-8b", 64);
        m.training.precision = p;
        report(&m, &c, "tp=1,dp=64,mbs=1,recompute=full,zero=1")
            .metrics
            .step_time_s
    };
    let (bf16, fp8, mx, fp4) = (
        step(Precision::Bf16),
        step(Precision::Fp8),
        step(Precision::Mxfp8),
        step(Precision::Nvfp4),
    );
    assert!(fp8 < bf16 && fp4 < mx, "{bf16} {fp8} {mx} {fp4}");
    let current = step(Precision::Fp8Current);
    assert_eq!(mx, current);
    // The two norm-fed casts of a block's forward, not more.
    assert!(fp8 < current && current < 1.02 * fp8, "{fp8} {current}");
    let block = step(Precision::Fp8Block);
    assert!(current < block && block < bf16, "{current} {block} {bf16}");
}
