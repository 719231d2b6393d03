//! Model files (TOML): the raw, unchecked shape ([`RawModelFile`]) and its validation into a
//! [`ModelSpec`] ("parse, don't validate": only a validated `ModelSpec` reaches the rest).
//!
//! ```toml
//! [model]
//! name = "llama3-8b"
//! family = "llama"          # gpt | bloom | opt | mt-nlg | gpt-neox | mpt | glm | llama |
//!                           # nemotron | mixtral | deepseek | qwen-moe | gpt-oss
//! layers = 32
//! hidden = 4096
//! heads = 32
//! ffn_hidden = 14336        # dense MLP width (may be omitted when every block is MoE)
//! mlp = "swiglu"            # gelu | relu | squared-relu | swiglu | geglu
//! norm = "rmsnorm"          # layernorm | rmsnorm
//! positions = "rope"        # rope | alibi | learned (then max_positions = ...)
//! vocab = 128256
//! tied_embeddings = false
//! bias = false
//! # embedding_norm = false  # a norm after the word embedding (default: the family's, BLOOM)
//! # parallel_block = false  # x + attn(norm(x)) + mlp(norm(x)) (default: the family's,
//! #                         # GPT-NeoX); dense models only
//! # mtp_modules = 1         # DeepSeek-V3 multi-token prediction (default 0)
//!
//! [attention]
//! kind = "gqa"              # gqa: kv_heads [, head_dim = hidden/heads]
//! kv_heads = 8              # mla: [q_lora_rank,] kv_lora_rank, qk_nope_head_dim,
//!                           #      qk_rope_head_dim, v_head_dim
//! # sliding_window = 128    # banded attention: a query sees the last 128 tokens (itself incl.)
//! # full_attention_every = 2  # with it, blocks 1, 3, 5, ... attend to the whole sequence
//!                           # (absent: every block windowed)
//! [moe]                     # optional
//! experts = 8               # routed experts
//! top_k = 2
//! expert_ffn_hidden = 14336
//! # shared_experts = 0, shared_ffn_hidden, first_dense_layers = 0,
//! # routing = "top-k" | "dynamic-top1-top2" (+ threshold; two_expert_fraction, a measured
//! #   share of two-expert tokens, else derived from the threshold: seed 004 §3.2.1),
//! # capacity_factor (absent = dropless), load_imbalance = 1.0 (max/mean tokens per expert),
//! # load_imbalance_source = "..." (the figure's source, or why balance is assumed),
//! # groups = 8, group_top_k = 4 (group-limited routing: a token's experts come from 4 of
//! #   8 groups of consecutive experts; absent: no limit)
//!
//! [training]
//! seq_len = 8192
//! global_batch = 128        # sequences
//! precision = "bf16"        # bf16 | fp16 | fp8 (= fp8-delayed) | fp8-current | fp8-block |
//!                           # mxfp8 | nvfp4 (the last two on Blackwell GPUs)
//! optimizer = "adam"        # adam | adam-bf16-moments | sgd
//! # tokens = "15T"          # tokens of the whole run (or 1.5e13): time to train, GPU-hours
//! ```

use autoplan_input::{InputError, Source};
use serde::{Deserialize, Serialize};

use crate::{
    Attention, Family, Mlp, ModelSpec, Moe, Norm, Optimizer, Positions, Precision, Routing,
    SlidingWindow, Training,
};

/// A model file as written, before validation.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawModelFile {
    pub model: RawModel,
    pub attention: RawAttention,
    pub moe: Option<RawMoe>,
    pub training: RawTraining,
}

/// `[model]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    pub name: String,
    pub family: Family,
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub ffn_hidden: Option<u64>,
    pub mlp: Mlp,
    pub norm: Norm,
    pub positions: Positions,
    pub max_positions: Option<u64>,
    pub vocab: u64,
    pub tied_embeddings: bool,
    pub bias: bool,
    /// Absent: the family's ([`Family::arch`]).
    pub embedding_norm: Option<bool>,
    /// Absent: the family's ([`Family::arch`]).
    pub parallel_block: Option<bool>,
    pub mtp_modules: Option<u64>,
}

