//! The memory model against hand computations (Korthikanti et al. 2022, a tiny GPT) and its
//! monotonicity properties over random valid plans.

use autoplan_graph::{bundled_models, resolve_model, ModelSpec, Precision};
use autoplan_memory::{memory, MemoryOptions, ModelMemory, GIB};
use autoplan_plan::{
    Dispatcher, Plan, Recompute, RecomputeModules, Schedule, TpSpTransition, Zero,
};
use proptest::prelude::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

/// Korthikanti et al. 2022 store the attention scores (no fused attention kernel).
fn korthikanti() -> MemoryOptions {
    MemoryOptions {
        flash_attention: false,
        reserve_bytes: 0.0,
        ..MemoryOptions::default()
    }
}

fn plan(s: &str) -> Plan {
    s.parse().unwrap()
}

#[test]
fn gpt3_175b_per_layer_activations_equal_korthikanti() {
    // Korthikanti et al. 2022, §4.1–4.2, GPT-3 175B: s = 2048, h = 12288, a = 96, b = 1.
    let m = resolve_model("gpt3-175b").unwrap();
    let mm = ModelMemory::new(&m);
    let (s, h, a) = (2048.0, 12288.0, 96.0);
    let sbh = s * h;
    let scores = 5.0 * a * s / h; // = 80
    let o = korthikanti();
    let layer = |p: &str, r: Recompute| mm.block_activation_bytes(&plan(p), &o, false, r);
    // No parallelism: sbh(34 + 5as/h).
    assert!(close(layer("tp=1", Recompute::None), sbh * (34.0 + scores)));
    // Tensor parallelism, t = 8: sbh(10 + 24/t + 5as/(ht)).
    assert!(close(
        layer("tp=8", Recompute::None),
        sbh * (10.0 + 24.0 / 8.0 + scores / 8.0)
    ));
    // Tensor + sequence parallelism: sbh/t (34 + 5as/h).
    assert!(close(
        layer("tp=8,sp=on", Recompute::None),
        sbh / 8.0 * (34.0 + scores)
    ));
    // Selective recompute removes the 5as/h term.
    assert!(close(
        layer("tp=8,sp=on", Recompute::Selective),
        sbh / 8.0 * 34.0
    ));
    assert!(close(
        layer("tp=8", Recompute::Selective),
        sbh * (10.0 + 24.0 / 8.0)
    ));
    // Full recompute keeps the block input: 2sbh, /t with SP.
    assert!(close(layer("tp=8", Recompute::Full), 2.0 * sbh));
    assert!(close(layer("tp=8,sp=on", Recompute::Full), 2.0 * sbh / 8.0));
    // A fused attention kernel never stores the scores.
    let flash = MemoryOptions::default();
    assert!(close(
        mm.block_activation_bytes(&plan("tp=8,sp=on"), &flash, false, Recompute::None),
        sbh / 8.0 * 34.0
    ));
    // Micro-batch b and context parallelism cp scale the tokens: b·s/cp.
    assert!(close(
        layer("tp=8,sp=on,mbs=4,cp=2", Recompute::Selective),
        2.0 * sbh / 8.0 * 34.0
    ));
}

#[test]
fn gpt3_175b_first_stage_holds_pp_microbatches_and_interleaving_more() {
    // Korthikanti §4.2.3: the first 1F1B stage holds p micro-batches of its L/p layers (L layers'
    // worth) plus the embedding dropout mask sbh/t per micro-batch; interleaving with v chunks
    // multiplies that by (1 + (p−1)/(p·v)).
    let m = resolve_model("gpt3-175b").unwrap(); // global batch 1536
    let sbh = 2048.0 * 12288.0;
    let per_mb = 12.0 * sbh / 8.0 * 34.0 + sbh / 8.0;
    let b = memory(
        &m,
        &plan("tp=8,sp=on,pp=8,dp=16,recompute=selective"),
        &korthikanti(),
    );
    assert_eq!(b.stage, 0);
    assert_eq!(b.in_flight, 8.0);
    assert!(close(b.activations, 8.0 * per_mb));
    let b = memory(
        &m,
        &plan("tp=8,sp=on,pp=8,dp=16,recompute=selective,schedule=interleaved,vpp=2"),
        &korthikanti(),
    );
    assert!(close(b.in_flight, 8.0 * (1.0 + 7.0 / 16.0)));
    assert!(close(b.activations, 11.5 * per_mb));
    // Few micro-batches: global batch 1536 / (mbs 16 · dp 24) = 4 < pp.
    let b = memory(
        &m,
        &plan("tp=8,sp=on,pp=8,dp=24,mbs=16,recompute=selective"),
        &korthikanti(),
    );
    assert_eq!(b.in_flight, 4.0);
}

