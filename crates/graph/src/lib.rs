//! The model: a validated transformer description ([`ModelSpec`]) and the layer graph built from
//! it (embedding → blocks → final norm → LM head → cross-entropy), each layer knowing its
//! parameters, forward FLOPs per token, activation sizes and the tensors each parallelism moves.
//!
//! Boundary: this crate knows architectures, not hardware or plans. Sizes are element counts
//! (parameters) and FLOPs per token of one forward pass; bytes appear only for stored
//! activations (16-bit storage). Per-GPU sharding, backward/recompute multipliers and time are
//! the cost and memory crates' business.
//!
//! The principal type is [`ModelSpec`], built by [`ModelSpec::from_toml`] (a model file),
//! [`ModelSpec::from_hf_config`] (a Hugging Face `config.json`) or [`resolve_model`] (either, or
//! a bundled name). A `ModelSpec` that exists is internally consistent (heads divide hidden,
//! top-k ≤ experts...). [`ModelSpec::layers`] gives one [`Layer`] per node, in execution order.
//!
//! ```
//! use autoplan_graph::{resolve_model, LayerKind};
//! let m = resolve_model("deepseek-v3").unwrap();
//! assert!((m.total_params() / 671e9 - 1.0).abs() < 0.005); // DeepSeek-V3: 671B
//! let moe = m.layers().into_iter().find(|l| l.kind == LayerKind::Moe).unwrap();
//! assert_eq!(moe.experts, 256);
//! // One token is dispatched to 8 experts: 8 × hidden elements cross the EP all-to-all.
//! assert_eq!(moe.ep_dispatch_elems_per_token, 8.0 * 7168.0);
//! ```

pub use autoplan_cluster::Precision;

/// Architecture family: a label in model files, the defaults of a model built from a shape
/// ([`Family::arch`], [`ModelSpec::from_shape`]), whether it trains with dropout, and the
/// families a published run's model name points to ([`Family::of_model_name`]). See
/// `family.rs` for each family's sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// GPT-2/3 style: MHA, learned positions, GELU MLP, LayerNorm, biases.
    Gpt,
    /// BigScience BLOOM: GPT-style with ALiBi instead of positions, a LayerNorm after the word
    /// embedding, 250,880-token vocabulary.
    Bloom,
    /// Meta OPT: GPT-style with ReLU, learned positions (2 offset rows).
    Opt,
    /// Megatron-Turing NLG: GPT-3 style, trained with Megatron-DeepSpeed.
    #[serde(rename = "mt-nlg")]
    MtNlg,
    /// EleutherAI GPT-NeoX: parallel attention + MLP block, rotary, untied embeddings, biases.
    #[serde(rename = "gpt-neox")]
    GptNeox,
    /// MosaicML MPT: ALiBi, GELU 4h, no biases, tied embeddings.
    Mpt,
    /// GLM-130B (Zeng+22): GeGLU, rotary, LayerNorm, biases.
    Glm,
    /// Llama style: RoPE, GQA, SwiGLU, RMSNorm, no biases.
    Llama,
    /// Mixtral style MoE: every layer MoE, top-2.
    Mixtral,
    /// DeepSeek-V2/V3: MLA attention, first k layers dense, shared + routed experts.
    Deepseek,
    /// Qwen2/3-MoE.
    QwenMoe,
    /// NVIDIA Nemotron (NeMo): RoPE, squared-ReLU MLP, LayerNorm, no biases, untied.
    Nemotron,
    /// OpenAI gpt-oss: every layer MoE, banded (sliding-window) attention on alternate layers,
    /// biases.
    GptOss,
}

/// Position encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Positions {
    /// Learned absolute position embedding table (`max_positions` × hidden parameters).
    Learned,
    Rope,
    /// Attention with Linear Biases (Press+22, "Train Short, Test Long"): a fixed per-head
    /// slope times the query-key distance added to the scores; no parameters (BLOOM, MPT).
    Alibi,
}

/// MLP non-linearity: ungated (GELU, squared ReLU: two matrices) or gated (SwiGLU: three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mlp {
    Gelu,
    Swiglu,
    /// `relu(x)²` (Nemotron-4, So et al. 2021 "Primer"): ungated, priced and stored as GELU
    /// (two matrices; the activation keeps its input and output).
    #[serde(rename = "squared-relu")]
    SquaredRelu,
    /// `relu(x)` (OPT, Zhang+22 §2.2): ungated, two matrices, priced and stored as GELU.
    Relu,
    /// GeGLU (Shazeer 2020 "GLU Variants Improve Transformer"; GLM-130B, Grok-1): gated like
    /// SwiGLU (three matrices) with GELU in place of Swish.
    Geglu,
}

impl Mlp {
    /// Input-side (column) matrices of one MLP: 2 gated (SwiGLU's gate and up), 1 ungated
    /// (fc1). One output matrix follows either way, and the activation stores `inputs + 1`
    /// tensors of the MLP's width (its inputs and their product or output).
    pub fn input_matrices(self) -> u64 {
        match self {
            Mlp::Swiglu | Mlp::Geglu => 2,
            Mlp::Gelu | Mlp::SquaredRelu | Mlp::Relu => 1,
        }
    }
}

