//! The evaluator's mechanisms checked by hand on tiny and bundled models: the memory peak,
//! finer experts, a parallel block's reduction, one micro-batch under every schedule,
//! `recompute_layers`, sequence parallelism's and the input gradient's collectives, the
//! `alltoall` dispatcher's sort (the metamorphic properties are in `evaluate.rs`).

use autoplan_cluster::Precision;
use autoplan_cost::calibration::dgx_a100;
use autoplan_evaluate::Pass;
use autoplan_evaluate::{CommKind, EvalOptions, Evaluator};
use autoplan_graph::ModelSpec;
use autoplan_plan::{Plan, Recompute, Schedule, Zero};

mod tiny;
use tiny::{close, tiny_gpt};

/// `memory_peak_bytes` is `evaluate`'s memory peak (fitting or not) and its validity verdict.
#[test]
fn memory_peak_bytes_matches_evaluate() {
    use autoplan_evaluate::{EvalOptions, Evaluator};
    use autoplan_plan::{Plan, Recompute};
    let model = autoplan_graph::resolve_model("gpt3-175b").unwrap();
    let cluster = autoplan_cost::calibration::dgx_a100(8);
    let eval = Evaluator::new(&model, &cluster, EvalOptions::default());
    for (tp, pp, recompute) in [
        (8, 8, Recompute::Full),
        (8, 8, Recompute::None),
        (1, 1, Recompute::None),
        (4, 16, Recompute::Full),
        (8, 7, Recompute::Full),
    ] {
        let plan = Plan {
            tp,
            pp,
            mbs: 1,
            recompute,
            ..Plan::default()
        };
        let mem = eval.memory_peak_bytes(&plan);
        match eval.evaluate(&plan) {
            Ok(m) => assert_eq!(mem.unwrap(), m.memory_peak_bytes, "{plan:?}"),
            Err(autoplan_evaluate::Infeasible::OutOfMemory { peak_bytes, .. }) => {
                assert_eq!(mem.unwrap(), peak_bytes, "{plan:?}")
            }
            Err(_) => assert!(mem.is_err(), "{plan:?}"),
        }
    }
}

#[test]
fn finer_experts_of_the_same_flops_never_compute_faster() {
    // Mixtral-8x7B's MoE split into 2×, 4×, 8× more experts of 1/2, 1/4, 1/8 the width with
    // 2×, 4×, 8× the top-k: the same parameters and FLOPs per token, in more, smaller GEMMs
    // (one per local expert, fewer tokens each: more launches, and a router over more experts).
    let base = autoplan_graph::resolve_model("mixtral-8x7b").expect("bundled");
    let cluster = autoplan_cost::calibration::dgx_h100(8);
    let plan: Plan = "tp=1,pp=4,dp=16,ep=8,mbs=1,zero=1,recompute=selective"
        .parse()
        .unwrap();
    let base_flops = Evaluator::new(&base, &cluster, EvalOptions::default())
        .model_flops()
        .gemm_fwd;
    let mut last = 0.0;
    for split in [1u32, 2, 4, 8] {
        let mut m = base.clone();
        let moe = m.moe.as_mut().unwrap();
        moe.experts *= split;
        moe.top_k *= split;
        moe.expert_ffn_hidden /= split;
        let ev = Evaluator::new(&m, &cluster, EvalOptions::default());
        let r = ev.report(&plan).expect("fits");
        // Same FLOPs up to the router's (h × experts, under 0.1% here).
        let f = ev.model_flops().gemm_fwd;
        assert!(
            (f - base_flops).abs() < 1e-3 * base_flops,
            "split {split}: {f}"
        );
        let c = r.breakdown.compute_s;
        assert!(c >= last, "split {split}: compute {c} < {last}");
        last = c;
    }
}

