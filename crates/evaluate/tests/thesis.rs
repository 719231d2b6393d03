//! Seed 004 (the MoE thesis) reproduced: Table 2-1 (the all-to-all's share of a DeepSpeed-MoE
//! step) and Tables 5-1 to 5-4 (DeepSpeed's step against the thesis's topology-aware expert
//! placement, stage by stage), on the bundled thesis clusters and Transformer-XL MoE models.
//!
//! How a step is priced (docs/thesis.md has the why of each choice):
//! * compute, the dense gradient all-reduce and the optimizer: `Evaluator::report` on the plan
//!   `tp=1,pp=1,dp=P,ep=P,mbs=B/P` (DeepSpeed's expert parallelism: one expert per GPU, the
//!   rest data parallel), DeepSpeed's ZeRO-0 all-reduce after the backward
//!   (`dp_overlap: false`); forward = 1/3 of the compute, backward 2/3 (the evaluator's
//!   backward is twice the forward's GEMM and elementwise work, `core/compute.rs`; the
//!   attention core, whose ratio differs, is a small part of these 512-wide models).
//! * the four all-to-alls of a MoE layer (dispatch, combine, and their gradients: seed 004
//!   §2.2) and the replicas' gradient all-reduce: `autoplan_placement` on the cluster's α-β
//!   matrix, per layer, times the MoE layers. Baseline: DeepSpeed's contiguous placement
//!   (expert e on GPU e) and its capacity-padded top-1 dispatch (capacity factor 1: `T/E` rows
//!   to every expert whatever the routing). Design: the thesis's placement, `place-experts`'
//!   heuristic with `1 + R` slots per GPU and replicas free (the thesis's formulation has no
//!   sync term, seed 004 §4.2.1), under `DESIGN_OBJECTIVE`; then its copies' gradient
//!   all-reduce is priced (seed 004 §5.3.2 measured it). Autoplan: the same heuristic paying
//!   the sync in its objective.
//!
//! Run `cargo test -p autoplan-evaluate --test thesis -- --nocapture` to print the tables of
//! docs/thesis.md.

use autoplan_cluster::{resolve_cluster, Cluster, Precision};
use autoplan_evaluate::{EvalOptions, Evaluator};
use autoplan_graph::{resolve_model, ModelSpec, Training};
use autoplan_placement::heuristic::{heuristic, HeuristicOptions};
use autoplan_placement::{
    baseline, evaluate_nearest, Instance, InstanceOptions, Objective, Placement, Topology,
};
use autoplan_plan::framework::CostProfile;
use autoplan_plan::Plan;

/// fp32 bytes: activations on the wire and gradients (the thesis's fp32 training).
const FP32: f64 = 4.0;

/// The objective the design's placement is solved under: `place-experts`' default, the
/// slowest rank's dispatch + combine (what a step waits for). The thesis's own Σ(α + V/β)
/// (`Objective::Thesis`) minimises the total link time, not the slowest rank's: on 4 nodes
/// its 1-replica forward comes out slower than the baseline's, against Table 5-4's
/// measurement (docs/thesis.md).
const DESIGN_OBJECTIVE: Objective = Objective::Synchronous;

/// One configuration's predicted stages, seconds per step.
#[derive(Debug, Clone, Copy)]
struct Stages {
    /// Forward: compute + dispatch/combine all-to-alls.
    fwd: f64,
    /// Backward: compute + the all-to-alls' gradients.
    bwd: f64,
    /// Gradient sync: dense all-reduce + the replicas' all-reduce.
    sync: f64,
    /// fwd + bwd + sync + optimizer step.
    overall: f64,
    /// All four all-to-alls of every MoE layer.
    a2a: f64,
}

/// How the experts are placed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Policy {
    /// DeepSpeed-MoE: expert e on GPU e.
    Baseline,
    /// The thesis's design: `R` redundant slots per GPU, the copies placed and the tokens
    /// routed for the all-to-all alone (replicas free, seed 004 §4.2.1).
    Design(usize),
    /// autoplan's `place-experts` with the same slots, its objective paying the copies'
    /// gradient all-reduce (issue 22 item 1): replicas only where they save more than they cost.
    Autoplan(usize),
}