/// Normalisation layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Norm {
    LayerNorm,
    RmsNorm,
}

/// Attention variant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Attention {
    /// Multi-head / grouped-query attention: `heads` query heads, `kv_heads` key/value heads
    /// (kv_heads == heads is MHA), each `head_dim` wide.
    Gqa { kv_heads: u32, head_dim: u32 },
    /// DeepSeek multi-head latent attention (DeepSeek-V2 paper §2.1).
    Mla {
        /// Query compression rank; `None` = queries projected directly (V2-Lite).
        q_lora_rank: Option<u32>,
        kv_lora_rank: u32,
        qk_nope_head_dim: u32,
        qk_rope_head_dim: u32,
        v_head_dim: u32,
    },
}

/// How tokens pick experts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Routing {
    /// Every token goes to exactly `top_k` experts.
    TopK,
    /// Seed 004 §3.2: top-1, or top-2 when the gap between the two best scores is below
    /// `threshold`; `two_expert_fraction` is the expected fraction of tokens that take two,
    /// derived from the threshold ([`routing::two_expert_fraction`]) unless the model file
    /// gives a measured one.
    DynamicTop1Top2 {
        threshold: f64,
        two_expert_fraction: f64,
    },
}

/// Mixture-of-Experts configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Moe {
    /// Routed experts per MoE layer.
    pub experts: u32,
    /// Experts each token is routed to (for `DynamicTop1Top2`, 2 = the maximum).
    pub top_k: u32,
    /// Shared (always-active) experts per MoE layer.
    pub shared_experts: u32,
    /// Hidden size of one routed expert's MLP.
    pub expert_ffn_hidden: u32,
    /// Hidden size of one shared expert's MLP.
    pub shared_ffn_hidden: u32,
    /// The first `first_dense_layers` blocks use a dense MLP (`ffn_hidden`), the rest are MoE.
    pub first_dense_layers: u32,
    pub routing: Routing,
    /// Token capacity factor when dispatch is capacity-padded; `None` = dropless.
    pub capacity_factor: Option<f64>,
    /// Expected max/mean tokens per expert (≥ 1): the most loaded expert's excess.
    pub load_imbalance: f64,
    /// Group-limited routing: the routed experts form `groups` equal groups of consecutive
    /// experts, and a token's experts come from `group_top_k` of them (DeepSeek-V2 §2.1.3,
    /// device-limited routing; DeepSeek-V3 §2.1.2, node-limited routing, "at most 4 nodes";
    /// Hugging Face `n_group` / `topk_group`; Megatron-Core `--moe-router-num-groups` /
    /// `--moe-router-group-topk`, `moe_utils.py::group_limited_topk`, still applied under
    /// `--moe-router-force-load-balancing`, `router.py` @ core 0.19.2 L856-866). 1 and 1: none.
    pub groups: u32,
    /// Groups a token's experts are drawn from (`1 ≤ group_top_k ≤ groups`).
    pub group_top_k: u32,
}

impl Moe {
    /// Expected experts per token: `top_k`, or `1 + two_expert_fraction` under dynamic routing.
    pub fn expected_experts_per_token(&self) -> f64 {
        match self.routing {
            Routing::TopK => self.top_k as f64,
            Routing::DynamicTop1Top2 {
                two_expert_fraction,
                ..
            } => 1.0 + two_expert_fraction,
        }
    }
}

/// Sliding-window attention (Mistral 7B; gpt-oss; Gemma 2/3): a query of a windowed block
/// attends to the last `tokens` positions, itself included, instead of every earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindow {
    /// Window length in tokens (≥ 1).
    pub tokens: u32,
    /// Every `full_every`-th block (0-based blocks `full_every − 1`, `2·full_every − 1`, …)
    /// attends to the whole sequence, the rest are windowed (gpt-oss: 2, Gemma 3: 6;
    /// Megatron-Core's `--window-attn-skip-freq`); 0 = every block windowed (Mistral 7B v0.1).
    pub full_every: u32,
}

/// Optimizer of the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    /// Mixed-precision Adam(W): fp32 master weights + two fp32 moments (12 bytes/param).
    Adam,
    /// Adam(W) with the two moments in BF16, the master weights in fp32 (8 bytes/param):
    /// DeepSeek-V3 report §3.3.3 ("Low-Precision Optimizer States"); Megatron-Core's
    /// `--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`.
    #[serde(rename = "adam-bf16-moments")]
    AdamBf16Moments,
    /// SGD with momentum: fp32 master + one moment.
    Sgd,
}

/// The training workload (`[training]` of a model file; the CLI may override).
#[derive(Debug, Clone, PartialEq)]
pub struct Training {
    pub seq_len: u32,
    /// Global batch in sequences.
    pub global_batch: u32,
    /// GEMM precision (bf16, fp16 or fp8); weights/activations are stored in 16 bits either way.
    pub precision: Precision,
    pub optimizer: Optimizer,
    /// Tokens the whole run trains on (`[training] tokens`, `--tokens`): with it, `search` and
    /// `evaluate` give the time to train and its GPU-hours. `None`: not stated.
    pub tokens: Option<f64>,
}