#[test]
fn a_parallel_block_reduces_its_summed_output_once() {
    // GPT-NeoX's parallel attention + MLP (Black+22 §2.1, `gpt_j_residual`): the MLP's forward
    // reduction (g, or the SP reduce-scatter and its backward all-gather) is the attention's;
    // its input side (f, or the SP all-gather and input-grad reduce-scatter) stays. Compute and
    // parameters are unchanged.
    let seq = tiny_gpt();
    let par = ModelSpec {
        parallel_block: true,
        ..tiny_gpt()
    };
    assert_eq!(seq.total_params(), par.total_params());
    assert_eq!(seq.flops_per_token(), par.flops_per_token());
    let c = dgx_a100(1);
    for sp in [false, true] {
        let plan = Plan {
            tp: 4,
            dp: 2,
            sp,
            ..Plan::default()
        };
        let rows = |m: &ModelSpec| {
            let r = Evaluator::new(m, &c, EvalOptions::default())
                .report(&plan)
                .expect("fits");
            let mut v: Vec<(&'static str, Pass)> = r
                .comm
                .iter()
                .filter(|row| row.kind == CommKind::Tp)
                .filter(|row| row.layer == Some(autoplan_graph::LayerKind::DenseMlp))
                .map(|row| (row.what, row.pass))
                .collect();
            v.sort_by_key(|x| x.0);
            (v, r.metrics.step_time_s, r.breakdown.compute_s)
        };
        let (s_rows, s_step, s_compute) = rows(&seq);
        let (p_rows, p_step, p_compute) = rows(&par);
        let want_seq: Vec<(&str, Pass)> = if sp {
            vec![
                ("mlp input all-gather (SP)", Pass::Forward),
                ("mlp input-grad reduce-scatter (SP)", Pass::Backward),
                ("mlp out reduce-scatter (SP)", Pass::Forward),
                ("mlp out-grad all-gather (SP)", Pass::Backward),
            ]
        } else {
            vec![
                ("mlp input-grad all-reduce (f)", Pass::Backward),
                ("mlp out all-reduce (g)", Pass::Forward),
            ]
        };
        assert_eq!(s_rows, want_seq, "sp {sp}");
        let want_par: Vec<(&str, Pass)> = want_seq
            .iter()
            .copied()
            .filter(|(w, _)| !w.starts_with("mlp out"))
            .collect();
        assert_eq!(p_rows, want_par, "sp {sp}");
        assert_eq!(s_compute, p_compute);
        assert!(p_step < s_step, "sp {sp}: {p_step} vs {s_step}");
    }
}

/// With one micro-batch nothing overlaps: every schedule's pipeline is the micro-batch's pass
/// through all the stages, as 1F1B's (within 2%: DualPipe's stages hide their PP transfers). DualPipe's Table 2 bubble assumes its ranks filled from
/// both ends (at least `2·pp` micro-batches); below that it priced pp 2 with no bubble at all,
/// i.e. half the step (`Schedule::bubble_of`).
#[test]
fn one_micro_batch_gains_nothing_from_any_schedule() {
    let cluster = autoplan_cluster::resolve_cluster("h100x256").unwrap();
    for (pp, dp) in [(2, 128), (4, 64)] {
        // dp sequences: one micro-batch per replica.
        let mut model = autoplan_graph::resolve_model("llama3-8b").unwrap();
        model.training.global_batch = dp;
        let e = Evaluator::new(&model, &cluster, EvalOptions::default());
        let step = |schedule: Schedule, vpp: u32| {
            let plan = Plan {
                pp,
                dp,
                schedule,
                vpp,
                zero: Zero::stage(1),
                ..Plan::default()
            };
            e.evaluate(&plan).unwrap().step_time_s
        };
        let one_f1b = step(Schedule::OneF1B, 1);
        // (Interleaving needs at least pp micro-batches: `Plan::check` refuses it here.)
        for (sch, vpp) in [(Schedule::DualPipe, 1), (Schedule::ZeroBubble, 1)] {
            let t = step(sch, vpp);
            assert!(
                t >= 0.98 * one_f1b,
                "pp {pp}: {sch:?} {t} s against 1F1B's {one_f1b} s"
            );
        }
    }
}

/// `recompute_layers` counts the blocks of one model chunk (Megatron's `--recompute-method
/// block`: the first N of each virtual stage), for the time as for the memory: on an
/// interleaved plan, N equal to a chunk's blocks is full recompute, and N = half a chunk reruns
/// half of full recompute's work (before, the time read N as a share of the whole stage, so an
/// interleaved plan's partial recompute cost 1/vpp of what it stores).
#[test]
fn recompute_layers_count_the_blocks_of_a_chunk() {
    let m = autoplan_graph::resolve_model("llama2-70b").unwrap();
    let c = autoplan_cluster::resolve_cluster("dgx-h100")
        .unwrap()
        .with_gpus(64)
        .unwrap();
    let ev = Evaluator::new(&m, &c, EvalOptions::default());
    // 80 blocks on pp 4 × vpp 5: chunks of 4 blocks.
    let base = Plan {
        tp: 4,
        sp: true,
        pp: 4,
        vpp: 5,
        schedule: Schedule::Interleaved,
        dp: 4,
        zero: Zero::stage(1),
        recompute: Recompute::Full,
        ..Plan::default()
    };
    let with = |n: Option<u32>| {
        ev.report(&Plan {
            recompute_layers: n,
            ..base
        })
        .unwrap()
    };
    let (full, whole, half) = (with(None), with(Some(4)), with(Some(2)));
    assert!(full.breakdown.recompute_s > 0.0);
    assert!(close(
        whole.breakdown.recompute_s,
        full.breakdown.recompute_s,
        1e-12
    ));
    assert!(close(
        whole.metrics.hw_tflops_per_gpu,
        full.metrics.hw_tflops_per_gpu,
        1e-12
    ));
    assert!(close(
        half.breakdown.recompute_s,
        0.5 * full.breakdown.recompute_s,
        1e-9
    ));
    assert!(half.metrics.memory_peak_bytes > full.metrics.memory_peak_bytes);
}

/// What sequence parallelism moves per block (Korthikanti+22 §4.2.2) as Megatron-Core and
/// Transformer Engine move it: the input side is what the column-parallel GEMMs read — the
/// hidden state, or MLA's q and kv latents and rope key (`multi_latent_attention.py` @ core
/// 0.19.2 L744-754; its down-projections run `duplicated` on the rank's rows) — and the output
/// side the hidden state; under a low-precision recipe the all-gathers move the GEMMs' format
/// (TE's `gather_along_first_dim(…, quantizer)`), the reduce-scatters and the LM head 16 bits.
#[test]
fn sequence_parallel_collectives_move_what_the_gemms_read() {
    let cluster = autoplan_cluster::resolve_cluster("h800x2048").unwrap();
    let bytes = |name: &str, precision: Precision| {
        let mut m = autoplan_graph::resolve_model(name).unwrap();
        m.training.global_batch = 1024;
        m.training.precision = precision;
        let plan = Plan {
            tp: 2,
            sp: true,
            pp: 8,
            dp: 128,
            ep: if m.moe.is_some() { 64 } else { 1 },
            zero: Zero::stage(1),
            ..Plan::default()
        };
        let r = Evaluator::new(&m, &cluster, EvalOptions::default())
            .report(&plan)
            .expect("fits");
        let tokens = f64::from(m.training.seq_len);
        let of = |what: &str| {
            r.comm
                .iter()
                .find(|row| row.what == what)
                .unwrap_or_else(|| panic!("{name}: no {what}"))
                .bytes
                / tokens
        };
        (
            [
                of("attention input all-gather (SP)"),
                of("attention out reduce-scatter (SP)"),
                of("attention out-grad all-gather (SP)"),
                of("attention input-grad reduce-scatter (SP)"),
            ],
            of("lm-head input all-gather (SP)"),
        )
    };
    // Bytes per token, in 16 bits and in a low-precision recipe: (input side, output side).
    // GQA reads the 4096-wide hidden state on both sides; DeepSeek-V3 the latents 1536 + 512
    // and the 64-wide rope key in, the 7168-wide hidden state out (the LM head's width too).
    for (name, low, (i, o)) in [
        ("llama3-8b", Precision::Fp8Current, (4096.0, 4096.0)),
        (
            "deepseek-v3",
            Precision::Fp8Block,
            (1536.0 + 512.0 + 64.0, 7168.0),
        ),
    ] {
        assert_eq!(
            bytes(name, Precision::Bf16),
            ([2.0 * i, 2.0 * o, 2.0 * o, 2.0 * i], 2.0 * o),
            "{name}"
        );
        assert_eq!(
            bytes(name, low),
            ([i, 2.0 * o, o, 2.0 * i], 2.0 * o),
            "{name}"
        );
    }
}

/// Megatron's column-parallel backward launches its input gradient's TP collective
/// asynchronously and runs the weight-gradient GEMM meanwhile (megatron-core 0.1.0
/// `tensor_parallel/layers.py` L286-327): without the tiled TP overlap, the `f` all-reduce and
/// SP's input-grad reduce-scatter hide behind that GEMM, where the 2021 profile (synchronous)
/// exposes them; the row-parallel output gradient's all-gather and the forward collectives
/// stay exposed either way, and with the tiled overlap the two profiles agree.
#[test]
fn the_input_gradient_collectives_run_beside_the_weight_gradient() {
    use autoplan_plan::framework::CostProfile;
    let cluster = autoplan_cluster::resolve_cluster("a100x64").unwrap();
    let mut m = autoplan_graph::resolve_model("gpt3-20b").unwrap();
    m.training.global_batch = 64;
    let rows = |profile: &CostProfile, plan: &str| {
        let plan: Plan = plan.parse().unwrap();
        let r = Evaluator::new(
            &m,
            &cluster,
            EvalOptions::default().with_profile(profile, m.training.precision),
        )
        .report(&plan)
        .expect("fits");
        let comm: Vec<_> = r.comm.iter().map(|c| (c.what, c.time, c.exposed)).collect();
        (r.metrics.step_time_s, comm)
    };
    let of = |comm: &[(&str, f64, f64)], what: &str| {
        let &(_, time, exposed) = comm.iter().find(|c| c.0 == what).expect(what);
        (time, exposed)
    };
    let (sync, asy) = (
        &CostProfile::MEGATRON_LM_2021,
        &CostProfile::MEGATRON_LM_2022,
    );
    for (plan, input_grads, exposed_either_way) in [
        (
            "tp=8,pp=1,dp=8,mbs=1,zero=1,recompute=full",
            [
                "attention input-grad all-reduce (f)",
                "mlp input-grad all-reduce (f)",
            ],
            ["attention out all-reduce (g)", "mlp out all-reduce (g)"],
        ),
        (
            "tp=8,sp=on,pp=1,dp=8,mbs=1,zero=1,recompute=full",
            [
                "attention input-grad reduce-scatter (SP)",
                "mlp input-grad reduce-scatter (SP)",
            ],
            [
                "attention out-grad all-gather (SP)",
                "mlp out-grad all-gather (SP)",
            ],
        ),
    ] {
        let ((t_sync, c_sync), (t_async, c_async)) = (rows(sync, plan), rows(asy, plan));
        for what in input_grads {
            let ((time, exposed_sync), (time_a, exposed_async)) =
                (of(&c_sync, what), of(&c_async, what));
            assert_eq!(time, time_a, "{plan}: {what}");
            assert_eq!(exposed_sync, time, "{plan}: {what} synchronous");
            assert!(
                exposed_async < 0.5 * time,
                "{plan}: {what} exposes {exposed_async} of {time} beside the wgrad GEMM"
            );
        }
        for what in exposed_either_way {
            let (time, exposed) = of(&c_async, what);
            assert_eq!(exposed, time, "{plan}: {what}");
            assert_eq!(of(&c_sync, what), (time, exposed), "{plan}: {what}");
        }
        assert!(t_async < t_sync, "{plan}: {t_async} ≥ {t_sync}");
    }
    // With the tiled overlap (Transformer Engine's userbuffers) the asynchronous path is not
    // what hides them: both profiles price the plan alike.
    let tiled = "tp=8,sp=on,pp=1,dp=8,mbs=1,zero=1,recompute=full,tp_overlap=on";
    assert_eq!(rows(sync, tiled).0, rows(asy, tiled).0);
}

/// (Bytes, seconds per call) of the EP rows of DeepSeek-V2-Lite with `experts` experts routed
/// top-`top_k` on `gpus` H100s of `h100x256` (NVLink `nvlink` times its own) at EP = `gpus`,
/// under `dispatcher`.
fn ep_calls(experts: u32, top_k: u32, gpus: u32, nvlink: f64, dispatcher: &str) -> Vec<(f64, f64)> {
    let mut m = autoplan_graph::resolve_model("deepseek-v2-lite").unwrap();
    m.training.global_batch = 64;
    let moe = m.moe.as_mut().unwrap();
    moe.experts = experts;
    moe.top_k = top_k;
    let mut c = autoplan_cluster::resolve_cluster("h100x256")
        .unwrap()
        .with_gpus(gpus)
        .unwrap();
    c.node.intra_bw *= nvlink;
    let plan: Plan = format!("dp={gpus},ep={gpus},mbs=1,zero=1,dispatcher={dispatcher}")
        .parse()
        .unwrap();
    let r = Evaluator::new(&m, &c, EvalOptions::default())
        .report(&plan)
        .expect("fits");
    let rows: Vec<(f64, f64)> = r
        .comm
        .iter()
        .filter(|row| row.kind == CommKind::Ep)
        .map(|row| (row.bytes, row.time_per_call))
        .collect();
    assert_eq!(rows.len(), 4);
    rows
}

/// Megatron-Core's `alltoall` dispatcher reorders the received rows by local expert after the
/// dispatch and back before the combine (and its backward likewise: `token_dispatcher.py` @
/// core 0.19.2 L746-781, L789-815), a memory-bound copy beside each all-to-all that DeepEP's
/// flex path does not make; with one local expert there is nothing to sort.
#[test]
fn the_all_to_all_dispatcher_sorts_by_local_expert() {
    // DeepSeek-V2-Lite on one node, EP 8, with its 64 experts (8 local) or 8 (1 local), routed
    // top-1 so that DeepEP's per-rank deduplication has nothing to remove.
    let calls = |experts: u32, dispatcher: &str| ep_calls(experts, 1, 8, 1.0, dispatcher);
    // Top-1 inside a node DeepEP moves what the all-to-all moves: the sort is the difference, the
    // same copy (read and write of the rank's received rows) beside each of the four calls.
    let extra = |experts| {
        let (a2a, deepep) = (calls(experts, "all-to-all"), calls(experts, "deepep"));
        assert_eq!((a2a.len(), deepep.len()), (4, 4));
        assert!(a2a.iter().zip(&deepep).all(|(a, d)| a.0 == d.0));
        let x: Vec<f64> = a2a.iter().zip(&deepep).map(|(a, d)| a.1 - d.1).collect();
        (x, a2a[0].0)
    };
    let (sorted, bytes) = extra(64);
    assert!(
        sorted.iter().all(|&x| (x / sorted[0] - 1.0).abs() < 1e-9),
        "{sorted:?}"
    );
    let gpu = autoplan_cluster::resolve_cluster("h100x256").unwrap().gpu;
    let copy = |b: f64| autoplan_cost::compute::memory_bound_time(&gpu, 2.0 * b);
    // At least the mean rows' copy, at most the busiest rank's under an imbalance below 2.
    assert!(
        sorted[0] >= copy(bytes) && sorted[0] < copy(2.0 * bytes),
        "{sorted:?}"
    );
    // One local expert: nothing to sort.
    let (one, _) = extra(8);
    assert!(one.iter().all(|&x| x == 0.0), "{one:?}");
}

/// DeepEP sends a token once to each rank holding any of its experts (`is_token_in_rank`,
/// Megatron-Core's `fused_a2a.py`), where the all-to-all dispatcher sends one row per expert:
/// inside a node its four calls move the all-to-all's bytes times the distinct ranks a token's
/// `k` experts reach over `k` (the hypergeometric count), and the same with top-1.
#[test]
fn deepep_sends_a_token_once_per_rank() {
    // DeepSeek-V2-Lite (64 experts, no group-limited routing) on one node, EP 8: 8 experts a rank.
    let bytes = |top_k: u32, dispatcher: &str| -> Vec<f64> {
        let rows = ep_calls(64, top_k, 8, 1.0, dispatcher);
        rows.into_iter().map(|(b, _)| b).collect()
    };
    for k in [1u32, 2, 6, 8] {
        // P(a rank's 8 experts miss all k of 64): C(56, k) / C(64, k).
        let miss: f64 = (0..k)
            .map(|i| (56.0 - i as f64) / (64.0 - i as f64))
            .product();
        let want = 8.0 * (1.0 - miss) / k as f64;
        let (a2a, deepep) = (bytes(k, "all-to-all"), bytes(k, "deepep"));
        for (a, d) in a2a.iter().zip(&deepep) {
            assert!(
                (d / a - want).abs() < 1e-9,
                "top-{k}: {d} / {a}, want {want}"
            );
        }
    }
}

/// Across nodes DeepEP's NVLink stage forwards a token once to each rank of the node holding
/// any of its experts, as inside a node: with NVLink made the slower stage, a call's time
/// grows with the distinct ranks a token's `k` experts reach, not with `k`.
#[test]
fn deepep_forwards_over_nvlink_once_per_rank() {
    // DeepSeek-V2-Lite (64 experts) on two H100 nodes, EP 16 (4 experts a rank), NVLink slowed
    // a thousandfold (0.37 GB/s, below the network's 48) so that the NVLink stage sets the time.
    let time = |top_k: u32| ep_calls(64, top_k, 16, 1e-3, "deepep")[0].1;
    let one = time(1);
    for k in [2u32, 6] {
        // Distinct ranks of 16 (4 experts each) that k of the 64 experts reach.
        let miss: f64 = (0..k)
            .map(|i| (60.0 - i as f64) / (64.0 - i as f64))
            .product();
        let ranks = 16.0 * (1.0 - miss);
        let ratio = time(k) / one;
        assert!(
            (ratio / ranks - 1.0).abs() < 0.05,
            "top-{k}: {ratio:.3}x the top-1 call, {ranks:.3} distinct ranks"
        );
    }
}
