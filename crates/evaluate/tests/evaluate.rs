//! Hand-checked step time on a tiny model and a 2-node cluster, and metamorphic properties:
//! more bandwidth never slows a plan, more HBM never invalidates one, full recompute never
//! stores more activations than selective, `report` agrees with `evaluate`.

use autoplan_cluster::{Cluster, Precision};
use autoplan_cost::calibration::dgx_a100;
use autoplan_cost::compute::{
    attention_bwd_time, attention_fwd_time, gemm_time, memory_bound_time, AttnCall,
};
use autoplan_cost::{AlgoMode, Collective, CostModel};
use autoplan_evaluate::Pass;
use autoplan_evaluate::{AttentionFlops, CommKind, EvalOptions, Evaluator, Infeasible};
use autoplan_plan::{Plan, Recompute, RecomputeModules, Schedule, Zero};
use proptest::prelude::*;

mod tiny;
use tiny::{close, tiny_gpt, tiny_moe};

#[test]
fn hand_checked_step_time_dp16_on_two_nodes() {
    // 2 × DGX A100, pure data parallelism: dp = 16 spans both nodes, 2 micro-batches of one
    // 512-token sequence per GPU. Step = 2 · (forward + backward of every layer) + the gradient
    // all-reduce (one 40M-param bucket: nothing to hide behind) + the Adam step.
    let m = tiny_gpt();
    let c = dgx_a100(2);
    let g = &c.gpu;
    let p = Precision::Bf16;
    let ev = Evaluator::new(&m, &c, EvalOptions::default());
    let plan = Plan {
        dp: 16,
        ..Plan::default()
    };
    let r = ev.report(&plan).expect("fits");
    assert_eq!(r.microbatches, 2);

    let t = 512.0; // tokens per micro-batch
    let h = 512.0;
    let gemm = |n: f64, k: f64| gemm_time(g, 2.0 * t * n * k, t, n, k, p);
    let mem = |bytes_per_token: f64| memory_bound_time(g, 2.0 * bytes_per_token * t);
    // Attention: q, k, v (h → h each) launched as one fused h → 3h GEMM (Megatron's
    // linear_qkv), o (h → h); core: one causal call of 8 heads × 512 tokens, head dim 64
    // (forward and backward as autoplan-cost prices the kernel); stored activations
    // (Korthikanti 11h + dropout mask h at 16 bits = 13h bytes per token).
    let attn_gemm = gemm(3.0 * h, h) + gemm(h, h);
    let call = AttnCall::causal(8.0, t, 64.0, 64.0);
    assert_eq!(call.flops(), 8.0 * 128.0 * 512.0 * t);
    let io = (2.0 * h + 2.0 * h) * t * 2.0;
    let core = attention_fwd_time(g, &call, io, p);
    let core_bwd = attention_bwd_time(g, &call, io, p);
    let attn_mem = mem(13.0 * h);
    // MLP: fc1 h → 4h, fc2 4h → h; stored 2·2h + 2·2·4h + h = 21h bytes per token.
    let mlp_gemm = gemm(4.0 * h, h) + gemm(h, 4.0 * h);
    let mlp_mem = mem(21.0 * h);
    // Embedding (dropout mask h), final norm (2h), LM head (2h input + GEMM h → V), CE (4V).
    let emb = mem(h);
    let norm = mem(2.0 * h);
    let head_gemm = gemm(1024.0, h);
    let head_mem = mem(2.0 * h);
    let ce = mem(4.0 * 1024.0);
    let fwd = emb
        + 2.0 * (attn_gemm + core + attn_mem + mlp_gemm + mlp_mem)
        + norm
        + head_gemm
        + head_mem
        + ce;
    let bwd = 2.0 * (emb + norm + head_gemm + head_mem + ce)
        + 2.0 * (2.0 * attn_gemm + core_bwd + 2.0 * attn_mem + 2.0 * mlp_gemm + 2.0 * mlp_mem);
    let params = m.total_params();
    let cm = CostModel::new(&c);
    let dp_group = c.group_placement(&[1, 1, 16, 1], &[false, false, true, false]);
    assert_eq!(
        (dp_group.size, dp_group.ranks_per_node, dp_group.nodes),
        (16, 8, 2)
    );
    let ar = cm
        .collective(
            Collective::AllReduce,
            dp_group,
            4.0 * params,
            AlgoMode::Cheapest,
        )
        .time;
    // Fused Adam (28 B), the gradient norm (4), the copy to the 16-bit weights (6).
    let adam = memory_bound_time(g, 38.0 * params);
    let want = 2.0 * (fwd + bwd) + ar + adam;
    let got = r.metrics.step_time_s;
    assert!(close(got, want, 1e-9), "step {got} vs hand {want}");
    assert!(close(r.breakdown.dp_exposed_s, ar, 1e-9));
    assert!(close(r.breakdown.optimizer_s, adam, 1e-9));
    assert_eq!(r.breakdown.bubble_s, 0.0);
    assert_eq!(r.metrics.dominant_comm, CommKind::Dp);
    // Memory (autoplan-memory, Megatron's bytes per parameter): 2-byte weights, 4-byte fp32
    // gradients, 12-byte Adam state, all unsharded (ZeRO 0, tp = pp = 1), plus the 3 GiB reserve.
    let mm = &r.memory;
    assert!(
        close(mm.weights, 2.0 * params, 1e-9),
        "{} vs {}",
        mm.weights,
        2.0 * params
    );
    assert!(close(mm.grads, 4.0 * params, 1e-9));
    assert!(close(mm.optimizer, 12.0 * params, 1e-9));
    assert!(close(mm.reserve, 3.0 * 1024.0 * 1024.0 * 1024.0, 1e-12));
    assert_eq!(r.metrics.memory_peak_bytes, mm.total);
    // Throughput and MFU follow from the step: 32 sequences of 512 tokens; model FLOPs
    // 3·(GEMM + causal attention) per token (the default convention): the graph's forward
    // FLOPs per token, attention core causal, times 3.
    let tokens = 32.0 * 512.0;
    assert!(close(r.metrics.tokens_per_s, tokens / want, 1e-9));
    let flops_tok = 3.0 * m.flops_per_token();
    let mfu = tokens * flops_tok / want / 16.0 / 312e12;
    assert!(
        close(r.metrics.mfu, mfu, 1e-9),
        "{} vs {mfu}",
        r.metrics.mfu
    );
}

