//! Architecture families: what each one's blocks are made of ([`Family::arch`]), whether it
//! trains with dropout, the family a published model name points to, and a model built from a
//! bare shape (layers, hidden, heads...) within a family ([`ModelSpec::from_shape`]).
//!
//! Sources, per family (the architecture facts that change parameters or activations):
//! - GPT: Radford+19 §2.3 and Brown+20 §2.1 (GPT-3 = GPT-2's architecture): learned positions,
//!   GELU 4h MLP, LayerNorm, biases, tied input/output embedding; dropout 0.1 (Korthikanti+22
//!   §4.1 counts its masks).
//! - BLOOM: Le Scao+22 "BLOOM" §3.2.2–3.2.3: ALiBi instead of position embeddings, a LayerNorm
//!   right after the word embedding, GELU 4h, biases, tied; vocabulary 250,880 (§3.3, the
//!   padded size in HF `bigscience/bloom` config.json `vocab_size`); no dropout
//!   (`hidden_dropout`/`attention_dropout` 0.0 in the same config.json).
//! - OPT: Zhang+22 "OPT" §2.1–2.2: the GPT-3 decoder with ReLU, learned positions, dropout 0.1
//!   ("dropout of 0.1 throughout"); HF `OPTLearnedPositionalEmbedding` holds 2 offset rows
//!   beyond `max_position_embeddings`.
//! - MT-NLG: Smith+22 "Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B" §3:
//!   the GPT-3 architecture (decoder, learned positions, GELU 4h) in Megatron-DeepSpeed.
//! - GPT-NeoX: Black+22 "GPT-NeoX-20B" §2.1: rotary embeddings (on 25% of each head's
//!   dimensions: no parameters either way), parallel attention and feed-forward layers with
//!   two LayerNorms (kept untied, §2.1 footnote), untied input/output embeddings, biases;
//!   `configs/20B.yml` trains with hidden and attention dropout 0.
//! - MPT: MosaicML 2023 (HF `mosaicml/mpt-7b` config.json: `alibi: true`, `no_bias: true`,
//!   `expansion_ratio: 4`, dropouts `attn_pdrop`/`resid_pdrop`/`emb_pdrop` 0); output projection
//!   tied to `wte`. Its LayerNorms have no bias either (`no_bias`); autoplan counts a
//!   LayerNorm as weight + bias, `h` parameters per norm too many (< 0.01% of the model).
//! - GLM: Zeng+22 "GLM-130B" §2.1: GeGLU MLP, rotary positions, (DeepNorm post-)LayerNorm,
//!   biases; logits from the word-embedding weights (SAT's `final_forward`, tied).
//! - Llama: Touvron+23 §2.2 (RMSNorm pre-norm, SwiGLU, RoPE, no biases, untied); the MoE
//!   families and Nemotron as their bundled files state.

use crate::{
    Attention, Family, Mlp, ModelSpec, Moe, Norm, Optimizer, Positions, Precision, Training,
};

/// What a family's blocks are made of: the fields of [`ModelSpec`] a family decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arch {
    pub mlp: Mlp,
    pub norm: Norm,
    pub positions: Positions,
    pub tied_embeddings: bool,
    pub bias: bool,
    pub embedding_norm: bool,
    pub parallel_block: bool,
}

/// A family name that is not one of [`Family::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown model family `{name}` (known: {})", Family::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", "))]
pub struct UnknownFamily {
    pub name: String,
}

impl Family {
    /// Every family, in the order `show` and the error messages list them.
    pub const ALL: [Family; 13] = [
        Family::Gpt,
        Family::Bloom,
        Family::Opt,
        Family::MtNlg,
        Family::GptNeox,
        Family::Mpt,
        Family::Glm,
        Family::Llama,
        Family::Nemotron,
        Family::Mixtral,
        Family::Deepseek,
        Family::QwenMoe,
        Family::GptOss,
    ];