/// A validated transformer description. Construct with `ModelSpec::from_toml`/`from_hf_config`
/// or the bundled library; every field is consistent with the others.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub name: String,
    pub family: Family,
    /// Transformer blocks (excluding MTP modules).
    pub layers: u32,
    pub hidden: u32,
    /// Query heads.
    pub heads: u32,
    pub attention: Attention,
    /// Sliding-window (banded) attention on some or all blocks; `None` = full causal everywhere.
    pub window: Option<SlidingWindow>,
    /// Dense MLP hidden size (all blocks of a dense model; the first dense blocks of DeepSeek).
    pub ffn_hidden: u32,
    pub mlp: Mlp,
    pub norm: Norm,
    pub positions: Positions,
    /// Size of the learned position table (0 with RoPE).
    pub max_positions: u32,
    pub vocab: u32,
    pub tied_embeddings: bool,
    /// Linear layers carry biases (GPT-style).
    pub bias: bool,
    /// A norm (of the model's `norm` kind) right after the word embedding (BLOOM's
    /// `word_embeddings_layernorm`, Le Scao+22 §3.2.3).
    pub embedding_norm: bool,
    /// Parallel attention + MLP block: `x + Attn(LN₁(x)) + MLP(LN₂(x))` (GPT-NeoX, Black+22
    /// §2.1 "parallel attention and feed-forward layers"; GPT-J; PaLM §2): both branches read
    /// the block input and their outputs are summed before one tensor-parallel reduction.
    pub parallel_block: bool,
    pub moe: Option<Moe>,
    /// DeepSeek-V3 multi-token-prediction modules (each one extra block + projection).
    pub mtp_modules: u32,
    pub training: Training,
}

mod aliases;
mod bundled;
mod family;
mod file;
mod hf;
mod layers;
pub mod routing;
pub mod tokens;
pub use aliases::bundled_model_for;
pub use bundled::{bundled_model_text, bundled_models, resolve_model, ResolveError};
pub use family::{Arch, Shape, ShapeError, UnknownFamily};
pub use file::{
    AttentionKind, RawAttention, RawModel, RawModelFile, RawMoe, RawTraining, RoutingKind,
    TrainingError, MAX_DIM, MAX_LAYERS, MAX_WORKLOAD,
};
pub use hf::HF_MODEL_TYPES;
pub use layers::{Gemm, Layer, LayerKind, TpSplit};

/// Small hand-made models for unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    fn training(seq_len: u32) -> Training {
        Training {
            seq_len,
            global_batch: 512,
            precision: Precision::Bf16,
            optimizer: Optimizer::Adam,
            tokens: None,
        }
    }

    /// GPT-style: MHA, learned positions, GELU 4h, LayerNorm, biases, tied embeddings.
    pub fn gpt(layers: u32, hidden: u32, heads: u32, vocab: u32, seq: u32) -> ModelSpec {
        ModelSpec {
            name: "gpt-test".into(),
            family: Family::Gpt,
            layers,
            hidden,
            heads,
            attention: Attention::Gqa {
                kv_heads: heads,
                head_dim: hidden / heads,
            },
            window: None,
            ffn_hidden: 4 * hidden,
            mlp: Mlp::Gelu,
            norm: Norm::LayerNorm,
            positions: Positions::Learned,
            max_positions: seq,
            vocab,
            tied_embeddings: true,
            bias: true,
            embedding_norm: false,
            parallel_block: false,
            moe: None,
            mtp_modules: 0,
            training: training(seq),
        }
    }

    /// Llama-style: GQA, RoPE, SwiGLU, RMSNorm, untied, no biases, seq 8192.
    pub fn llama(
        layers: u32,
        hidden: u32,
        heads: u32,
        kv_heads: u32,
        ffn: u32,
        vocab: u32,
    ) -> ModelSpec {
        ModelSpec {
            name: "llama-test".into(),
            family: Family::Llama,
            layers,
            hidden,
            heads,
            attention: Attention::Gqa {
                kv_heads,
                head_dim: hidden / heads,
            },
            window: None,
            ffn_hidden: ffn,
            mlp: Mlp::Swiglu,
            norm: Norm::RmsNorm,
            positions: Positions::Rope,
            max_positions: 0,
            vocab,
            tied_embeddings: false,
            bias: false,
            embedding_norm: false,
            parallel_block: false,
            moe: None,
            mtp_modules: 0,
            training: training(8192),
        }
    }

    /// 4 blocks, h 1024, first block dense, 16 experts of 512, top-4, 2 shared experts of 256.
    pub fn moe_llama() -> ModelSpec {
        let mut m = llama(4, 1024, 8, 8, 4096, 1000);
        m.family = Family::Deepseek;
        m.moe = Some(Moe {
            experts: 16,
            top_k: 4,
            shared_experts: 2,
            expert_ffn_hidden: 512,
            shared_ffn_hidden: 256,
            first_dense_layers: 1,
            routing: Routing::TopK,
            capacity_factor: None,
            load_imbalance: 1.0,
            groups: 1,
            group_top_k: 1,
        });
        m
    }
}