/// A tiny GPT: 2 blocks, h 64, 4 heads, ffn 256, vocab 128, seq 16, tied, LayerNorm, biases.
fn tiny_gpt() -> ModelSpec {
    let mut m = resolve_model("gpt-1.7b").unwrap();
    m.name = "tiny".into();
    m.layers = 2;
    m.hidden = 64;
    m.heads = 4;
    m.attention = autoplan_graph::Attention::Gqa {
        kv_heads: 4,
        head_dim: 16,
    };
    m.ffn_hidden = 256;
    m.vocab = 128;
    m.max_positions = 16;
    m.tied_embeddings = true;
    m.training.seq_len = 16;
    m.training.global_batch = 4;
    m.training.precision = Precision::Bf16;
    m
}

#[test]
fn tiny_gpt_by_hand() {
    let m = tiny_gpt();
    assert!(close(ModelMemory::new(&m).total_params(), m.total_params()));
    // Attention: 4·64² + biases 3·64 + 64 + LayerNorm 128 = 16 768.
    // MLP: 2·64·256 + biases 256 + 64 + LayerNorm 128 = 33 216.
    // Embedding 128·64 + positions 16·64, final LayerNorm 128, tied head (pp = 1): 0.
    let params = 2.0 * (16768.0 + 33216.0) + 8192.0 + 1024.0 + 128.0;
    assert!(close(m.total_params(), params));
    let o = korthikanti();
    let b = memory(&m, &plan("mbs=1"), &o);
    // bf16 with fp32 main grads: 2 + 4 + 12 bytes per parameter.
    assert!(close(b.weights, 2.0 * params));
    assert!(close(b.grads, 4.0 * params));
    assert!(close(b.optimizer, 12.0 * params));
    // Per block s·h·(34 + 5as/h) = 16·64·(34 + 5) bytes; embedding dropout s·h; final norm and
    // head inputs 2·2·s·h; fp32 logits 4·s·V.
    let (s, h) = (16.0, 64.0);
    let acts = 2.0 * s * h * 39.0 + s * h + 4.0 * s * h;
    assert!(close(b.activations, acts), "{} vs {acts}", b.activations);
    assert!(close(b.logits, 4.0 * s * 128.0));
    assert_eq!(b.extra, 0.0);
    assert_eq!(b.transient, 0.0);
    assert!(close(b.total, 18.0 * params + acts + b.logits));

    // ZeRO-1 over dp = 2 halves the optimizer state; ZeRO-2 the gradients; ZeRO-3 the weights
    // and gathers one block (attention + MLP, 49 984 parameters) at a time.
    let z = |s: &str| memory(&m, &plan(s), &o);
    assert!(close(z("dp=2,zero=1").optimizer, 6.0 * params));
    assert!(close(z("dp=2,zero=2").grads, 2.0 * params));
    let z3 = z("dp=2,zero=3");
    assert!(close(z3.weights, params));
    assert!(close(z3.transient, 2.0 * 49984.0));

    // Vocab padding: with tp = 2 the vocabulary is padded to 256 (128·tp), 128 rows per GPU.
    let b = memory(&m, &plan("tp=2"), &o);
    let split = 4.0 * 64.0 * 64.0 + 3.0 * 64.0 + 2.0 * 64.0 * 256.0 + 256.0;
    let replicated = 64.0 + 128.0 + 64.0 + 128.0;
    let per_gpu = 2.0 * (split / 2.0 + replicated) + 128.0 * 64.0 + 1024.0 + 128.0;
    assert!(
        close(b.weights, 2.0 * per_gpu),
        "{} vs {}",
        b.weights,
        2.0 * per_gpu
    );

    // Seed 001: the all-to-all transition keeps out_linear (64×64) whole: half of it is extra.
    let b = memory(&m, &plan("tp=2,sp=on,transition=all-to-all"), &o);
    assert!(close(b.extra, 2.0 * 64.0 * 64.0 / 2.0 * 18.0));
}