#[test]
fn sharding_modes_pay_their_per_micro_batch_collectives() {
    // tiny-gpt, dp = 16 over two DGX A100 nodes, 2 micro-batches, one bucket (nothing hides
    // but what a pass's compute covers): each mode's DP exposure, collective by collective.
    let m = tiny_gpt();
    let c = dgx_a100(2);
    let ev = Evaluator::new(&m, &c, EvalOptions::default());
    let cm = CostModel::new(&c);
    let params = m.total_params();
    let g = c.group_placement(&[1, 1, 16, 1], &[false, false, true, false]);
    let coll = |op, g, bytes| cm.collective(op, g, bytes, AlgoMode::Cheapest).time;
    let rs = coll(Collective::ReduceScatter, g, 4.0 * params);
    let ag = coll(Collective::AllGather, g, 2.0 * params);
    let run = |zero: &str| {
        let plan: Plan = format!("dp=16,zero={zero}").parse().unwrap();
        ev.report(&plan).expect("fits")
    };
    let (z1, z2, z3, nr) = (run("1"), run("2"), run("3"), run("3-noreshard"));
    assert_eq!(z1.microbatches, 2);
    // ZeRO-1: one reduce-scatter and one all-gather per step (nothing to hide behind: one
    // bucket). ZeRO-2: the reduce-scatters after each of the 2 backwards, one per block (2
    // blocks, each of half the gradients): at least the last block's is exposed, at most
    // both, and together they cost more than one reduce-scatter of the whole (a latency more).
    let step = |r: &autoplan_evaluate::Report| r.metrics.step_time_s;
    assert!(close(z1.breakdown.dp_exposed_s, rs + ag, 1e-9));
    let rs_half = coll(Collective::ReduceScatter, g, 2.0 * params);
    assert!(2.0 * rs_half > rs);
    let e2 = z2.breakdown.dp_exposed_s - ag;
    assert!(
        e2 >= 2.0 * rs_half - 1e-12 && e2 <= 2.0 * 2.0 * rs_half + 1e-12,
        "{e2} vs {rs_half}"
    );
    assert!(step(&z2) > step(&z1));
    let rs_row = |r: &autoplan_evaluate::Report| {
        r.comm
            .iter()
            .find(|c| c.collective == Collective::ReduceScatter)
            .expect("a gradient reduce-scatter")
            .clone()
    };
    assert_eq!(rs_row(&z1).calls_per_step, 1.0);
    assert_eq!(rs_row(&z2).calls_per_step, 2.0 * 2.0);
    assert!(close(rs_row(&z2).time_per_call, rs_half, 1e-9));
    assert_eq!(rs_row(&z2).pass, Pass::Backward);
    // ZeRO-3 gathers before each forward and backward and reduce-scatters after each backward;
    // without resharding the backward gather is gone. FSDP does each unit, a block, as a
    // collective of its own: tiny-gpt's 2 blocks, 2 gathers per pass, each of half the
    // parameters and priced as such (its latency paid per call).
    assert!(step(&z3) > step(&nr));
    let gathers = |r: &autoplan_evaluate::Report| {
        r.comm
            .iter()
            .filter(|c| c.collective == Collective::AllGather)
            .map(|c| c.calls_per_step)
            .sum::<f64>()
    };
    assert_eq!(gathers(&z3), 2.0 * 2.0 * 2.0);
    assert_eq!(gathers(&nr), 2.0 * 2.0);
    let rs3 = rs_row(&z3);
    assert!(close(rs3.bytes, 4.0 * params / 2.0, 1e-12));
    assert!(close(
        rs3.time_per_call,
        coll(Collective::ReduceScatter, g, 4.0 * params / 2.0),
        1e-9
    ));
    // Two collectives of half the bytes cost more than one of all of them (a latency more).
    assert!(2.0 * rs3.time_per_call > rs);
    // Memory: ZeRO-3 shards the weights; without resharding the whole copy is held too.
    assert!(close(z3.memory.weights, 2.0 * params / 16.0, 1e-9));
    assert!(close(
        nr.memory.weights,
        2.0 * params * (1.0 + 1.0 / 16.0),
        1e-9
    ));
    assert!(close(z2.memory.grads, 4.0 * params / 16.0, 1e-9));
    assert!(close(z1.memory.grads, 4.0 * params, 1e-9));
    // HSDP, shard groups of 8 (one node each): gathers and reduce-scatters inside the node,
    // the reduced shard (1/8 of the gradients) all-reduced between the two nodes after each
    // backward; optimizer state sharded 8 ways, not 16.
    let h = run("3:8");
    let inner = c.group_placement(&[8, 2], &[true, false]);
    let cross = c.group_placement(&[8, 2], &[false, true]);
    assert_eq!(
        (inner.size, inner.nodes, cross.size, cross.nodes),
        (8, 1, 2, 2)
    );
    let ar = h
        .comm
        .iter()
        .find(|c| c.collective == Collective::AllReduce)
        .expect("the cross-group all-reduce");
    assert_eq!((ar.group.size, ar.group.nodes), (2, 2));
    assert!(close(ar.bytes, 4.0 * params / 8.0 / 2.0, 1e-12));
    assert_eq!(ar.calls_per_step, 2.0 * 2.0);
    let t_ar = coll(Collective::AllReduce, cross, 4.0 * params / 8.0 / 2.0);
    assert!(close(ar.time_per_call, t_ar, 1e-9));
    let rs_h = rs_row(&h);
    assert_eq!((rs_h.group.size, rs_h.group.nodes), (8, 1));
    assert!(close(h.memory.optimizer, 12.0 * params / 8.0, 1e-9));
    assert!(h.memory.optimizer > z3.memory.optimizer);
}