/// The thesis's run of `model` on `cluster` with global batch `batch` under `policy`; `nodes`
/// restricts the cluster to its first nodes (Table 2-1's 4 GPUs).
fn predict(model: &str, cluster: &str, nodes: Option<u32>, batch: u32, policy: Policy) -> Stages {
    predict_with(model, cluster, nodes, batch, policy, false)
}

/// [`predict`], with DeepSpeed-MoE's dense einsum dispatch and combine priced where `einsum`
/// (`CostProfile::DEEPSPEED_MOE_2023`; docs/thesis.md says why the tables leave it out).
fn predict_with(
    model: &str,
    cluster: &str,
    nodes: Option<u32>,
    batch: u32,
    policy: Policy,
    einsum: bool,
) -> Stages {
    let spec = resolve_model(model).unwrap();
    let spec: ModelSpec = spec
        .with_training(Training {
            global_batch: batch,
            ..spec.training
        })
        .unwrap();
    let mut c: Cluster = resolve_cluster(cluster).unwrap();
    if let Some(n) = nodes {
        c.nodes = n;
    }
    // fp32 training (see the model files): GEMMs at the fp32 rate.
    let fp32 = c.gpu.peak(Precision::Fp32).unwrap();
    for (p, f) in c.gpu.peak_flops.iter_mut() {
        if *p == Precision::Fp16 {
            *f = fp32;
        }
    }
    let moe = spec.moe.clone().unwrap();
    let p = c.gpus() as usize;
    assert_eq!(
        moe.experts as usize, p,
        "the thesis runs one expert per GPU"
    );
    let per_gpu = batch / p as u32;
    let plan: Plan = format!("tp=1,pp=1,dp={p},ep={p},mbs={per_gpu},recompute=none")
        .parse()
        .unwrap();
    let opts = EvalOptions {
        dp_overlap: false,
        grad_bytes: FP32,
        ..EvalOptions::default()
    };
    // DeepSpeed-MoE's dense einsum dispatch, where asked (`einsum_dispatch_changes_no_winner`).
    let opts = if einsum {
        // The thesis trained in fp32 (the model files): fp32 gradients.
        opts.with_profile(&CostProfile::DEEPSPEED_MOE_2023, Precision::Fp32)
    } else {
        opts
    };
    let rep = Evaluator::new(&spec, &c, opts).report(&plan).unwrap();
    let b = rep.breakdown;
    // Pure expert + data parallelism: no TP, CP or PP traffic, no bubble.
    assert_eq!(
        b.tp_exposed_s + b.cp_exposed_s + b.pp_exposed_s + b.bubble_s,
        0.0
    );
    let compute = b.compute_s + b.recompute_s;

    // One MoE layer's all-to-alls on the α-β matrix of the cluster.
    let topo = Topology::from_cluster(&c, p).unwrap();
    let e = moe.experts as usize;
    let tokens = per_gpu as f64 * spec.training.seq_len as f64;
    // Capacity factor 1, top-1: T/E rows from every GPU to every expert (DeepSpeed pads to the
    // capacity; with the declared balance the dropless design sends the same rows).
    let demand = vec![tokens * moe.top_k as f64 / e as f64; p * e];
    let h = spec.hidden as f64;
    // One expert's fp32 gradient, all-reduced over its copies once per step.
    let expert_grad = spec.routed_expert_params() * FP32;
    let inst = |slots: usize, sync: f64, objective: Objective| {
        let o = InstanceOptions {
            bytes_per_token: h * FP32,
            replica_sync_bytes: sync,
            objective,
            ..InstanceOptions::default()
        };
        Instance::new(topo.clone(), e, slots, demand.clone(), o).unwrap()
    };
    let ho = HeuristicOptions {
        polish_max_vars: 0,
        ..HeuristicOptions::default()
    };
    let (slots, placement): (usize, Placement) = match policy {
        Policy::Baseline => (1, baseline::contiguous(&inst(1, 0.0, DESIGN_OBJECTIVE))),
        Policy::Design(r) => (
            1 + r,
            heuristic(&inst(1 + r, 0.0, DESIGN_OBJECTIVE), &ho).placement,
        ),
        // The objective prices one round (dispatch + combine); a step runs two (forward and
        // backward) per sync, so each round carries half the gradient (`place-experts`'
        // default `--rounds-per-step 2`).
        Policy::Autoplan(r) => (
            1 + r,
            heuristic(&inst(1 + r, expert_grad / 2.0, DESIGN_OBJECTIVE), &ho).placement,
        ),
    };
    let m = evaluate_nearest(&inst(slots, expert_grad, DESIGN_OBJECTIVE), &placement);
    let layers = spec.layers as f64 - moe.first_dense_layers as f64;
    let a2a_pass = layers * (m.dispatch_s + m.combine_s);
    let fwd = compute / 3.0 + a2a_pass;
    let bwd = 2.0 * compute / 3.0 + a2a_pass;
    let sync = b.dp_exposed_s + layers * m.replica_sync_s;
    Stages {
        fwd,
        bwd,
        sync,
        overall: fwd + bwd + sync + b.optimizer_s,
        a2a: 2.0 * a2a_pass,
    }
}