#[test]
fn fp16_keeps_master_gradients_in_the_optimizer() {
    // Megatron's distributed-optimizer table: fp16 params/grads: 4 + 16/d; bf16 with fp32 grads:
    // 6 + 12/d bytes per parameter.
    let mut m = tiny_gpt();
    m.training.precision = Precision::Fp16;
    let p = plan("dp=4,zero=1");
    // 16-bit gradients: what autoplan-evaluate's options give FP16 training (`with_profile`).
    let o16 = MemoryOptions {
        fp32_main_grads: false,
        ..MemoryOptions::default()
    };
    let b = memory(&m, &p, &o16);
    let n = m.total_params();
    assert!(close(
        b.weights + b.grads + b.optimizer,
        (4.0 + 16.0 / 4.0) * n
    ));
    let bf = MemoryOptions::default();
    let b = memory(&m, &p, &bf);
    assert!(close(
        b.weights + b.grads + b.optimizer,
        (6.0 + 12.0 / 4.0) * n
    ));
}

#[test]
fn pytorch_mixed_precision_keeps_fp32_parameters_and_no_master() {
    // PyTorch's FSDP and autocast keep the parameter in fp32 and cast a 16-bit copy per use
    // (`MemoryOptions::fp32_params`): 4 (parameter) + 4 (fp32 gradient) + 8 (Adam's moments) =
    // 16 bytes a parameter, sharded as the ZeRO stage says, against Megatron's 2 + 4 + 12 = 18.
    let m = tiny_gpt();
    let n = m.total_params();
    let torch = MemoryOptions {
        fp32_params: true,
        ..MemoryOptions::default()
    };
    let states = |b: &autoplan_memory::MemoryBreakdown| b.weights + b.grads + b.optimizer;
    for (p, torch_bytes, megatron_bytes) in [
        ("dp=1", 16.0, 18.0),
        // Stage 1 under PyTorch is FSDP gathering once per step: the fp32 shard, the 16-bit
        // copy kept for the step, unsharded fp32 gradients, the states' shard.
        (
            "dp=4,zero=1",
            4.0 / 4.0 + 2.0 + 4.0 + 8.0 / 4.0,
            6.0 + 12.0 / 4.0,
        ),
        ("dp=4,zero=2", 4.0 + 12.0 / 4.0, 2.0 + 16.0 / 4.0),
        ("dp=4,zero=3", 16.0 / 4.0, 18.0 / 4.0),
    ] {
        let b = memory(&m, &plan(p), &torch);
        assert!(
            close(states(&b), torch_bytes * n),
            "{p}: {}",
            states(&b) / n
        );
        assert!(
            close(b.optimizer, 8.0 * n / if p == "dp=1" { 1.0 } else { 4.0 }),
            "{p}"
        );
        let b = memory(&m, &plan(p), &MemoryOptions::default());
        assert!(close(states(&b), megatron_bytes * n), "{p}");
    }
    // The block a ZeRO-3 gather brings up is the 16-bit copy either way; so is FSDP's gathered
    // copy kept from the forward through the backward (no resharding after forward).
    let z3 = plan("dp=4,zero=3");
    assert_eq!(
        memory(&m, &z3, &torch).transient,
        memory(&m, &z3, &MemoryOptions::default()).transient
    );
    let kept = plan("dp=4,zero=3-noreshard");
    let (t, g) = (
        memory(&m, &kept, &torch),
        memory(&m, &kept, &MemoryOptions::default()),
    );
    assert!(close(t.weights - g.weights, (4.0 - 2.0) * n / 4.0));
    // A model trained in fp32 has no 16-bit copy to drop: the layouts agree.
    let mut f32m = tiny_gpt();
    f32m.training.precision = Precision::Fp32;
    assert_eq!(
        memory(&f32m, &z3, &torch).total,
        memory(&f32m, &z3, &MemoryOptions::default()).total
    );
}

#[test]
fn parameters_agree_with_the_graph_crate_for_every_bundled_model() {
    for (name, _) in bundled_models() {
        let m = resolve_model(name).unwrap();
        let ours = ModelMemory::new(&m).total_params();
        assert!(
            close(ours, m.total_params()),
            "{name}: {ours} vs {}",
            m.total_params()
        );
    }
}