/// FSDP's per-block collectives pay their latency per block: on all 16 384 GPUs of
/// `h100x16384`, Llama 3 8B under plain ZeRO-3 runs 32 gathers a pass over a 16 384-rank ring
/// (~35 ms of latency each), so it is slower than the same plan sharded in groups of 64 (HSDP),
/// whose rings are 64 ranks long; it was priced as one gather of the whole stage, whose latency
/// counted once, and came out as fast.
#[test]
fn fsdp_pays_each_blocks_collective_latency() {
    let m = {
        let mut m = autoplan_graph::resolve_model("llama3-8b").unwrap();
        m.training.global_batch = 16384;
        m
    };
    let c = autoplan_cluster::resolve_cluster("h100x16384").unwrap();
    let ev = Evaluator::new(&m, &c, EvalOptions::default());
    let run = |zero: &str| {
        let plan: Plan = format!("dp=16384,mbs=1,recompute=none,zero={zero}")
            .parse()
            .unwrap();
        ev.report(&plan).expect("fits")
    };
    let (full, hsdp) = (run("3"), run("3:64"));
    let gather = full
        .comm
        .iter()
        .find(|r| r.collective == Collective::AllGather)
        .unwrap();
    assert_eq!(gather.calls_per_step, f64::from(m.layers));
    let cm = CostModel::new(&c);
    let g = c.group_placement(&[16384], &[true]);
    let one = cm.collective(Collective::AllGather, g, gather.bytes, AlgoMode::Cheapest);
    assert!(close(gather.time_per_call, one.time, 1e-9));
    assert!(
        one.time > 0.02,
        "a 16 384-rank ring pays tens of ms: {}",
        one.time
    );
    let step = |r: &autoplan_evaluate::Report| r.metrics.step_time_s;
    assert!(
        step(&full) > 2.0 * step(&hsdp),
        "{} vs {}",
        step(&full),
        step(&hsdp)
    );
}