/// `attention.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionKind {
    Gqa,
    Mla,
}

/// `[attention]`: the fields of the other kind must be absent.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAttention {
    pub kind: AttentionKind,
    pub kv_heads: Option<u64>,
    pub head_dim: Option<u64>,
    pub q_lora_rank: Option<u64>,
    pub kv_lora_rank: Option<u64>,
    pub qk_nope_head_dim: Option<u64>,
    pub qk_rope_head_dim: Option<u64>,
    pub v_head_dim: Option<u64>,
    pub sliding_window: Option<u64>,
    pub full_attention_every: Option<u64>,
}

/// `moe.routing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoutingKind {
    TopK,
    DynamicTop1Top2,
}

/// `[moe]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawMoe {
    pub experts: u64,
    pub top_k: u64,
    pub expert_ffn_hidden: u64,
    pub shared_experts: Option<u64>,
    pub shared_ffn_hidden: Option<u64>,
    pub first_dense_layers: Option<u64>,
    pub routing: Option<RoutingKind>,
    pub threshold: Option<f64>,
    pub two_expert_fraction: Option<f64>,
    pub capacity_factor: Option<f64>,
    pub load_imbalance: Option<f64>,
    /// Where `load_imbalance` comes from (a paper's measured figure), or why the model is
    /// taken as balanced: every bundled MoE model states it (`tests/bundled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_imbalance_source: Option<String>,
    /// Group-limited routing: groups of consecutive experts (`Moe::groups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<u64>,
    /// Groups a token's experts are drawn from (`Moe::group_top_k`; default: `groups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_top_k: Option<u64>,
}

/// `[training]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawTraining {
    pub seq_len: u64,
    pub global_batch: u64,
    pub precision: Precision,
    pub optimizer: Optimizer,
    /// Tokens of the whole run: a number or a string with a suffix ("15T", `tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<crate::tokens::RawTokens>,
}

impl ModelSpec {
    /// Parse and validate a model file. Errors name the file, line, field, value and reason.
    ///
    /// ```
    /// use autoplan_graph::ModelSpec;
    /// use autoplan_input::Source;
    /// let text = autoplan_graph::bundled_model_text("llama3-8b").unwrap();
    /// let bad = text.replace("kv_heads = 8", "kv_heads = 5");
    /// let err = ModelSpec::from_toml(&Source::new("l.toml", bad)).unwrap_err().to_string();
    /// assert!(err.contains("attention.kv_heads = 5: does not divide model.heads = 32"), "{err}");
    /// ```
    pub fn from_toml(src: &Source) -> Result<ModelSpec, InputError> {
        let raw: RawModelFile = src.parse()?;
        raw.validate(src)
    }
}

/// The largest architecture dimension accepted: 2^24. Ten times anything built so far, and it
/// keeps every product of three dimensions exact in `u64` and `f64` in the layer accounting.
pub const MAX_DIM: u64 = 1 << 24;

/// The most transformer blocks accepted (the layer graph has a node per block).
pub const MAX_LAYERS: u64 = 1 << 16;

/// A positive architecture dimension, at most [`MAX_DIM`].
fn dim(src: &Source, path: &[&str], v: u64) -> Result<u32, InputError> {
    if v == 0 {
        return Err(src.invalid(path, v, "must be positive"));
    }
    if v > MAX_DIM {
        return Err(src.invalid(path, v, format!("too large (at most {MAX_DIM})")));
    }
    Ok(v as u32)
}

/// The longest training sequence and the largest global batch (sequences) accepted: 2^24 =
/// 16,777,216 each. The longest contexts trained are ~10M tokens and the largest global batches
/// a few tens of thousands of sequences; the bound keeps tokens per step (≤ 2^48) and every
/// product with the model's dimensions exact and finite.
pub const MAX_WORKLOAD: u64 = 1 << 24;