/// A row of Tables 5-1 to 5-4 as measured (ms): (fwd, bwd, sync, overall) baseline, design.
#[derive(Clone, Copy)]
struct Row {
    label: &'static str,
    model: &'static str,
    cluster: &'static str,
    batch: u32,
    replicas: usize,
    base: [f64; 4],
    design: [f64; 4],
    /// Whether the model reproduces the row's overall winner (docs/thesis.md says why not).
    winner: bool,
}

/// Seed 004 Tables 5-2 (batch 24; its 45M row is Table 5-1) and 5-3 (batch 40), 8 GPUs on 2
/// nodes. The design's replica count is not stated; Table 5-4's "1 replica" gradient sync on
/// the 94M model (5851 ms) is the design's of Tables 5-2/5-3 (5350 ms), so one redundant slot
/// per GPU (`1 + 1` slots: every node can hold all 8 experts).
const ROWS: &[Row] = &[
    Row {
        label: "5-1/5-2 45M b24",
        model: "thesis-txl-45m",
        cluster: "thesis-2node",
        batch: 24,
        replicas: 1,
        base: [1860.0, 2347.0, 430.0, 5200.0],
        design: [455.0, 761.0, 1805.0, 3576.0],
        winner: true,
    },
    Row {
        label: "5-2 94M b24",
        model: "thesis-txl-94m",
        cluster: "thesis-2node",
        batch: 24,
        replicas: 1,
        base: [1929.0, 2386.0, 430.0, 5161.0],
        design: [463.0, 815.0, 5350.0, 7005.0],
        winner: true,
    },
    Row {
        label: "5-3 45M b40",
        model: "thesis-txl-45m",
        cluster: "thesis-2node",
        batch: 40,
        replicas: 1,
        base: [3233.0, 4171.0, 430.0, 8365.0],
        design: [527.0, 1146.0, 1813.0, 4674.0],
        winner: true,
    },
    Row {
        label: "5-3 94M b40",
        model: "thesis-txl-94m",
        cluster: "thesis-2node",
        batch: 40,
        replicas: 1,
        base: [3276.0, 3945.0, 430.0, 8168.0],
        design: [612.0, 1250.0, 5350.0, 7590.0],
        // Measured 1.08×, predicted 0.99×: the design's saved all-to-all (275 ms) and its
        // replicas' sync (280 ms) tie in the model; the thesis's margin is 9%. DeepSpeed's
        // einsum dispatch, the same work in both, moves no difference
        // (`einsum_dispatch_changes_no_winner`; docs/thesis.md names the measurement).
        winner: false,
    },
    Row {
        label: "5-3 145M b40",
        model: "thesis-txl-145m",
        cluster: "thesis-2node",
        batch: 40,
        replicas: 1,
        base: [3212.0, 3935.0, 480.0, 8000.0],
        design: [2145.0, 2258.0, 3150.0, 8430.0],
        winner: true,
    },
];