#[test]
fn gpt_model_flops_match_megatron() {
    // Megatron (Narayanan 2021): 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) model FLOPs per step.
    // The formula omits biases and norms' FLOPs (none are GEMMs) and the position table.
    let m = tiny_gpt();
    let ev = Evaluator::new(&m, &dgx_a100(2), EvalOptions::default());
    let (l, h, s, v) = (2.0, 512.0, 512.0, 1024.0);
    let megatron = 72.0 * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h)) / s;
    let full = ev.model_flops().model_per_token(AttentionFlops::Full);
    assert!(close(full, megatron, 1e-12));
    // The causal convention halves the s/(6h) term: Megatron-LM's count since 2025.
    let causal = 72.0 * s * l * h * h * (1.0 + s / (12.0 * h) + v / (12.0 * l * h)) / s;
    let ours = ev.model_flops().model_per_token(AttentionFlops::Causal);
    assert!(close(ours, causal, 1e-12));
}

#[test]
fn tensor_parallel_adds_the_conjugate_all_reduces() {
    // tp = 8 inside a node, no SP: per block one forward (g) and one backward (f) all-reduce
    // of b·s·h in attention and in the MLP (seed 003: 4 per layer), plus the vocab-parallel
    // embedding's forward all-reduce, the LM head's backward one and the cross-entropy's 3.
    let m = tiny_gpt();
    let ev = Evaluator::new(&m, &dgx_a100(2), EvalOptions::default());
    let plan = Plan {
        tp: 8,
        dp: 2,
        ..Plan::default()
    };
    let r = ev.report(&plan).unwrap();
    let calls = |what: &str| -> f64 {
        r.comm
            .iter()
            .filter(|c| c.what.contains(what))
            .map(|c| c.calls_per_step)
            .sum()
    };
    let micro = r.microbatches as f64;
    assert_eq!(calls("all-reduce (g)"), 2.0 * 2.0 * micro);
    assert_eq!(calls("all-reduce (f)"), 2.0 * 2.0 * micro + micro);
    assert_eq!(calls("vocab-parallel embedding all-reduce"), micro);
    assert_eq!(calls("cross-entropy"), 3.0 * micro);
    let ar = r.comm.iter().find(|c| c.what.contains("(g)")).unwrap();
    assert_eq!(ar.bytes, 512.0 * 512.0 * 2.0);
    assert!(ar.group.intra_node() && ar.group.size == 8);
    assert!(r.breakdown.tp_exposed_s > 0.0);
}

#[test]
fn moe_plan_has_dispatch_combine_and_expert_gradients() {
    let m = tiny_moe();
    let ev = Evaluator::new(&m, &dgx_a100(2), EvalOptions::default());
    let plan = Plan {
        tp: 2,
        sp: true,
        dp: 8,
        ep: 8,
        zero: Zero::stage(1),
        ..Plan::default()
    };
    let r = ev.report(&plan).unwrap();
    let a2a: Vec<_> = r
        .comm
        .iter()
        .filter(|c| c.collective == Collective::AllToAll)
        .collect();
    assert_eq!(a2a.len(), 4, "dispatch + combine, forward and backward");
    // Tokens a rank dispatches: mbs·s/tp = 512, × top-2 × h × 2 bytes.
    assert_eq!(a2a[0].bytes, 512.0 * 2.0 * 1024.0 * 2.0);
    assert_eq!(a2a[0].calls_per_step, 3.0 * r.microbatches as f64);
    assert!(r
        .comm
        .iter()
        .any(|c| c.what.contains("EDP expert gradient")));
    assert!(r.breakdown.ep_exposed_s > 0.0);
}

/// The module sets the tiny models can take (no MLA, no shared experts).
const TINY_MODULES: [u8; 5] = [
    RecomputeModules::CORE_ATTN,
    RecomputeModules::LAYERNORM,
    RecomputeModules::MOE_ACT,
    RecomputeModules::MLP,
    RecomputeModules::MOE,
];