    /// The name model files use (`family = "gpt-neox"`).
    pub fn name(self) -> &'static str {
        match self {
            Family::Gpt => "gpt",
            Family::Bloom => "bloom",
            Family::Opt => "opt",
            Family::MtNlg => "mt-nlg",
            Family::GptNeox => "gpt-neox",
            Family::Mpt => "mpt",
            Family::Glm => "glm",
            Family::Llama => "llama",
            Family::Nemotron => "nemotron",
            Family::Mixtral => "mixtral",
            Family::Deepseek => "deepseek",
            Family::QwenMoe => "qwen-moe",
            Family::GptOss => "gpt-oss",
        }
    }

    /// The family of a name as model files write it (case-insensitive; `_` reads as `-`).
    ///
    /// ```
    /// use autoplan_graph::Family;
    /// assert_eq!("GPT_NeoX".parse::<Family>().unwrap(), Family::GptNeox);
    /// let e = "bert".parse::<Family>().unwrap_err().to_string();
    /// assert!(e.contains("unknown model family `bert`") && e.contains("bloom, opt, mt-nlg"), "{e}");
    /// ```
    pub fn parse(name: &str) -> Result<Family, UnknownFamily> {
        let n = name.trim().to_ascii_lowercase().replace('_', "-");
        Family::ALL
            .into_iter()
            .find(|f| f.name() == n)
            .ok_or_else(|| UnknownFamily {
                name: name.to_string(),
            })
    }

    /// Families whose models have a `[moe]` section.
    pub fn is_moe(self) -> bool {
        matches!(
            self,
            Family::Mixtral | Family::Deepseek | Family::QwenMoe | Family::GptOss
        )
    }

    /// The family trains with dropout (its masks are stored for backward). Sources in the
    /// module docs; the Llama-era families train without.
    pub fn dropout(self) -> bool {
        matches!(self, Family::Gpt | Family::Opt | Family::MtNlg)
    }

    /// The family's block architecture (module docs for sources). The MoE families take
    /// their dense parts from the files that name them; their defaults here are Llama's
    /// (gpt-oss: with biases).
    pub fn arch(self) -> Arch {
        let gpt = Arch {
            mlp: Mlp::Gelu,
            norm: Norm::LayerNorm,
            positions: Positions::Learned,
            tied_embeddings: true,
            bias: true,
            embedding_norm: false,
            parallel_block: false,
        };
        let llama = Arch {
            mlp: Mlp::Swiglu,
            norm: Norm::RmsNorm,
            positions: Positions::Rope,
            tied_embeddings: false,
            bias: false,
            embedding_norm: false,
            parallel_block: false,
        };
        match self {
            Family::Gpt | Family::MtNlg => gpt,
            Family::Bloom => Arch {
                positions: Positions::Alibi,
                embedding_norm: true,
                ..gpt
            },
            Family::Opt => Arch {
                mlp: Mlp::Relu,
                ..gpt
            },
            Family::GptNeox => Arch {
                positions: Positions::Rope,
                tied_embeddings: false,
                parallel_block: true,
                ..gpt
            },
            Family::Mpt => Arch {
                positions: Positions::Alibi,
                bias: false,
                ..gpt
            },
            Family::Glm => Arch {
                mlp: Mlp::Geglu,
                positions: Positions::Rope,
                ..gpt
            },
            Family::Nemotron => Arch {
                mlp: Mlp::SquaredRelu,
                norm: Norm::LayerNorm,
                ..llama
            },
            Family::GptOss => Arch {
                bias: true,
                ..llama
            },
            Family::Llama | Family::Mixtral | Family::Deepseek | Family::QwenMoe => llama,
        }
    }

    /// Rows of a learned position table for training at `seq_len` (OPT keeps 2 offset rows,
    /// see the module docs); 0 without one.
    pub fn position_rows(self, seq_len: u32) -> u32 {
        match (self.arch().positions, self) {
            (Positions::Learned, Family::Opt) => seq_len.saturating_add(2),
            (Positions::Learned, _) => seq_len,
            _ => 0,
        }
    }

    /// The family a published model name points to (`BLOOM-176B` → BLOOM, `Megatron-Turing
    /// NLG 530B` → MT-NLG, `GPT-3 175B` → GPT...), `None` when the name names none.
    ///
    /// ```
    /// use autoplan_graph::Family;
    /// assert_eq!(Family::of_model_name("GPT-NeoX-20B"), Some(Family::GptNeox));
    /// assert_eq!(Family::of_model_name("GPT-OSS-120B"), Some(Family::GptOss));
    /// assert_eq!(Family::of_model_name("GPT-175B (MegaScale config)"), Some(Family::Gpt));
    /// assert_eq!(Family::of_model_name("T5-11B"), None);
    /// ```
    pub fn of_model_name(name: &str) -> Option<Family> {
        let n = name.to_ascii_lowercase().replace(['_', ' '], "-");
        let has = |s: &str| n.contains(s);
        // Most specific first: "gpt-neox" and "gpt-oss" before "gpt", "mt-nlg" before "gpt"
        // (a row may say "GPT 530B (MT-NLG config)": the same architecture either way).
        Some(if has("bloom") {
            Family::Bloom
        } else if has("neox") || has("pythia") {
            // Pythia is GPT-NeoX's architecture, trained in its library (Biderman+23 §2.1).
            Family::GptNeox
        } else if has("falcon") {
            // Falcon's block is the NeoX one: attention and MLP in parallel, rotary, GELU 4h,
            // no dropout (Almazrouei+23 "The Falcon Series of Open Language Models" §4.1;
            // it has no biases, a LayerNorm's worth of parameters autoplan counts, < 0.01%).
            Family::GptNeox
        } else if has("starcoder") || has("santacoder") {
            // StarCoder is GPT-2's architecture with multi-query attention and learned
            // absolute positions (Li+23 "StarCoder" §5.1).
            Family::Gpt
        } else if has("gpt-oss") {
            Family::GptOss
        } else if has("mt-nlg") || has("turing-nlg") {
            Family::MtNlg
        } else if n.starts_with("opt-") || n == "opt" {
            Family::Opt
        } else if n.starts_with("mpt") {
            Family::Mpt
        } else if has("glm") {
            Family::Glm
        } else if has("nemotron") {
            Family::Nemotron
        } else if has("mixtral") {
            Family::Mixtral
        } else if has("deepseek") {
            Family::Deepseek
        } else if has("qwen") {
            Family::QwenMoe
        } else if n.starts_with("gpt") {
            Family::Gpt
        } else if has("llama") {
            Family::Llama
        } else {
            return None;
        })
    }
}