/// A positive workload count (sequence length, batch), at most [`MAX_WORKLOAD`].
fn count(src: &Source, path: &[&str], v: u64) -> Result<u32, InputError> {
    if v == 0 {
        return Err(src.invalid(path, v, "must be positive"));
    }
    if v > MAX_WORKLOAD {
        return Err(src.invalid(path, v, format!("too large: expected [1, {MAX_WORKLOAD}]")));
    }
    Ok(v as u32)
}

fn opt_dim(src: &Source, path: &[&str], v: Option<u64>) -> Result<Option<u32>, InputError> {
    v.map(|v| dim(src, path, v)).transpose()
}

fn required(src: &Source, path: &[&str], v: Option<u64>, why: &str) -> Result<u32, InputError> {
    match v {
        Some(v) => dim(src, path, v),
        None => Err(src.invalid(path, "(missing)", format!("required {why}"))),
    }
}

fn absent<T: std::fmt::Display>(
    src: &Source,
    path: &[&str],
    v: &Option<T>,
    why: &str,
) -> Result<(), InputError> {
    match v {
        Some(v) => Err(src.invalid(path, v, format!("not allowed {why}"))),
        None => Ok(()),
    }
}

fn finite_at_least(src: &Source, path: &[&str], v: f64, min: f64) -> Result<f64, InputError> {
    if !v.is_finite() || v < min {
        return Err(src.invalid_number(path, v, format!("must be a finite number ≥ {min}")));
    }
    Ok(v)
}

impl RawModelFile {
    /// Check every field and every relation between fields; the result is consistent.
    pub fn validate(&self, src: &Source) -> Result<ModelSpec, InputError> {
        let m = &self.model;
        if m.name.trim().is_empty() {
            return Err(src.invalid(&["model", "name"], "\"\"", "must not be empty"));
        }
        if m.layers > MAX_LAYERS {
            return Err(src.invalid(
                &["model", "layers"],
                m.layers,
                format!("too large (at most {MAX_LAYERS})"),
            ));
        }
        let layers = dim(src, &["model", "layers"], m.layers)?;
        let hidden = dim(src, &["model", "hidden"], m.hidden)?;
        let heads = dim(src, &["model", "heads"], m.heads)?;
        let vocab = dim(src, &["model", "vocab"], m.vocab)?;
        if (hidden / heads) * heads != hidden {
            return Err(src.invalid(
                &["model", "hidden"],
                hidden,
                format!("not divisible by model.heads = {heads}"),
            ));
        }
        let mtp_modules = match m.mtp_modules {
            None | Some(0) => 0,
            Some(v) => dim(src, &["model", "mtp_modules"], v)?,
        };

        let training = self.training.validate(src)?;

        let max_positions = m.checked_max_positions(src, &training)?;

        let attention = self.attention.validate(src, hidden, heads)?;
        let window = self.attention.window(src, layers)?;
        let moe = self.validate_moe(src, layers)?;
        let dense_blocks = moe.as_ref().map_or(layers, |m| m.first_dense_layers);
        let ffn_hidden = m.checked_ffn_hidden(src, dense_blocks)?;
        let arch = m.family.arch();
        let parallel_block = m
            .parallel_block
            .unwrap_or(arch.parallel_block && moe.is_none());
        if parallel_block && moe.is_some() {
            // The parallel block's TP saving (one reduction of the summed branch outputs) is
            // modelled for a dense MLP branch only.
            return Err(src.invalid(
                &["model", "parallel_block"],
                true,
                "not modelled with a [moe] section (parallel blocks are priced for dense MLPs)",
            ));
        }

        Ok(ModelSpec {
            name: m.name.clone(),
            family: m.family,
            layers,
            hidden,
            heads,
            attention,
            window,
            ffn_hidden,
            mlp: m.mlp,
            norm: m.norm,
            positions: m.positions,
            max_positions,
            vocab,
            tied_embeddings: m.tied_embeddings,
            bias: m.bias,
            embedding_norm: m.embedding_norm.unwrap_or(arch.embedding_norm),
            parallel_block,
            moe,
            mtp_modules,
            training,
        })
    }