#[test]
fn experts_shard_over_ep_moe_tp_and_their_state_over_edp() {
    let m = resolve_model("mixtral-8x7b").unwrap();
    let o = MemoryOptions::default();
    let one = memory(&m, &plan("pp=4,dp=8,ep=1,zero=1"), &o);
    let ep8 = memory(&m, &plan("pp=4,dp=8,ep=8,zero=1"), &o);
    // ep = 8: each GPU keeps one of the 8 experts' weights, but edp = dp/ep = 1: the expert
    // optimizer state is not sharded any more, while the dense part still shards over dp = 8.
    assert!(ep8.weights < one.weights);
    let e = autoplan_graph::ModelSpec::routed_expert_params(&m);
    let blocks = 8.0; // 32 blocks / pp 4
    let expert_opt_ep1 = 12.0 * blocks * 8.0 * e / 8.0;
    let expert_opt_ep8 = 12.0 * blocks * e / 1.0;
    assert!(close(
        one.optimizer - ep8.optimizer,
        expert_opt_ep1 - expert_opt_ep8
    ));
}

/// A tiny Mixtral: 2 MoE blocks, h 64, 4 heads of 16, 4 experts of width 32, top-2, vocab 128.
fn tiny_moe() -> ModelSpec {
    let mut m = resolve_model("mixtral-8x7b").unwrap();
    m.name = "tiny-moe".into();
    m.layers = 2;
    m.hidden = 64;
    m.heads = 4;
    m.attention = autoplan_graph::Attention::Gqa {
        kv_heads: 4,
        head_dim: 16,
    };
    m.vocab = 128;
    m.training.seq_len = 16;
    m.training.global_batch = 8;
    m.training.precision = Precision::Bf16;
    let moe = m.moe.as_mut().unwrap();
    moe.experts = 4;
    moe.top_k = 2;
    moe.expert_ffn_hidden = 32;
    moe.shared_experts = 0;
    moe.first_dense_layers = 0;
    moe.load_imbalance = 1.0;
    moe.capacity_factor = None;
    m
}

#[test]
fn tiny_moe_by_hand() {
    let m = tiny_moe();
    let o = MemoryOptions {
        reserve_bytes: 0.0,
        ..MemoryOptions::default()
    };
    // Attention 4·64² + RMSNorm 64; MoE: RMSNorm 64 + router 64·4; experts 4 × 3·64·32.
    let (attn, fixed, experts) = (16448.0, 320.0, 24576.0);
    let head = 2.0 * 128.0 * 64.0 + 64.0; // embedding, untied head, final norm
    assert!(close(
        m.total_params(),
        2.0 * (attn + fixed + experts) + head
    ));
    // ep = 2 over dp = 2: each GPU keeps 2 of the 4 experts; edp = 1, so ZeRO-1 shards only the
    // dense part.
    let b = memory(&m, &plan("dp=2,ep=2,zero=1"), &o);
    let dense = 2.0 * (attn + fixed) + head;
    let local_experts = 2.0 * experts / 2.0;
    assert!(close(b.weights, 2.0 * (dense + local_experts)));
    assert!(close(b.optimizer, 12.0 * (dense / 2.0 + local_experts)));
    // Per token of a block: attention 2·2h (norm, QKV inputs) + 2·2·a·d (Q, o input) + 2·2·g·d
    // (K, V) = 768; MoE 2·2h + 4·E (fp32 router logits) = 272; k = 2 routed copies of the expert
    // input 2h and SwiGLU inner 3·2·32: 640. 16 tokens, 2 blocks, + final-norm and head inputs.
    let per_block = 16.0 * (768.0 + 272.0 + 640.0);
    assert!(close(b.activations, 2.0 * per_block + 4.0 * 64.0 * 16.0));
    assert!(close(b.logits, 4.0 * 16.0 * 128.0));
    // All-to-all dispatch: send k·T·2h and receive as much.
    assert!(close(b.transient, 2.0 * 16.0 * 2.0 * 128.0));
    // moe_tp = 2: expert weights split in two, the all-gathered expert input doubles.
    let b = memory(&m, &plan("dp=2,moe_tp=2"), &o);
    assert!(close(b.weights, 2.0 * (dense + 2.0 * experts / 2.0)));
    let per_block = 16.0 * (768.0 + 272.0 + 2.0 * 256.0 + 384.0);
    assert!(close(b.activations, 2.0 * per_block + 4.0 * 64.0 * 16.0));
    // A load imbalance of 1.5 scales the routed part on the most loaded GPU.
    let mut skewed = m.clone();
    skewed.moe.as_mut().unwrap().load_imbalance = 1.5;
    let b = memory(&skewed, &plan("dp=2,ep=2"), &o);
    let per_block = 16.0 * (768.0 + 272.0 + 1.5 * 640.0);
    assert!(close(b.activations, 2.0 * per_block + 4.0 * 64.0 * 16.0));
}