#[test]
fn recompute_modules_price_what_they_rerun() {
    let m = tiny_moe();
    let ev = Evaluator::new(&m, &dgx_a100(2), EvalOptions::default());
    let base = Plan {
        tp: 2,
        sp: true,
        dp: 8,
        ep: 4,
        zero: Zero::stage(1),
        recompute: Recompute::Selective,
        ..Plan::default()
    };
    let with = |set: u8| {
        ev.report(&Plan {
            recompute_modules: RecomputeModules(set),
            ..base
        })
        .unwrap()
    };
    let rc = |set: u8| with(set).breakdown.recompute_s;
    // Each module alone reruns some work; the whole MoE layer more than its activation.
    for &b in &TINY_MODULES {
        assert!(rc(b) > 0.0, "module {b}");
    }
    assert!(rc(RecomputeModules::MOE) > rc(RecomputeModules::MOE_ACT));
    assert!(rc(RecomputeModules::MLP) > rc(RecomputeModules::LAYERNORM));
    // Sets add up (modules of different layers are disjoint work).
    let both = RecomputeModules::CORE_ATTN | RecomputeModules::MOE_ACT;
    assert!(close(
        rc(both),
        rc(RecomputeModules::CORE_ATTN) + rc(RecomputeModules::MOE_ACT),
        1e-12
    ));
    // Only `moe` reruns the dispatch and combine: recompute rows of the EP all-to-alls.
    let ep_rc = |set: u8| {
        with(set)
            .comm
            .iter()
            .filter(|c| c.pass == Pass::Recompute && c.collective == Collective::AllToAll)
            .count()
    };
    assert_eq!(ep_rc(RecomputeModules::MOE_ACT), 0);
    assert_eq!(
        ep_rc(RecomputeModules::MOE),
        2,
        "dispatch and combine again"
    );
    // Full recompute reruns them too (the whole block's forward).
    let full = ev
        .report(&Plan {
            recompute: Recompute::Full,
            ..base
        })
        .unwrap();
    assert_eq!(
        full.comm
            .iter()
            .filter(|c| c.pass == Pass::Recompute && c.collective == Collective::AllToAll)
            .count(),
        2
    );
    // Hardware FLOPs count the recomputed matmuls of `moe`; `moe_act` adds none.
    let hw = |set: u8| with(set).metrics.hw_tflops_per_gpu * with(set).metrics.step_time_s;
    let model = with(RecomputeModules::MOE_ACT).metrics;
    assert!(close(
        hw(RecomputeModules::MOE_ACT),
        model.tflops_per_gpu * model.step_time_s,
        1e-12
    ));
    assert!(hw(RecomputeModules::MOE) > hw(RecomputeModules::MOE_ACT));
}

/// DeepSeek-V3's published training (DeepSeek-AI 2024, arXiv:2412.19437): 2048 H800, PP 16
/// with DualPipe, EP 64, ZeRO-1 DP, no TP (§3.2), recomputing RMSNorm and the MLA
/// up-projections (§3.2.3) and the SwiGLU output (§3.3.3, "cache the inputs of the SwiGLU
/// operator and recompute its output"), FP8 GEMMs and FP8-cached linear inputs (§3.3).
/// §4.2's cost: 180K H800 GPU hours per trillion tokens = 1543 tokens/s/GPU.
#[test]
fn deepseek_v3_fits_with_its_published_recompute_and_runs_near_its_reported_speed() {
    let m = autoplan_graph::resolve_model("deepseek-v3").unwrap();
    let c = autoplan_cluster::resolve_cluster("h800x2048").unwrap();
    let ev = Evaluator::new(&m, &c, EvalOptions::default());
    let plan = |rc: &str| {
        Plan::parse_for_gpus(
            &format!(
                "tp=1,pp=16,ep=64,schedule=dualpipe,mbs=1,zero=1,ep_overlap=on,\
                 dispatcher=deepep,recompute={rc}"
            ),
            2048,
        )
        .unwrap()
    };
    // Attention-core recompute alone leaves Q, K, V, the norm outputs and the SwiGLU output
    // of 17 micro-batches in flight: over 80 GiB.
    assert!(matches!(
        ev.evaluate(&plan("selective")),
        Err(Infeasible::OutOfMemory { .. })
    ));
    let published = ev
        .evaluate(&plan("selective:layernorm+mla_up_proj+moe_act"))
        .unwrap();
    assert!(published.memory_peak_bytes <= 80.0 * autoplan_memory::GIB);
    let reported = 1e12 / (180e3 * 3600.0);
    let err = published.tokens_per_s_per_gpu / reported - 1.0;
    assert!(
        err.abs() <= 0.25,
        "{} vs {reported}: {err:+.3}",
        published.tokens_per_s_per_gpu
    );
    // Full recompute also fits, slower: the published choice is the faster of the two.
    let full = ev.evaluate(&plan("full")).unwrap();
    assert!(full.tokens_per_s_per_gpu < published.tokens_per_s_per_gpu);
}