    /// The `[moe]` section, required for the MoE families.
    fn validate_moe(&self, src: &Source, layers: u32) -> Result<Option<Moe>, InputError> {
        Ok(match &self.moe {
            Some(raw) => Some(raw.validate(src, layers)?),
            None => {
                if self.model.family.is_moe() {
                    return Err(src.invalid(
                        &["model", "family"],
                        self.model.family.name(),
                        "is a MoE family: a [moe] section is required",
                    ));
                }
                None
            }
        })
    }
}

impl RawModel {
    /// `max_positions`: the size of a learned position table (holding `training.seq_len`),
    /// absent with RoPE (0).
    fn checked_max_positions(&self, src: &Source, training: &Training) -> Result<u32, InputError> {
        Ok(match self.positions {
            Positions::Learned => {
                let p = required(
                    src,
                    &["model", "max_positions"],
                    self.max_positions,
                    "with positions = \"learned\" (size of the position table)",
                )?;
                if training.seq_len > p {
                    return Err(src.invalid(
                        &["training", "seq_len"],
                        training.seq_len,
                        format!("exceeds model.max_positions = {p} (learned position table)"),
                    ));
                }
                p
            }
            p @ (Positions::Rope | Positions::Alibi) => {
                let name = if p == Positions::Rope {
                    "rope"
                } else {
                    "alibi"
                };
                absent(
                    src,
                    &["model", "max_positions"],
                    &self.max_positions,
                    &format!("with positions = \"{name}\" (no position table)"),
                )?;
                0
            }
        })
    }

    /// `ffn_hidden`: required when `dense_blocks` blocks have a dense MLP, else 0 when absent.
    fn checked_ffn_hidden(&self, src: &Source, dense_blocks: u32) -> Result<u32, InputError> {
        Ok(match self.ffn_hidden {
            Some(v) => dim(src, &["model", "ffn_hidden"], v)?,
            None if dense_blocks > 0 => {
                return Err(src.invalid(
                    &["model", "ffn_hidden"],
                    "(missing)",
                    format!("required: {dense_blocks} blocks have a dense MLP"),
                ))
            }
            None => 0,
        })
    }
}

impl RawAttention {
    /// `sliding_window` and `full_attention_every` (see [`SlidingWindow`]).
    fn window(&self, src: &Source, layers: u32) -> Result<Option<SlidingWindow>, InputError> {
        let p = |k: &'static str| ["attention", k];
        let Some(w) = self.sliding_window else {
            absent(
                src,
                &p("full_attention_every"),
                &self.full_attention_every,
                "without attention.sliding_window",
            )?;
            return Ok(None);
        };
        let tokens = dim(src, &p("sliding_window"), w)?;
        let full_every = match self.full_attention_every {
            None => 0,
            Some(n @ (0 | 1)) => {
                return Err(src.invalid(
                    &p("full_attention_every"),
                    n,
                    "must be at least 2 (1 would make every block full: drop \
                     attention.sliding_window instead; absent = every block windowed)",
                ))
            }
            Some(n) if n > layers as u64 => {
                return Err(src.invalid(
                    &p("full_attention_every"),
                    n,
                    format!(
                        "exceeds model.layers = {layers}: no block would attend to the whole \
                         sequence (omit it for every block windowed)"
                    ),
                ))
            }
            Some(n) => n as u32,
        };
        Ok(Some(SlidingWindow { tokens, full_every }))
    }