#[test]
fn bf16_adam_moments_keep_8_optimizer_bytes_per_parameter() {
    // DeepSeek-V3 §3.3.3: fp32 master weights (4) + BF16 moments (2 + 2), against 4 + 4 + 4.
    let mut m = tiny_gpt();
    let o = MemoryOptions::default();
    let adam = memory(&m, &plan("dp=1"), &o).optimizer;
    m.training.optimizer = autoplan_graph::Optimizer::AdamBf16Moments;
    let bf16 = memory(&m, &plan("dp=1"), &o).optimizer;
    assert!(close(bf16 / adam, 8.0 / 12.0));
}

#[test]
fn recompute_modules_by_hand() {
    // tiny_moe_by_hand's per-token terms of one block: attention 768 (norm input 128, QKV input
    // 128, Q and o input 256, K and V 256), MoE 272 (norm input 128, norm output 128, router
    // logits 16), routed 2 × (expert input 128 + SwiGLU gate, up, product 3·64).
    let m = tiny_moe();
    let o = MemoryOptions {
        reserve_bytes: 0.0,
        ..MemoryOptions::default()
    };
    let mm = ModelMemory::new(&m);
    let block =
        |s: &str| mm.block_activation_bytes(&plan(s), &o, true, Recompute::Selective) / 16.0;
    assert!(close(
        block("dp=2,recompute=selective"),
        768.0 + 272.0 + 640.0
    ));
    // layernorm: both norm outputs (the QKV input and the router input), 2·h bytes each.
    assert!(close(
        block("dp=2,recompute=selective:layernorm"),
        768.0 - 128.0 + 272.0 - 128.0 + 640.0
    ));
    // moe_act: the SwiGLU product (the fc2 input), 2·32 bytes per routed copy.
    assert!(close(
        block("dp=2,recompute=selective:moe_act"),
        768.0 + 272.0 + 640.0 - 2.0 * 64.0
    ));
    // moe: the MoE layer keeps only its input.
    assert!(close(block("dp=2,recompute=selective:moe"), 768.0 + 128.0));
    // Dense blocks: the MLP keeps only its input (tiny_gpt: h 64, ffn 256, GeLU, dropout).
    let g = tiny_gpt();
    let gm = ModelMemory::new(&g);
    let dense = |s: &str| {
        gm.block_activation_bytes(&plan(s), &korthikanti(), false, Recompute::Selective) / 16.0
    };
    let h = 64.0;
    // Korthikanti's MLP 21·h at f = 4h (norm input 2h, fc1 input 2h, fc1 output and GeLU
    // output 2·8h, dropout mask h) becomes the norm input and the mask: 3h.
    assert!(close(
        dense("recompute=selective") - dense("recompute=selective:core_attn+mlp"),
        18.0 * h
    ));
    assert!(close(
        dense("recompute=selective") - dense("recompute=selective:core_attn+layernorm"),
        2.0 * 2.0 * h
    ));
    // Without core_attn an unfused kernel's scores stay: 5·a·s bytes per token (Korthikanti).
    assert!(close(
        dense("recompute=selective:mlp") - dense("recompute=selective:core_attn+mlp"),
        5.0 * 4.0 * 16.0
    ));
    // MLA (DeepSeek-V2, 128 heads of 128 + 64, v 128): mla_up_proj drops Q, K (2·a·192) and V
    // (a·128), 2 bytes each, per token.
    let ds = resolve_model("deepseek-v2").unwrap();
    let dm = ModelMemory::new(&ds);
    let b = |s: &str| {
        dm.block_activation_bytes(&plan(s), &o, false, Recompute::Selective)
            / ds.training.seq_len as f64
    };
    assert!(close(
        b("recompute=selective") - b("recompute=selective:mla_up_proj"),
        2.0 * 128.0 * (2.0 * 192.0 + 128.0)
    ));
}