#[test]
fn gpt_oss_banded_layers_cost_less_attention_than_full_ones() {
    // gpt-oss-120b: 18 of 36 blocks attend to a 128-token window at s = 4096, the other 18
    // to the whole causal prefix. The window saves attention-core time and nothing else.
    let m = autoplan_graph::resolve_model("gpt-oss-120b").unwrap();
    let c = autoplan_cluster::resolve_cluster("dgx-h100")
        .unwrap()
        .with_gpus(64)
        .unwrap();
    let plan = Plan::parse_for_gpus("tp=1,pp=4,ep=8,mbs=4,zero=1,recompute=full", 64).unwrap();
    let mut full = m.clone();
    full.window = None;
    let w = Evaluator::new(&m, &c, EvalOptions::default())
        .report(&plan)
        .unwrap();
    let f = Evaluator::new(&full, &c, EvalOptions::default())
        .report(&plan)
        .unwrap();
    assert!(w.metrics.step_time_s < f.metrics.step_time_s);
    assert_eq!(w.metrics.memory_peak_bytes, f.metrics.memory_peak_bytes);
    let b = (&w.breakdown, &f.breakdown);
    assert_eq!(b.0.ep_exposed_s, b.1.ep_exposed_s);
    assert!(b.0.compute_s < b.1.compute_s);
    // Per token, the windowed model does 18 × 2·a·(d_qk + d_v)·(s/2 − (w − w²/2s)) fewer
    // forward FLOPs.
    let (a, d, s, win) = (64.0, 64.0, 4096.0, 128.0);
    let saved = 18.0 * 2.0 * a * 2.0 * d * (s / 2.0 - (win - win * win / (2.0 * s)));
    assert!(close(
        full.flops_per_token() - m.flops_per_token(),
        saved,
        1e-12
    ));
}

#[test]
fn invalid_plans_are_reasons_not_panics() {
    let m = tiny_gpt();
    let ev = Evaluator::new(&m, &dgx_a100(2), EvalOptions::default());
    let wrong_gpus = Plan {
        dp: 8,
        ..Plan::default()
    };
    assert!(matches!(
        ev.evaluate(&wrong_gpus),
        Err(Infeasible::Invalid(_))
    ));
    let heads = Plan {
        tp: 16,
        ..Plan::default()
    };
    assert!(matches!(ev.evaluate(&heads), Err(Infeasible::Invalid(_))));
    let mut small = dgx_a100(2);
    small.gpu.hbm_bytes = 1e6;
    let ev = Evaluator::new(&m, &small, EvalOptions::default());
    let e = ev
        .evaluate(&Plan {
            dp: 16,
            ..Plan::default()
        })
        .unwrap_err();
    assert!(matches!(e, Infeasible::OutOfMemory { .. }));
    assert!(e.to_string().contains("GiB over"), "{e}");
}

fn plans() -> impl Strategy<Value = Plan> {
    (
        prop::sample::select(vec![1u32, 2, 4, 8]),
        prop::sample::select(vec![1u32, 2]),
        prop::sample::select(vec![1u32, 2]),
        prop::bool::ANY,
        prop::sample::select(vec![Recompute::None, Recompute::Selective, Recompute::Full]),
        prop::sample::select(vec![
            Zero::stage(0),
            Zero::stage(1),
            Zero::stage(2),
            Zero::stage(3),
            Zero::NORESHARD,
            Zero::stage(1).hsdp(2),
            Zero::stage(3).hsdp(2),
            Zero::NORESHARD.hsdp(4),
        ]),
        prop::sample::select(vec![1u32, 2]),
        prop::bool::ANY,
        (0u8..32, prop::sample::select(vec![1u32, 2, 4])),
    )
        .prop_map(
            |(tp, pp, cp, sp, recompute, zero, mbs, overlap, (set, ep))| Plan {
                tp,
                pp,
                cp,
                sp,
                dp: 16 / (tp * pp * cp),
                // Dense models reject ep > 1 (the properties skip invalid plans).
                ep,
                recompute,
                recompute_modules: modules(set),
                zero,
                mbs,
                tp_overlap: overlap,
                schedule: Schedule::OneF1B,
                ..Plan::default()
            },
        )
}