    fn validate(&self, src: &Source, hidden: u32, heads: u32) -> Result<Attention, InputError> {
        let p = |k: &'static str| ["attention", k];
        match self.kind {
            AttentionKind::Gqa => {
                let why = "with kind = \"gqa\" (an MLA dimension)";
                absent(src, &p("q_lora_rank"), &self.q_lora_rank, why)?;
                absent(src, &p("kv_lora_rank"), &self.kv_lora_rank, why)?;
                absent(src, &p("qk_nope_head_dim"), &self.qk_nope_head_dim, why)?;
                absent(src, &p("qk_rope_head_dim"), &self.qk_rope_head_dim, why)?;
                absent(src, &p("v_head_dim"), &self.v_head_dim, why)?;
                let kv_heads = required(
                    src,
                    &p("kv_heads"),
                    self.kv_heads,
                    "with kind = \"gqa\" (= model.heads for MHA)",
                )?;
                if kv_heads > heads || (heads / kv_heads) * kv_heads != heads {
                    return Err(src.invalid(
                        &p("kv_heads"),
                        kv_heads,
                        format!("does not divide model.heads = {heads}"),
                    ));
                }
                // Absent head_dim is the usual hidden/heads (divisibility checked above).
                let head_dim =
                    opt_dim(src, &p("head_dim"), self.head_dim)?.unwrap_or(hidden / heads);
                Ok(Attention::Gqa { kv_heads, head_dim })
            }
            AttentionKind::Mla => {
                let why = "with kind = \"mla\" (a GQA field)";
                absent(src, &p("kv_heads"), &self.kv_heads, why)?;
                absent(src, &p("head_dim"), &self.head_dim, why)?;
                let req = "with kind = \"mla\"";
                Ok(Attention::Mla {
                    q_lora_rank: opt_dim(src, &p("q_lora_rank"), self.q_lora_rank)?,
                    kv_lora_rank: required(src, &p("kv_lora_rank"), self.kv_lora_rank, req)?,
                    qk_nope_head_dim: required(
                        src,
                        &p("qk_nope_head_dim"),
                        self.qk_nope_head_dim,
                        req,
                    )?,
                    qk_rope_head_dim: required(
                        src,
                        &p("qk_rope_head_dim"),
                        self.qk_rope_head_dim,
                        req,
                    )?,
                    v_head_dim: required(src, &p("v_head_dim"), self.v_head_dim, req)?,
                })
            }
        }
    }
}