#[test]
fn the_most_loaded_stage_is_reported() {
    // 1F1B: the first stage holds pp micro-batches; with a huge vocabulary and few blocks the
    // last stage's fp32 logits and head weigh more.
    let mut m = tiny_gpt();
    m.layers = 4;
    let o = korthikanti();
    let b = memory(&m, &plan("pp=2"), &o);
    assert_eq!(b.stage, 0);
    assert_eq!(b.in_flight, 2.0);
    m.vocab = 1 << 20;
    let b = memory(&m, &plan("pp=2"), &o);
    assert_eq!(b.stage, 1);
    assert_eq!(b.in_flight, 1.0);
    assert!(close(b.logits, 4.0 * 16.0 * (1u64 << 20) as f64));
}

/// Bundled models the properties run on (dense GPT, GQA Llama, MoE Mixtral, MLA DeepSeek).
const MODELS: [&str; 4] = ["gpt3-175b", "llama3-70b", "mixtral-8x7b", "deepseek-v2"];

fn pow2(max_log: u32) -> impl Strategy<Value = u32> {
    (0..=max_log).prop_map(|k| 1u32 << k)
}

/// A plan and a model from [`MODELS`], valid (or `None`, which the properties skip).
fn valid_case() -> impl Strategy<Value = Option<(usize, Plan)>> {
    (
        0..MODELS.len(),
        (
            pow2(3),
            pow2(3),
            pow2(4),
            pow2(1),
            pow2(3),
            pow2(1),
            pow2(2),
        ),
        (
            any::<bool>(),
            0u8..4,
            0usize..3,
            1u32..4,
            proptest::option::of(1u32..4),
        ),
        (any::<bool>(), any::<bool>()),
    )
        .prop_map(
            |(mi, (tp, pp, dp, cp, ep, moe_tp, mbs), (sp, zero, rc, vpp, rl), (a2a, zb))| {
                let recompute = [Recompute::None, Recompute::Selective, Recompute::Full][rc];
                let vpp = if pp > 1 { vpp } else { 1 };
                let p = Plan {
                    tp,
                    pp,
                    dp,
                    cp,
                    ep,
                    moe_tp,
                    mbs,
                    sp,
                    zero: Zero::stage(zero),
                    recompute,
                    recompute_layers: if recompute == Recompute::None {
                        None
                    } else {
                        rl
                    },
                    vpp,
                    schedule: match (vpp > 1, zb) {
                        (true, _) => Schedule::Interleaved,
                        (false, true) if pp % 2 == 0 => Schedule::DualPipe,
                        _ => Schedule::OneF1B,
                    },
                    tp_sp_transition: if a2a {
                        TpSpTransition::AllToAll
                    } else {
                        TpSpTransition::AllReduceSlice
                    },
                    ..Plan::default()
                };
                let mut p = p;
                let m = resolve_model(MODELS[mi]).unwrap();
                // Steer towards valid plans: no expert degrees on dense models, SP with MoE+TP,
                // expert degrees that fold into tp·cp·dp.
                if m.moe.is_none() {
                    (p.ep, p.moe_tp) = (1, 1);
                } else {
                    p.sp |= p.tp > 1;
                    if !(p.tp * p.cp * p.dp).is_multiple_of(p.ep * p.moe_tp) {
                        (p.ep, p.moe_tp) = (1, 1);
                    }
                }
                p.check(&m, p.gpus() as u32).is_ok().then_some((mi, p))
            },
        )
}