/// The subset `set` (5 bits) of [`TINY_MODULES`]; the default when empty.
fn modules(set: u8) -> RecomputeModules {
    let bits = TINY_MODULES
        .iter()
        .enumerate()
        .filter(|(i, _)| set >> i & 1 == 1)
        .fold(0, |acc, (_, b)| acc | b);
    if bits == 0 {
        RecomputeModules::DEFAULT
    } else {
        RecomputeModules(bits)
    }
}

fn faster(c: &Cluster, k: f64) -> Cluster {
    let mut f = c.clone();
    f.node.intra_bw *= k;
    f.network.inter_bw *= k;
    f
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn more_bandwidth_never_slows_a_plan(plan in plans(), k in 1.0f64..8.0, moe in prop::bool::ANY) {
        let m = if moe { tiny_moe() } else { tiny_gpt() };
        let c = dgx_a100(2);
        let slow = Evaluator::new(&m, &c, EvalOptions::default()).evaluate(&plan);
        let fast = Evaluator::new(&m, &faster(&c, k), EvalOptions::default()).evaluate(&plan);
        if let (Ok(s), Ok(f)) = (slow, fast) {
            prop_assert!(f.step_time_s <= s.step_time_s * (1.0 + 1e-12), "{} > {}", f.step_time_s, s.step_time_s);
        }
    }

    #[test]
    fn a_sliding_window_never_slows_a_plan_nor_changes_its_memory(
        plan in plans(),
        moe in prop::bool::ANY,
        tokens in 1u32..1024,
        full_every in prop::sample::select(vec![0u32, 2]),
    ) {
        // Banded attention skips keys: less attention-core work, the same stored tensors
        // (FlashAttention keeps no score matrix), the same communication.
        let full = if moe { tiny_moe() } else { tiny_gpt() };
        let mut win = full.clone();
        win.window = Some(autoplan_graph::SlidingWindow { tokens, full_every });
        let c = dgx_a100(2);
        let f = Evaluator::new(&full, &c, EvalOptions::default()).evaluate(&plan);
        let w = Evaluator::new(&win, &c, EvalOptions::default()).evaluate(&plan);
        match (f, w) {
            (Ok(f), Ok(w)) => {
                prop_assert!(w.step_time_s <= f.step_time_s * (1.0 + 1e-12), "{} > {}", w.step_time_s, f.step_time_s);
                prop_assert_eq!(w.memory_peak_bytes, f.memory_peak_bytes);
                if tokens < full.training.seq_len {
                    prop_assert!(win.flops_per_token() < full.flops_per_token());
                }
            }
            (f, w) => prop_assert_eq!(f.is_ok(), w.is_ok()),
        }
    }

    #[test]
    fn unfused_elementwise_ops_never_speed_a_plan(
        plan in plans(),
        moe in prop::bool::ANY,
        flags in 0u8..16,
    ) {
        // Any subset of the ops a framework runs unfused (eager PyTorch) against every chain
        // fused (Megatron-Core): never faster, the same memory (the mechanism moves bytes
        // through HBM, it stores nothing more). tiny-gpt has dropout; tiny-moe RMSNorm, RoPE
        // and SwiGLU, where running all four unfused is strictly slower.
        use autoplan_evaluate::Elementwise;
        let m = if moe { tiny_moe() } else { tiny_gpt() };
        let c = dgx_a100(2);
        let e = Elementwise {
            rmsnorm: flags & 1 != 0,
            rope: flags & 2 != 0,
            gated_act: flags & 4 != 0,
            dropout: flags & 8 != 0,
        };
        let fused = Evaluator::new(&m, &c, EvalOptions::default()).evaluate(&plan);
        let opts = EvalOptions { elementwise: e, ..EvalOptions::default() };
        let eager = Evaluator::new(&m, &c, opts).evaluate(&plan);
        match (fused, eager) {
            (Ok(f), Ok(u)) => {
                prop_assert!(u.step_time_s >= f.step_time_s * (1.0 - 1e-12), "{} < {}", u.step_time_s, f.step_time_s);
                prop_assert_eq!(u.memory_peak_bytes, f.memory_peak_bytes);
                if moe && e == Elementwise::EAGER {
                    prop_assert!(u.step_time_s > f.step_time_s, "{} = {}", u.step_time_s, f.step_time_s);
                }
            }
            (f, u) => prop_assert_eq!(f.is_ok(), u.is_ok()),
        }
    }

    #[test]
    fn more_hbm_never_invalidates_a_plan(plan in plans(), k in 1.0f64..4.0) {
        let m = tiny_gpt();
        let mut c = dgx_a100(2);
        c.gpu.hbm_bytes = 2e9;
        let before = Evaluator::new(&m, &c, EvalOptions::default()).evaluate(&plan);
        c.gpu.hbm_bytes *= k;
        let after = Evaluator::new(&m, &c, EvalOptions::default()).evaluate(&plan);
        if before.is_ok() {
            prop_assert!(after.is_ok());
        }
        if let Err(Infeasible::Invalid(_)) = before {
            prop_assert!(matches!(after, Err(Infeasible::Invalid(_))));
        }
    }

    #[test]
    fn report_agrees_with_evaluate_and_parts_sum_to_step(plan in plans(), moe in prop::bool::ANY) {
        let m = if moe { tiny_moe() } else { tiny_gpt() };
        let ev = Evaluator::new(&m, &dgx_a100(2), EvalOptions::default());
        if let Ok(metrics) = ev.evaluate(&plan) {
            let r = ev.report(&plan).unwrap();
            prop_assert_eq!(metrics, r.metrics);
            prop_assert!(close(r.breakdown.total(), metrics.step_time_s, 1e-9));
            prop_assert!(metrics.mfu > 0.0 && metrics.mfu <= metrics.hfu + 1e-12);
            prop_assert!(ev.lower_bound(&Default::default()) <= metrics.step_time_s);
            let slowest = r.stages.iter().map(|s| s.time_per_microbatch_s).fold(0.0, f64::max);
            prop_assert!(r.stages.iter().all(|s| s.time_per_microbatch_s > 0.0));
            prop_assert!(slowest * r.microbatches as f64 <= metrics.step_time_s * (1.0 + 1e-9));
        }
    }

    #[test]
    fn comm_table_exposed_sums_to_the_breakdown(plan in plans(), moe in prop::bool::ANY) {
        // Every exposed second of the breakdown is a row of the table (recompute included).
        let m = if moe { tiny_moe() } else { tiny_gpt() };
        let ev = Evaluator::new(&m, &dgx_a100(2), EvalOptions::default());
        if let Ok(r) = ev.report(&plan) {
            let sum = |k: CommKind| -> f64 { r.comm.iter().filter(|c| c.kind == k).map(|c| c.exposed).sum() };
            let b = &r.breakdown;
            for (k, want) in [
                (CommKind::Tp, b.tp_exposed_s),
                (CommKind::Cp, b.cp_exposed_s),
                (CommKind::Ep, b.ep_exposed_s),
                (CommKind::Pp, b.pp_exposed_s),
                (CommKind::Dp, b.dp_exposed_s),
            ] {
                prop_assert!((sum(k) - want).abs() <= 1e-9 * want.max(1e-6), "{:?}: {} vs {}", k, sum(k), want);
            }
        }
    }

    #[test]
    fn recomputing_more_modules_never_takes_less_time(
        plan in plans(), a in 1u8..32, b in 0u8..32, moe in prop::bool::ANY,
    ) {
        let m = if moe { tiny_moe() } else { tiny_gpt() };
        let ev = Evaluator::new(&m, &dgx_a100(2), EvalOptions::default());
        let at = |set: u8| ev.report(&Plan {
            recompute: Recompute::Selective,
            recompute_modules: modules(set),
            ..plan
        });
        if let (Ok(small), Ok(big)) = (at(a), at(a | b)) {
            prop_assert!(big.breakdown.recompute_s >= small.breakdown.recompute_s * (1.0 - 1e-12));
            prop_assert!(big.metrics.step_time_s >= small.metrics.step_time_s * (1.0 - 1e-12));
            prop_assert!(big.memory.activations <= small.memory.activations * (1.0 + 1e-12));
        }
    }

    #[test]
    fn full_recompute_stores_no_more_activations_than_selective(plan in plans()) {
        let m = tiny_gpt();
        let ev = Evaluator::new(&m, &dgx_a100(2), EvalOptions::default());
        // Megatron's default selective set, the attention core (more modules can store less
        // than full recompute's inputs plus its one-block working set).
        let sel = ev.report(&Plan {
            recompute: Recompute::Selective,
            recompute_modules: RecomputeModules::DEFAULT,
            ..plan
        });
        let full = ev.report(&Plan { recompute: Recompute::Full, ..plan });
        if let (Ok(s), Ok(f)) = (sel, full) {
            prop_assert!(f.memory.activations <= s.memory.activations);
        }
    }
}