fn ms(s: f64) -> f64 {
    s * 1e3
}

fn stages_ms(s: &Stages) -> [f64; 4] {
    [ms(s.fwd), ms(s.bwd), ms(s.sync), ms(s.overall)]
}

/// Tables 5-1 to 5-3: every direction and ordering the thesis reports — the design's forward
/// and backward speed-ups, its slower gradient sync, the overall winner per row — and the
/// bound the absolute times keep (see docs/thesis.md: the α-β model of a 10 GbE link
/// predicts every stage below the measurement), for the rows of `table` ("5-1", "5-2", "5-3").
fn check_table_5(table: &str) {
    let rows: Vec<&Row> = ROWS.iter().filter(|r| r.label.contains(table)).collect();
    assert!(!rows.is_empty(), "{table}");
    for row in rows {
        let b = stages_ms(&predict(
            row.model,
            row.cluster,
            None,
            row.batch,
            Policy::Baseline,
        ));
        let d = stages_ms(&predict(
            row.model,
            row.cluster,
            None,
            row.batch,
            Policy::Design(row.replicas),
        ));
        let l = row.label;
        // Forward and backward: the design is faster (measured 1.5×–6.1×).
        assert!(d[0] < b[0], "{l}: forward {d:?} vs {b:?}");
        assert!(d[1] < b[1], "{l}: backward {d:?} vs {b:?}");
        // Gradient sync: the design is slower (measured 0.08×–0.24×).
        assert!(d[2] > b[2], "{l}: sync {d:?} vs {b:?}");
        // The overall winner is the measured one; the one row whose winner the model misses
        // is a near tie on both sides (measured 1.08×): the prediction stays within 0.1.
        let (sp, sm) = (b[3] / d[3], row.base[3] / row.design[3]);
        if row.winner {
            assert_eq!(
                sp > 1.0,
                sm > 1.0,
                "{l}: overall speed-up predicted {sp:.2}, measured {sm:.2}"
            );
        } else {
            assert!((sp - sm).abs() <= 0.1, "{l}: {sp:.2} vs {sm:.2}");
        }
        // The bound: no predicted stage exceeds its measurement (the missing mechanisms all
        // slow the real run down: docs/thesis.md).
        for (p, m) in b.iter().zip(&row.base).chain(d.iter().zip(&row.design)) {
            assert!(p <= m, "{l}: predicted {p:.0} ms above measured {m} ms");
        }
    }
}

/// Table 5-1: 45M, batch 24, 8 GPUs on 2 nodes.
#[test]
fn table_5_1_stage_directions_and_winner() {
    check_table_5("5-1");
}

/// Table 5-2: 45M and 94M, batch 24.
#[test]
fn table_5_2_stage_directions_and_winners() {
    check_table_5("5-2");
}

/// Table 5-3: 45M, 94M and 145M, batch 40.
#[test]
fn table_5_3_stage_directions_and_winners() {
    check_table_5("5-3");
}

/// Table 5-4: 8 GPUs on 4 nodes, Transformer-XL 94M, batch 40, 0/1/2 replicas (ms).
const TABLE_5_4: [(usize, [f64; 4]); 3] = [
    (0, [4251.0, 3935.0, 911.0, 10656.0]),
    (1, [3221.0, 3416.0, 5851.0, 12501.0]),
    (2, [1928.0, 2235.0, 9278.0, 14737.0]),
];

fn table_5_4() -> Vec<[f64; 4]> {
    TABLE_5_4
        .iter()
        .map(|&(r, _)| {
            let policy = if r == 0 {
                Policy::Baseline
            } else {
                Policy::Design(r)
            };
            stages_ms(&predict("thesis-txl-94m", "thesis-4node", None, 40, policy))
        })
        .collect()
}

