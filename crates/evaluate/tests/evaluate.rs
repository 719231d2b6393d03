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
use autoplan_graph::{
    Attention, Family, Mlp, ModelSpec, Moe, Norm, Optimizer, Positions, Routing, Training,
};
use autoplan_plan::{Plan, Recompute, RecomputeModules, Schedule, Zero};
use proptest::prelude::*;

/// GPT-style: 2 blocks, h 512, 8 heads of 64, GELU 4h, vocab 1024, seq 512, tied.
fn tiny_gpt() -> ModelSpec {
    ModelSpec {
        name: "tiny-gpt".into(),
        family: Family::Gpt,
        layers: 2,
        hidden: 512,
        heads: 8,
        attention: Attention::Gqa {
            kv_heads: 8,
            head_dim: 64,
        },
        window: None,
        ffn_hidden: 2048,
        mlp: Mlp::Gelu,
        norm: Norm::LayerNorm,
        positions: Positions::Learned,
        max_positions: 512,
        vocab: 1024,
        tied_embeddings: true,
        bias: true,
        embedding_norm: false,
        parallel_block: false,
        moe: None,
        mtp_modules: 0,
        training: Training {
            seq_len: 512,
            global_batch: 32,
            precision: Precision::Bf16,
            optimizer: Optimizer::Adam,
            tokens: None,
        },
    }
}

/// Llama-style MoE: 4 blocks (first dense), 16 experts of 512, top-2, h 1024, seq 1024.
fn tiny_moe() -> ModelSpec {
    ModelSpec {
        name: "tiny-moe".into(),
        family: Family::Mixtral,
        layers: 4,
        hidden: 1024,
        heads: 16,
        attention: Attention::Gqa {
            kv_heads: 4,
            head_dim: 64,
        },
        window: None,
        ffn_hidden: 4096,
        mlp: Mlp::Swiglu,
        norm: Norm::RmsNorm,
        positions: Positions::Rope,
        max_positions: 0,
        vocab: 2048,
        tied_embeddings: false,
        bias: false,
        embedding_norm: false,
        parallel_block: false,
        moe: Some(Moe {
            experts: 16,
            top_k: 2,
            shared_experts: 0,
            expert_ffn_hidden: 512,
            shared_ffn_hidden: 0,
            first_dense_layers: 1,
            routing: Routing::TopK,
            capacity_factor: None,
            load_imbalance: 1.2,
            groups: 1,
            group_top_k: 1,
        }),
        mtp_modules: 0,
        training: Training {
            seq_len: 1024,
            global_batch: 64,
            precision: Precision::Bf16,
            optimizer: Optimizer::Adam,
            tokens: None,
        },
    }
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-30)
}

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

/// Megatron-Core's `alltoall` dispatcher reorders the received rows by local expert after the
/// dispatch and back before the combine (and its backward likewise: `token_dispatcher.py` @
/// core 0.19.2 L746-781, L789-815), a memory-bound copy beside each all-to-all that DeepEP's
/// flex path does not make; with one local expert there is nothing to sort.
#[test]
fn the_all_to_all_dispatcher_sorts_by_local_expert() {
    // DeepSeek-V2-Lite on one node, EP 8, with its 64 experts (8 local) or 8 (1 local).
    let calls = |experts: u32, dispatcher: &str| {
        let mut m = autoplan_graph::resolve_model("deepseek-v2-lite").unwrap();
        m.training.global_batch = 64;
        m.moe.as_mut().unwrap().experts = experts;
        let c = autoplan_cluster::resolve_cluster("h100x256")
            .unwrap()
            .with_gpus(8)
            .unwrap();
        let plan: Plan = format!("dp=8,ep=8,mbs=1,zero=1,dispatcher={dispatcher}")
            .parse()
            .unwrap();
        let r = Evaluator::new(&m, &c, EvalOptions::default())
            .report(&plan)
            .expect("fits");
        r.comm
            .iter()
            .filter(|row| row.kind == CommKind::Ep)
            .map(|row| (row.bytes, row.time_per_call))
            .collect::<Vec<_>>()
    };
    // Inside a node DeepEP moves what the all-to-all moves: the sort is the difference, the
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