impl RawMoe {
    fn validate(&self, src: &Source, layers: u32) -> Result<Moe, InputError> {
        let p = |k: &'static str| ["moe", k];
        let experts = dim(src, &p("experts"), self.experts)?;
        let top_k = dim(src, &p("top_k"), self.top_k)?;
        if top_k > experts {
            return Err(src.invalid(
                &p("top_k"),
                top_k,
                format!("exceeds moe.experts = {experts}"),
            ));
        }
        let expert_ffn_hidden = dim(src, &p("expert_ffn_hidden"), self.expert_ffn_hidden)?;
        let shared_experts = match self.shared_experts {
            None | Some(0) => 0,
            Some(v) => dim(src, &p("shared_experts"), v)?,
        };
        let shared_ffn_hidden = if shared_experts > 0 {
            required(
                src,
                &p("shared_ffn_hidden"),
                self.shared_ffn_hidden,
                &format!("with moe.shared_experts = {shared_experts}"),
            )?
        } else {
            absent(
                src,
                &p("shared_ffn_hidden"),
                &self.shared_ffn_hidden,
                "without shared experts (moe.shared_experts = 0)",
            )?;
            0
        };
        let first_dense_layers = self.first_dense_layers.unwrap_or(0);
        if first_dense_layers >= layers as u64 {
            return Err(src.invalid(
                &p("first_dense_layers"),
                first_dense_layers,
                format!("leaves no MoE block among model.layers = {layers}"),
            ));
        }
        let routing = match self.routing.unwrap_or(RoutingKind::TopK) {
            RoutingKind::TopK => {
                let why = "with routing = \"top-k\"";
                absent(src, &p("threshold"), &self.threshold, why)?;
                absent(
                    src,
                    &p("two_expert_fraction"),
                    &self.two_expert_fraction,
                    why,
                )?;
                Routing::TopK
            }
            RoutingKind::DynamicTop1Top2 => {
                if top_k != 2 {
                    return Err(src.invalid(
                        &p("top_k"),
                        top_k,
                        "must be 2 with routing = \"dynamic-top1-top2\"",
                    ));
                }
                let why = "with routing = \"dynamic-top1-top2\" (seed 004 §3.2)";
                let threshold = match self.threshold {
                    Some(t) if t.is_finite() && t > 0.0 && t < 1.0 => t,
                    Some(t) => {
                        return Err(src.invalid(
                            &p("threshold"),
                            t,
                            "must lie in (0, 1): a gap between two routing probabilities",
                        ))
                    }
                    None => {
                        return Err(src.invalid(
                            &p("threshold"),
                            "(missing)",
                            format!("required {why}"),
                        ))
                    }
                };
                let two_expert_fraction = match self.two_expert_fraction {
                    Some(f) if (0.0..=1.0).contains(&f) => f,
                    Some(f) => {
                        return Err(src.invalid(
                            &p("two_expert_fraction"),
                            f,
                            "must lie in [0, 1]: a fraction of tokens",
                        ))
                    }
                    // Seed 004 §3.2.1: the share of tokens whose two best scores differ by
                    // less than the threshold (`routing::two_expert_fraction`).
                    None => crate::routing::two_expert_fraction(threshold, experts),
                };
                Routing::DynamicTop1Top2 {
                    threshold,
                    two_expert_fraction,
                }
            }
        };
        // (0, 1024]: a capacity of `experts / top_k` already lets one expert take every
        // token, so a larger factor changes nothing; 1024 covers any setting in use (1–2)
        // while keeping the padded token counts finite.
        let capacity_factor = match self.capacity_factor {
            Some(c) if !(c.is_finite() && c > 0.0 && c <= 1024.0) => {
                return Err(src.invalid_number(
                    &p("capacity_factor"),
                    c,
                    "must be a positive number: expected (0, 1024]",
                ))
            }
            c => c,
        };
        // max/mean tokens per expert lies in [1, experts]: at worst every token goes to one
        // expert, which then holds `experts` times the mean.
        let load_imbalance = match self.load_imbalance {
            Some(v) => {
                let v = finite_at_least(src, &p("load_imbalance"), v, 1.0)?;
                if v > f64::from(experts) {
                    return Err(src.invalid_number(
                        &p("load_imbalance"),
                        v,
                        format!(
                            "too large: max/mean tokens per expert is at most moe.experts = \
                             {experts} (expected [1, {experts}])"
                        ),
                    ));
                }
                v
            }
            None => 1.0, // perfectly balanced, documented in the file format
        };
        let (groups, group_top_k) = self.groups(src, experts, top_k)?;
        Ok(Moe {
            experts,
            top_k,
            shared_experts,
            expert_ffn_hidden,
            shared_ffn_hidden,
            first_dense_layers: first_dense_layers as u32,
            routing,
            capacity_factor,
            load_imbalance,
            groups,
            group_top_k,
        })
    }

    /// (`groups`, `group_top_k`): groups dividing the experts, `1 ≤ group_top_k ≤ groups`, and
    /// enough experts in `group_top_k` groups for `top_k`; absent, no limit (1, 1).
    fn groups(&self, src: &Source, experts: u32, top_k: u32) -> Result<(u32, u32), InputError> {
        let p = |k: &'static str| ["moe", k];
        let Some(g) = self.groups else {
            absent(
                src,
                &p("group_top_k"),
                &self.group_top_k,
                "without moe.groups (group-limited routing names its groups)",
            )?;
            return Ok((1, 1));
        };
        let groups = dim(src, &p("groups"), g)?;
        if !experts.is_multiple_of(groups) {
            return Err(src.invalid(
                &p("groups"),
                groups,
                format!("must divide moe.experts = {experts} (equal groups of experts)"),
            ));
        }
        let top = match self.group_top_k {
            None => groups,
            Some(t) => dim(src, &p("group_top_k"), t)?,
        };
        if top > groups {
            return Err(src.invalid(
                &p("group_top_k"),
                top,
                format!("exceeds moe.groups = {groups}"),
            ));
        }
        if u64::from(top) * u64::from(experts / groups) < u64::from(top_k) {
            return Err(src.invalid(
                &p("group_top_k"),
                top,
                format!(
                    "too few: {top} groups of {} experts cannot hold moe.top_k = {top_k}",
                    experts / groups
                ),
            ));
        }
        Ok((groups, top))
    }
}