#[test]
fn table_5_4_replicas_lose_overall() {
    let t = table_5_4();
    // Each replica shortens the forward and backward, lengthens the gradient sync ...
    for k in 1..3 {
        assert!(t[k][0] < t[k - 1][0], "forward {t:?}");
        assert!(t[k][1] < t[k - 1][1], "backward {t:?}");
        assert!(t[k][2] > t[k - 1][2], "sync {t:?}");
    }
    // ... and 0 replicas beats 1 and 2 overall, as measured.
    assert!(t[0][3] < t[1][3] && t[0][3] < t[2][3], "overall {t:?}");
    for (p, (_, m)) in t.iter().zip(&TABLE_5_4) {
        for (a, b) in p.iter().zip(m) {
            assert!(a <= b, "predicted {a:.0} ms above measured {b} ms");
        }
    }
}

/// Table 2-1: all-to-all and step time (ms) of DeepSpeed-MoE, 4 experts on 4 GPUs.
const TABLE_2_1: [(&str, [f64; 2]); 3] = [
    ("thesis-txl-8l-4e", [259.0, 722.0]),
    ("thesis-txl-12l-4e", [589.0, 1684.0]),
    ("thesis-txl-24l-4e", [1479.0, 3894.0]),
];

/// Table 2-1's 4 GPUs: two nodes of the 4-node cluster (2 GPUs each), so the all-to-all
/// crosses the 10 GbE network as the thesis's does; its batch is not stated (24, Table 5-1's).
fn table_2_1() -> Vec<Stages> {
    TABLE_2_1
        .iter()
        .map(|(m, _)| predict(m, "thesis-4node", Some(2), 24, Policy::Baseline))
        .collect()
}