impl std::str::FromStr for Family {
    type Err = UnknownFamily;
    fn from_str(s: &str) -> Result<Family, UnknownFamily> {
        Family::parse(s)
    }
}

/// A bare transformer shape, as a published run states it.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub layers: u32,
    pub hidden: u32,
    pub heads: u32,
    /// `None`: multi-head attention (`heads`).
    pub kv_heads: Option<u32>,
    /// `None`: `4·hidden` (the GPT convention; gated families state theirs).
    pub ffn_hidden: Option<u32>,
    /// `None`: the family's fixed vocabulary where it has one (BLOOM), else an error.
    pub vocab: Option<u32>,
    pub seq_len: u32,
    pub moe: Option<Moe>,
}

/// Why a shape is not a model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("{0} is 0")]
    Zero(&'static str),
    #[error("hidden {hidden} is not divisible by heads {heads}")]
    HeadsDontDivide { hidden: u32, heads: u32 },
    #[error("kv_heads {kv_heads} does not divide heads {heads}")]
    KvHeadsDontDivide { kv_heads: u32, heads: u32 },
    #[error("ffn_hidden not given and 4 × hidden {0} overflows")]
    FfnOverflow(u32),
    #[error("moe top-k {top_k} exceeds experts {experts}")]
    TopK { top_k: u32, experts: u32 },
    #[error("vocabulary not given (the {0} family has no fixed one)")]
    NoVocab(&'static str),
}

/// BLOOM's vocabulary, shared by every BLOOM size (Le Scao+22 §3.3; HF config.json).
const BLOOM_VOCAB: u32 = 250_880;

impl ModelSpec {
    /// A model of `family`'s architecture ([`Family::arch`]) with the given shape, trained at
    /// `shape.seq_len` (global batch 1, BF16, Adam: the caller sets the workload).
    ///
    /// ```
    /// use autoplan_graph::{Family, ModelSpec, Shape};
    /// // BLOOM-176B from its shape: 176.2B (GELU 4h, biases, tied, ALiBi, embedding norm).
    /// let s = Shape { layers: 70, hidden: 14336, heads: 112, kv_heads: None, ffn_hidden: None,
    ///                 vocab: None, seq_len: 2048, moe: None };
    /// let bloom = ModelSpec::from_shape("BLOOM-176B", Family::Bloom, &s).unwrap();
    /// assert!((bloom.total_params() / 176.247e9 - 1.0).abs() < 1e-4);
    /// // The same shape built Llama-style (SwiGLU at 4h, untied) is a different model: 237.4B.
    /// let mut s2 = s.clone();
    /// s2.vocab = Some(250_880);
    /// let llama = ModelSpec::from_shape("BLOOM-176B", Family::Llama, &s2).unwrap();
    /// assert!((llama.total_params() / 1e9 - 237.4).abs() < 0.1);
    /// ```
    pub fn from_shape(name: &str, family: Family, s: &Shape) -> Result<ModelSpec, ShapeError> {
        for (what, v) in [
            ("layers", s.layers),
            ("hidden", s.hidden),
            ("heads", s.heads),
            ("seq_len", s.seq_len),
        ] {
            if v == 0 {
                return Err(ShapeError::Zero(what));
            }
        }
        if !s.hidden.is_multiple_of(s.heads) {
            return Err(ShapeError::HeadsDontDivide {
                hidden: s.hidden,
                heads: s.heads,
            });
        }
        let kv_heads = s.kv_heads.unwrap_or(s.heads);
        if kv_heads == 0 || kv_heads > s.heads || !s.heads.is_multiple_of(kv_heads) {
            return Err(ShapeError::KvHeadsDontDivide {
                kv_heads,
                heads: s.heads,
            });
        }
        let ffn_hidden = match s.ffn_hidden {
            Some(0) => return Err(ShapeError::Zero("ffn_hidden")),
            Some(f) => f,
            None => s
                .hidden
                .checked_mul(4)
                .ok_or(ShapeError::FfnOverflow(s.hidden))?,
        };
        if let Some(m) = &s.moe {
            if m.experts == 0 {
                return Err(ShapeError::Zero("moe experts"));
            }
            if m.top_k == 0 {
                return Err(ShapeError::Zero("moe top-k"));
            }
            if m.top_k > m.experts {
                return Err(ShapeError::TopK {
                    top_k: m.top_k,
                    experts: m.experts,
                });
            }
            if m.expert_ffn_hidden == 0 {
                return Err(ShapeError::Zero("moe ffn_hidden"));
            }
        }
        let vocab = match (s.vocab, family) {
            (Some(0), _) => return Err(ShapeError::Zero("vocab")),
            (Some(v), _) => v,
            (None, Family::Bloom) => BLOOM_VOCAB,
            (None, f) => return Err(ShapeError::NoVocab(f.name())),
        };
        let a = family.arch();
        Ok(ModelSpec {
            name: name.to_string(),
            family,
            layers: s.layers,
            hidden: s.hidden,
            heads: s.heads,
            attention: Attention::Gqa {
                kv_heads,
                head_dim: s.hidden / s.heads,
            },
            window: None,
            ffn_hidden,
            mlp: a.mlp,
            norm: a.norm,
            positions: a.positions,
            max_positions: family.position_rows(s.seq_len),
            vocab,
            tied_embeddings: a.tied_embeddings,
            bias: a.bias,
            embedding_norm: a.embedding_norm,
            parallel_block: a.parallel_block && s.moe.is_none(),
            moe: s.moe.clone(),
            mtp_modules: 0,
            training: Training {
                seq_len: s.seq_len,
                global_batch: 1,
                precision: Precision::Bf16,
                optimizer: Optimizer::Adam,
                tokens: None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(layers: u32, hidden: u32, heads: u32, vocab: Option<u32>) -> Shape {
        Shape {
            layers,
            hidden,
            heads,
            kv_heads: None,
            ffn_hidden: None,
            vocab,
            seq_len: 2048,
            moe: None,
        }
    }

    #[test]
    fn names_round_trip_through_serde_and_parse() {
        for f in Family::ALL {
            assert_eq!(Family::parse(f.name()), Ok(f));
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.name()));
        }
    }

    #[test]
    fn each_family_counts_its_own_architecture() {
        // 2 blocks of h 64, vocab 1000, seq 2048: the differences between families are the
        // facts the module docs cite.
        let h = 64.0;
        let p = |f: Family| {
            ModelSpec::from_shape("t", f, &shape(2, 64, 4, Some(1000)))
                .unwrap()
                .total_params()
        };
        let gpt = p(Family::Gpt);
        // GPT: 2·(12h² + 13h) + V·h + s·h + final LayerNorm 2h.
        let want = 2.0 * (12.0 * h * h + 13.0 * h) + 1000.0 * h + 2048.0 * h + 2.0 * h;
        assert_eq!(gpt, want);
        assert_eq!(p(Family::MtNlg), gpt);
        // BLOOM: no position table, an embedding LayerNorm (2h).
        assert_eq!(p(Family::Bloom), gpt - 2048.0 * h + 2.0 * h);
        // OPT: ReLU is priced as GELU; 2 more position rows.
        assert_eq!(p(Family::Opt), gpt + 2.0 * h);
        // GPT-NeoX: rotary (no table), untied head.
        assert_eq!(p(Family::GptNeox), gpt - 2048.0 * h + 1000.0 * h);
        // MPT: no table, no biases (per block QKV 3h, o h, fc1 4h, fc2 h).
        assert_eq!(p(Family::Mpt), gpt - 2048.0 * h - 2.0 * 9.0 * h);
        // GLM: rotary (no table); GeGLU adds a third h × 4h matrix and its 4h bias per block.
        let glm = gpt - 2048.0 * h + 2.0 * (4.0 * h * h + 4.0 * h);
        assert_eq!(p(Family::Glm), glm);
    }

    #[test]
    fn bad_shapes_say_why() {
        let e = |s: Shape| ModelSpec::from_shape("t", Family::Gpt, &s).unwrap_err();
        assert_eq!(e(shape(0, 64, 4, Some(1))), ShapeError::Zero("layers"));
        assert_eq!(
            e(shape(2, 65, 4, Some(1))).to_string(),
            "hidden 65 is not divisible by heads 4"
        );
        assert_eq!(
            e(shape(2, 64, 4, None)).to_string(),
            "vocabulary not given (the gpt family has no fixed one)"
        );
        let mut s = shape(2, 64, 4, Some(1));
        s.kv_heads = Some(3);
        assert!(matches!(e(s), ShapeError::KvHeadsDontDivide { .. }));
        assert!(matches!(
            e(shape(2, u32::MAX / 2 - 1, 1, Some(1))),
            ShapeError::FfnOverflow(_)
        ));
    }

    #[test]
    fn model_names_point_to_families() {
        for (name, f) in [
            ("BLOOM-176B", Family::Bloom),
            ("Megatron-Turing NLG 530B", Family::MtNlg),
            ("GPT 530B (MT-NLG config)", Family::MtNlg),
            ("OPT-175B", Family::Opt),
            ("MPT-70B", Family::Mpt),
            ("GPT-3 175B (MLPerf reference)", Family::Gpt),
            ("LLAMA3.1_405B", Family::Llama),
            ("Qwen3-Next-80B-A3B", Family::QwenMoe),
            ("Nemotron-4-15B", Family::Nemotron),
            ("GLM-130B", Family::Glm),
            ("DeepSeekV3", Family::Deepseek),
            ("Pythia-12B", Family::GptNeox),
            ("Falcon-180B", Family::GptNeox),
            ("StarCoderBase-15.5B", Family::Gpt),
        ] {
            assert_eq!(Family::of_model_name(name), Some(f), "{name}");
        }
    }
}