impl RawTraining {
    fn validate(&self, src: &Source) -> Result<Training, InputError> {
        let p = |k: &'static str| ["training", k];
        let seq_len = count(src, &p("seq_len"), self.seq_len)?;
        let global_batch = count(src, &p("global_batch"), self.global_batch)?;
        if !self.precision.is_training() {
            return Err(src.invalid(
                &p("precision"),
                self.precision.name(),
                TRAINING_PRECISIONS_MSG,
            ));
        }
        let tokens = match &self.tokens {
            Some(t) => Some(t.value().map_err(|why| {
                let shown = match t {
                    crate::tokens::RawTokens::Number(v) => format!("{v}"),
                    crate::tokens::RawTokens::Text(s) => format!("{s:?}"),
                };
                src.invalid(&p("tokens"), shown, why)
            })?),
            None => None,
        };
        Ok(Training {
            seq_len,
            global_batch,
            precision: self.precision,
            optimizer: self.optimizer,
            tokens,
        })
    }
}

/// What a training precision may be (`Precision::is_training`; which GPUs accept MXFP8 and
/// NVFP4 is the cluster's to say, `Gpu::check_training_precision`).
const TRAINING_PRECISIONS_MSG: &str = "training precision must be bf16, fp16, fp8 (per-tensor \
    delayed scaling; alias fp8-delayed), fp8-current (per-tensor current scaling), fp8-block \
    (1x128/128x128 block scaling), mxfp8 or nvfp4 (these two on Blackwell GPUs)";

/// Why a workload override does not fit the model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrainingError {
    #[error("training.{field} = 0: must be positive")]
    Zero { field: &'static str },
    #[error("training.{field} = {value}: too large: expected [1, {MAX_WORKLOAD}]")]
    TooLarge { field: &'static str, value: u32 },
    #[error("training.seq_len = {seq_len}: exceeds the model's learned position table ({max_positions})")]
    SeqLenExceedsPositions { seq_len: u32, max_positions: u32 },
    #[error("training.precision = {0}: {TRAINING_PRECISIONS_MSG}")]
    Precision(Precision),
    #[error("training.tokens: {0}")]
    Tokens(String),
}

impl ModelSpec {
    /// The same model with another workload (the CLI's `--seq-len`, `--global-batch`...
    /// overrides), checked as the `[training]` section of a file is.
    ///
    /// ```
    /// let m = autoplan_graph::resolve_model("gpt3-175b").unwrap();
    /// let mut t = m.training.clone();
    /// t.seq_len = 8192;
    /// assert!(m.with_training(t).is_err()); // GPT-3's position table has 2048 rows
    /// ```
    pub fn with_training(&self, training: Training) -> Result<ModelSpec, TrainingError> {
        if training.seq_len == 0 {
            return Err(TrainingError::Zero { field: "seq_len" });
        }
        if training.global_batch == 0 {
            return Err(TrainingError::Zero {
                field: "global_batch",
            });
        }
        for (field, value) in [
            ("seq_len", training.seq_len),
            ("global_batch", training.global_batch),
        ] {
            if u64::from(value) > MAX_WORKLOAD {
                return Err(TrainingError::TooLarge { field, value });
            }
        }
        if self.positions == Positions::Learned && training.seq_len > self.max_positions {
            return Err(TrainingError::SeqLenExceedsPositions {
                seq_len: training.seq_len,
                max_positions: self.max_positions,
            });
        }
        if !training.precision.is_training() {
            return Err(TrainingError::Precision(training.precision));
        }
        if let Some(t) = training.tokens {
            crate::tokens::check_tokens(t).map_err(TrainingError::Tokens)?;
        }
        Ok(ModelSpec {
            training,
            ..self.clone()
        })
    }
}