#[test]
fn table_2_1_all_to_all_share() {
    let t = table_2_1();
    let mut shares = Vec::new();
    for (s, (m, [a2a, step])) in t.iter().zip(&TABLE_2_1) {
        let share = s.a2a / s.overall;
        let measured = a2a / step;
        // The thesis's point: the all-to-all is over a third of the step (35–38%). The model
        // prices the all-to-all nearer its measurement than the rest of the step (TITAN Xp
        // compute and framework overheads are missing: docs/thesis.md), so its share is an
        // upper bound of the measured one; both stay below the measured times.
        assert!(
            share >= 1.0 / 3.0 && share >= measured,
            "{m}: {share:.3} vs {measured:.3}"
        );
        assert!(ms(s.a2a) <= *a2a && ms(s.overall) <= *step, "{m}: {s:?}");
        shares.push(share);
    }
    // The share barely moves with depth (8 → 24 layers), as measured (35.8%, 34.9%, 37.8%):
    // all-to-all and compute both grow with the layers.
    let (lo, hi) = shares
        .iter()
        .fold((1.0f64, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
    assert!(hi - lo <= 0.05, "{shares:?}");
}

/// Every row's run (model, cluster, batch, replicas) and Table 5-4's runs with 1 and 2
/// replicas.
fn runs_with_replicas() -> Vec<(&'static str, &'static str, u32, usize)> {
    let mut runs: Vec<_> = ROWS
        .iter()
        .map(|r| (r.model, r.cluster, r.batch, r.replicas))
        .collect();
    runs.extend([1, 2].map(|r| ("thesis-txl-94m", "thesis-4node", 40, r)));
    runs
}

/// Issue 22 item 1 on the thesis's runs: `place-experts` pricing the replicas' gradient sync
/// never ends slower than DeepSpeed's placement (contiguous is one of its starts) nor than
/// the thesis's design with the same slots (the design's placement is one it can reach; 1%
/// slack for the local search).
#[test]
fn autoplan_placement_pays_for_replicas() {
    for (model, cluster, batch, r) in runs_with_replicas() {
        let run = |p| predict(model, cluster, None, batch, p).overall;
        let (b, d, a) = (
            run(Policy::Baseline),
            run(Policy::Design(r)),
            run(Policy::Autoplan(r)),
        );
        let l = format!("{model} {cluster} b{batch} R{r}");
        assert!(a <= b * (1.0 + 1e-9), "{l}: autoplan {a} vs baseline {b}");
        assert!(a <= d * 1.01, "{l}: autoplan {a} vs design {d}");
    }
}

/// DeepSpeed-MoE's dense einsum dispatch and combine (`CostProfile::DEEPSPEED_MOE_2023`,
/// `core/moe.rs`) run in the baseline and in the design alike — the design is DeepSpeed's
/// `MOELayer` with another placement and all-to-all (seed 004 §4.2.2) — on the same tokens and
/// the same `E·C` capacity slots, so they add the same seconds to both: they slow every step,
/// lower Table 2-1's all-to-all share, and change no difference between the two, hence no
/// winner (Table 5-3's 94M batch-40 row stays the model's near tie).
#[test]
fn einsum_dispatch_changes_no_winner() {
    for (model, cluster, batch, r) in runs_with_replicas() {
        let run = |p, e| stages_ms(&predict_with(model, cluster, None, batch, p, e));
        let (b0, d0) = (run(Policy::Baseline, false), run(Policy::Design(r), false));
        let (b1, d1) = (run(Policy::Baseline, true), run(Policy::Design(r), true));
        let l = format!("{model} {cluster} b{batch} R{r}");
        // The mechanism is live: forward and backward take longer in both ...
        for k in 0..2 {
            assert!(b1[k] > b0[k] && d1[k] > d0[k], "{l}: stage {k}");
        }
        // ... by the same amount, stage by stage and overall; the sync is untouched.
        for k in [0, 1, 3] {
            let shift = (b1[k] - d1[k]) - (b0[k] - d0[k]);
            assert!(
                shift.abs() <= 1e-9 * b1[k],
                "{l}: stage {k} shifts by {shift} ms"
            );
        }
        assert_eq!((b1[2], d1[2]), (b0[2], d0[2]), "{l}: sync");
    }
    // Table 2-1: the all-to-all's share of the step drops toward the measured one and stays
    // above it.
    for (m, [a2a, step]) in TABLE_2_1 {
        let s0 = predict_with(m, "thesis-4node", Some(2), 24, Policy::Baseline, false);
        let s1 = predict_with(m, "thesis-4node", Some(2), 24, Policy::Baseline, true);
        let (share0, share1) = (s0.a2a / s0.overall, s1.a2a / s1.overall);
        assert!(
            share1 < share0 && share1 >= a2a / step,
            "{m}: {share1} {share0}"
        );
    }
}

fn speedup(b: f64, d: f64) -> String {
    format!("{:.2}×", b / d)
}

/// Prints `text` and keeps it.
fn line(out: &mut String, text: impl AsRef<str>) {
    let text = text.as_ref();
    println!("{text}");
    out.push_str(text);
    out.push('\n');
}

/// Prints docs/thesis.md's tables (`-- --nocapture`) and checks that the manual carries
/// them as generated.
#[test]
fn docs_show_the_generated_tables() {
    let mut out = String::new();
    line(
        &mut out,
        "\n### Tables 5-1 to 5-3 (ms; predicted / measured)\n",
    );
    line(
        &mut out,
        "| row | stage | baseline | design | speed-up | autoplan |",
    );
    line(&mut out, "|---|---|---|---|---|---|");
    let names = ["Fwd MoE", "Bwd", "Grad sync", "Overall"];
    for row in ROWS {
        let b = stages_ms(&predict(
            row.model,
            row.cluster,
            None,
            row.batch,
            Policy::Baseline,
        ));
        let d = stages_ms(&predict(
            row.model,
            row.cluster,
            None,
            row.batch,
            Policy::Design(row.replicas),
        ));
        let a = stages_ms(&predict(
            row.model,
            row.cluster,
            None,
            row.batch,
            Policy::Autoplan(row.replicas),
        ));
        for k in 0..4 {
            line(
                &mut out,
                format!(
                    "| {} | {} | {:.0} / {:.0} | {:.0} / {:.0} | {} / {} | {:.0} |",
                    row.label,
                    names[k],
                    b[k],
                    row.base[k],
                    d[k],
                    row.design[k],
                    speedup(b[k], d[k]),
                    speedup(row.base[k], row.design[k]),
                    a[k]
                ),
            );
        }
    }
    line(&mut out, "\n### Table 5-4 (ms; predicted / measured)\n");
    line(
        &mut out,
        "| replicas | Fwd MoE | Bwd | Grad sync | Overall | speed-up | autoplan |",
    );
    line(&mut out, "|---|---|---|---|---|---|---|");
    let t = table_5_4();
    for (p, (r, m)) in t.iter().zip(&TABLE_5_4) {
        line(&mut out, format!(
            "| {r} | {:.0} / {:.0} | {:.0} / {:.0} | {:.0} / {:.0} | {:.0} / {:.0} | {} / {} | {:.0} |",
            p[0],
            m[0],
            p[1],
            m[1],
            p[2],
            m[2],
            p[3],
            m[3],
            speedup(t[0][3], p[3]),
            speedup(TABLE_5_4[0].1[3], m[3]),
            ms(predict("thesis-txl-94m", "thesis-4node", None, 40, Policy::Autoplan(*r)).overall)
        ));
    }
    line(&mut out, "\n### Table 2-1 (ms; predicted / measured)\n");
    line(&mut out, "| model | all-to-all | step | share |");
    line(&mut out, "|---|---|---|---|");
    for (s, (m, [a2a, step])) in table_2_1().iter().zip(&TABLE_2_1) {
        line(
            &mut out,
            format!(
                "| {m} | {:.0} / {a2a:.0} | {:.0} / {step:.0} | {:.1}% / {:.1}% |",
                ms(s.a2a),
                ms(s.overall),
                100.0 * s.a2a / s.overall,
                100.0 * a2a / step
            ),
        );
    }
    line(
        &mut out,
        "\n### With DeepSpeed-MoE's einsum dispatch priced (ms; predicted / measured)\n",
    );
    line(
        &mut out,
        "| row | Fwd MoE speed-up | Bwd speed-up | Overall baseline | Overall design | speed-up | baseline − design (without) |",
    );
    line(&mut out, "|---|---|---|---|---|---|---|");
    let mut rows: Vec<Row> = ROWS.to_vec();
    rows.extend(TABLE_5_4[1..].iter().map(|&(r, m)| Row {
        label: "5-4 94M b40",
        model: "thesis-txl-94m",
        cluster: "thesis-4node",
        batch: 40,
        replicas: r,
        base: TABLE_5_4[0].1,
        design: m,
        winner: true,
    }));
    for row in rows {
        let (label, model, cluster, batch, r) =
            (row.label, row.model, row.cluster, row.batch, row.replicas);
        let (mb, md) = (row.base, row.design);
        let run = |p, e| stages_ms(&predict_with(model, cluster, None, batch, p, e));
        let (b, d) = (run(Policy::Baseline, true), run(Policy::Design(r), true));
        let (b0, d0) = (run(Policy::Baseline, false), run(Policy::Design(r), false));
        line(
            &mut out,
            format!(
                "| {label} R{r} | {} / {} | {} / {} | {:.0} / {:.0} | {:.0} / {:.0} | {} / {} | {:.1} ({:.1}) |",
                speedup(b[0], d[0]),
                speedup(mb[0], md[0]),
                speedup(b[1], d[1]),
                speedup(mb[1], md[1]),
                b[3],
                mb[3],
                d[3],
                md[3],
                speedup(b[3], d[3]),
                speedup(mb[3], md[3]),
                b[3] - d[3],
                b0[3] - d0[3],
            ),
        );
    }
    line(&mut out, "");
    line(&mut out, "| Table 2-1 model | step | share |");
    line(&mut out, "|---|---|---|");
    for (m, [a2a, step]) in TABLE_2_1 {
        let s = predict_with(m, "thesis-4node", Some(2), 24, Policy::Baseline, true);
        line(
            &mut out,
            format!(
                "| {m} | {:.0} / {step:.0} | {:.1}% / {:.1}% |",
                ms(s.overall),
                100.0 * s.a2a / s.overall,
                100.0 * a2a / step
            ),
        );
    }
    // Every table line generated above is in the manual, verbatim.
    let doc = include_str!("../../../docs/thesis.md");
    let stale: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with('|') && !doc.lines().any(|d| d == *l))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/thesis.md is out of date (rerun `cargo test -p autoplan-evaluate --test thesis \
         -- --nocapture` and paste its tables): {stale:#?}"
    );
}