#[test]
fn the_case_generator_yields_mostly_valid_plans() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = valid_case();
    let valid = (0..200)
        .filter(|_| strategy.new_tree(&mut runner).unwrap().current().is_some())
        .count();
    assert!(
        valid >= 100,
        "only {valid} of 200 generated plans are valid"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn full_recompute_never_uses_more_than_selective_nor_selective_than_none(
        case in valid_case(), flash in any::<bool>(),
    ) {
        let Some((mi, p)) = case else { return Ok(()) };
        let m = resolve_model(MODELS[mi]).unwrap();
        let o = MemoryOptions { flash_attention: flash, ..MemoryOptions::default() };
        let at = |r: Recompute| memory(&m, &Plan { recompute: r, ..p }, &o);
        let (none, sel, full) = (at(Recompute::None), at(Recompute::Selective), at(Recompute::Full));
        prop_assert!(full.activations <= sel.activations * (1.0 + 1e-12));
        prop_assert!(sel.activations <= none.activations * (1.0 + 1e-12));
        prop_assert!(full.total <= sel.total * (1.0 + 1e-12));
    }

    #[test]
    fn recomputing_more_modules_never_stores_more(
        case in valid_case(), a in 1u8..128, b in 0u8..128, flash in any::<bool>(),
    ) {
        let Some((mi, p)) = case else { return Ok(()) };
        let m = resolve_model(MODELS[mi]).unwrap();
        let o = MemoryOptions { flash_attention: flash, ..MemoryOptions::default() };
        let at = |set: u8| memory(&m, &Plan {
            recompute: Recompute::Selective,
            recompute_modules: RecomputeModules(set),
            ..p
        }, &o);
        let (small, big) = (at(a), at(a | b));
        // The busiest GPU's total never grows; its activations do not either unless the
        // busiest GPU changes (DualPipe rank 1 can overtake rank 0, holding more activations
        // and less of the rest: `055e12ae…` in the regressions file).
        if big.stage == small.stage {
            prop_assert!(big.activations <= small.activations * (1.0 + 1e-12));
        }
        prop_assert!(big.total <= small.total * (1.0 + 1e-12));
        // No module set stores less than the block inputs of full recompute.
        let full = memory(&m, &Plan { recompute: Recompute::Full, ..p }, &o);
        let none = memory(&m, &Plan { recompute: Recompute::None, ..p }, &o);
        if small.stage == none.stage {
            prop_assert!(small.activations <= none.activations * (1.0 + 1e-12));
        }
        prop_assert!(small.total <= none.total * (1.0 + 1e-12));
        prop_assert!(big.activations > 0.0 && full.activations > 0.0);
    }

    #[test]
    fn the_least_memory_dispatcher_holds_the_least(case in valid_case()) {
        let Some((mi, p)) = case else { return Ok(()) };
        let m = resolve_model(MODELS[mi]).unwrap();
        let o = MemoryOptions::default();
        let all = [Dispatcher::AllToAll, Dispatcher::AllGather, Dispatcher::DeepEp];
        let mm = ModelMemory::new(&m);
        let least = mm.least_memory_dispatcher(&p, &all).unwrap();
        let at = |d: Dispatcher| memory(&m, &Plan { dispatcher: d, ..p }, &o).total;
        for d in all {
            prop_assert!(at(least) <= at(d), "{least:?} holds more than {d:?} for {p}");
        }
        prop_assert_eq!(mm.least_memory_dispatcher(&p, &[]), None);
    }

    #[test]
    fn zero_stages_never_raise_memory(case in valid_case(), fp32_params in any::<bool>()) {
        let Some((mi, p)) = case else { return Ok(()) };
        let m = resolve_model(MODELS[mi]).unwrap();
        // Either parameter layout: Megatron's 16-bit parameters with an fp32 master, or
        // PyTorch's fp32 parameters (`fp32_params`, stage 1 there FSDP gathered once per step).
        let o = MemoryOptions { fp32_params, ..MemoryOptions::default() };
        let at = |z: u8| memory(&m, &Plan { zero: Zero::stage(z), ..p }, &o).total;
        prop_assert!(at(1) <= at(0) * (1.0 + 1e-12));
        prop_assert!(at(2) <= at(1) * (1.0 + 1e-12));
        // ZeRO-3 gathers one block while it runs: below ZeRO-2 once a stage has two blocks
        // of each kind to shard (dense models here).
        let layout = p.stage_blocks(&m).unwrap();
        if m.moe.is_none() && (0..p.pp).all(|s| layout.blocks(s) >= 2) {
            prop_assert!(at(3) <= at(2) * (1.0 + 1e-12));
        }
    }

    #[test]
    fn more_hbm_never_invalidates_and_smaller_microbatches_never_use_more(
        case in valid_case(), hbm in 16.0f64..200.0, more in 0.0f64..100.0,
    ) {
        let Some((mi, p)) = case else { return Ok(()) };
        let m = resolve_model(MODELS[mi]).unwrap();
        let o = MemoryOptions::default();
        let b = memory(&m, &p, &o);
        if b.fits(hbm * GIB) {
            prop_assert!(b.fits((hbm + more) * GIB));
        }
        if p.mbs > 1 {
            let q = Plan { mbs: p.mbs / 2, ..p };
            let half = memory(&m, &q, &o);
            prop_assert!(half.total <= b.total * (1.0 + 1e-12));
            // Activations stage by stage: the peak stage may differ (a smaller micro-batch
            // shrinks the last stage's logits and can move the peak to stage 0, whose
            // activations are the same tokens in flight when m < pp).
            let mm = ModelMemory::new(&m);
            for stage in 0..p.pp {
                let (h, f) = (mm.stage_breakdown(&q, &o, stage), mm.stage_breakdown(&p, &o, stage));
                prop_assert!(h.activations <= f.activations * (1.0 + 1e-12), "stage {}", stage);
            }
        }
        prop_assert!(b.total.is_finite() && b.total > 0.0);
    }

    #[test]
    fn floor_is_a_lower_bound_over_the_memory_only_knobs(
        case in valid_case(), zero in 0usize..9, rc in 0usize..3, mbs_div in 0u32..3,
        sp in any::<bool>(), a2a in any::<bool>(), modules in 1u8..128,
        fp32_params in any::<bool>(),
    ) {
        let Some((mi, p)) = case else { return Ok(()) };
        let m = resolve_model(MODELS[mi]).unwrap();
        let mm = ModelMemory::new(&m);
        let o = MemoryOptions { fp32_params, ..MemoryOptions::default() };
        let q = Plan {
            zero: MODES[zero],
            recompute: [Recompute::None, Recompute::Selective, Recompute::Full][rc],
            recompute_modules: RecomputeModules(modules),
            mbs: (p.mbs >> mbs_div).max(1),
            sp,
            tp_sp_transition: if a2a { TpSpTransition::AllToAll } else { TpSpTransition::AllReduceSlice },
            ..p
        };
        // Every sharding mode a valid plan can take.
        if q.check(&m, q.gpus() as u32).is_err() {
            return Ok(());
        }
        prop_assert!(mm.floor(&p, &o) <= mm.breakdown(&q, &o).total * (1.0 + 1e-12));
    }

    #[test]
    fn hsdp_and_no_reshard_hold_more_than_full_sharding(case in valid_case(), g in 0usize..3) {
        let Some((mi, p)) = case else { return Ok(()) };
        let m = resolve_model(MODELS[mi]).unwrap();
        let o = MemoryOptions::default();
        let at = |z: Zero| memory(&m, &Plan { zero: z, ..p }, &o);
        // FSDP without resharding keeps the gathered parameters: ZeRO-2's weights plus the
        // shard, never less than ZeRO-2 or ZeRO-3 — stage by stage (the peak stage may differ
        // between modes: more kept weights can move the peak to a stage of other gradients).
        let mm = ModelMemory::new(&m);
        for stage in 0..p.pp {
            let on = |z: Zero| mm.stage_breakdown(&Plan { zero: z, ..p }, &o, stage);
            let (z2, z3, nr) = (on(Zero::stage(2)), on(Zero::stage(3)), on(Zero::NORESHARD));
            prop_assert!(nr.grads == z2.grads && nr.optimizer == z2.optimizer, "stage {}", stage);
            prop_assert!(nr.weights >= z2.weights * (1.0 - 1e-12));
            prop_assert!(nr.weights >= z3.weights * (1.0 - 1e-12));
        }
        // A shard group of G ranks holds at least what the whole group does, for each stage.
        let group = [2, 4, 8][g];
        for stage in 1..=3 {
            let z = Zero::stage(stage);
            let q = Plan { zero: z.hsdp(group), ..p };
            if q.check(&m, q.gpus() as u32).is_err() {
                continue;
            }
            let (full, hsdp) = (at(z), at(z.hsdp(group)));
            prop_assert!(hsdp.total >= full.total * (1.0 - 1e-12), "stage {}", stage);
            prop_assert!(hsdp.optimizer >= full.optimizer * (1.0 - 1e-12));
        }
    }
}

/// The sharding modes the floor property draws from.
const MODES: [Zero; 9] = [
    Zero::stage(0),
    Zero::stage(1),
    Zero::stage(2),
    Zero::stage(3),
    Zero::NORESHARD,
    Zero::stage(1).hsdp(2),
    Zero::stage(2).hsdp(4),
    Zero::stage(3).hsdp(2),
    Zero::NORESHARD.hsdp(8),
];
