//! Import of a Hugging Face `config.json` (model types llama, mistral, mixtral, qwen2_moe,
//! qwen3_moe, deepseek_v2, deepseek_v3, gpt_oss) into a [`ModelSpec`], through the same
//! validation as a model TOML. Errors name the config.json key (and its line when present).
//!
//! Sliding windows: Mistral's `sliding_window` windows every layer; gpt-oss's `layer_types`
//! ("sliding_attention"/"full_attention") must repeat one full layer every N
//! ([`crate::SlidingWindow::full_every`]); Qwen's `use_sliding_window = true` (windows above
//! `max_window_layers`) is refused.
//!
//! Not modelled (each well under 0.01% of the parameters): Qwen2's q/k/v biases, Qwen3's per-head
//! q/k RMSNorms, DeepSeek-V3's router score-correction bias, Qwen2-MoE's shared-expert gate,
//! gpt-oss's router bias and per-head attention sinks (a learned softmax logit per head).

use autoplan_input::{InputError, Location, Source};
use serde_json::{Map, Value};

use crate::file::{AttentionKind, RawAttention, RawModel, RawModelFile, RawMoe, RawTraining};
use crate::{Family, Mlp, ModelSpec, Norm, Positions, Training};

/// The model types [`ModelSpec::from_hf_config`] reads.
pub const HF_MODEL_TYPES: &[&str] = &[
    "llama",
    "mistral",
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "deepseek_v2",
    "deepseek_v3",
    "gpt_oss",
];

struct Config<'a> {
    src: &'a Source,
    obj: &'a Map<String, Value>,
    model_type: String,
    /// (TOML field, config.json key) for each value taken, to report errors in HF terms.
    used: Vec<(&'static str, &'static str)>,
}

impl<'a> Config<'a> {
    fn locate(&self, key: &str) -> Option<Location> {
        let text = self.src.text();
        let at = text.find(&format!("\"{key}\""))?;
        let before = &text[..at];
        Some(Location {
            line: before.matches('\n').count() + 1,
            column: before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1,
        })
    }

    fn invalid(
        &self,
        key: &str,
        value: impl std::fmt::Display,
        reason: impl std::fmt::Display,
    ) -> InputError {
        InputError::Invalid {
            file: self.src.file().to_path_buf(),
            location: self.locate(key),
            field: key.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        }
    }

    fn opt_u64(
        &mut self,
        field: &'static str,
        key: &'static str,
    ) -> Result<Option<u64>, InputError> {
        self.used.push((field, key));
        match self.obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.invalid(key, v, "must be a non-negative integer")),
        }
    }

    fn u64(&mut self, field: &'static str, key: &'static str) -> Result<u64, InputError> {
        match self.opt_u64(field, key)? {
            Some(v) => Ok(v),
            None => Err(self.invalid(
                key,
                "(missing)",
                format!("required for model_type = \"{}\"", self.model_type),
            )),
        }
    }

    fn opt_bool(&self, key: &str) -> Result<Option<bool>, InputError> {
        match self.obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.invalid(key, v, "must be true or false")),
        }
    }

    /// Translate a validation error about a TOML field into the config.json key it came from.
    fn translate(&self, e: InputError) -> InputError {
        match e {
            InputError::Invalid {
                field,
                value,
                reason,
                ..
            } => {
                let key = self
                    .used
                    .iter()
                    .rev()
                    .find(|(f, _)| *f == field)
                    .map_or(field.as_str(), |(_, k)| *k)
                    .to_string();
                let mut reason = reason;
                for (f, k) in &self.used {
                    reason = reason.replace(f, k);
                }
                self.invalid(&key, value, reason)
            }
            other => other,
        }
    }
}

impl Training {
    /// The workload given to an imported `config.json`, which has none: 4096-token sequences,
    /// 1024 sequences per step, bf16, Adam. The CLI overrides it; `show` prints it.
    pub const IMPORT_DEFAULT: Training = Training {
        seq_len: 4096,
        global_batch: 1024,
        precision: crate::Precision::Bf16,
        optimizer: crate::Optimizer::Adam,
        tokens: None,
    };
}

impl ModelSpec {
    /// Read a Hugging Face `config.json`. The model is named after the file's directory (or
    /// its stem when not called `config.json`); `training` is the workload to attach.
    ///
    /// ```
    /// use autoplan_graph::{ModelSpec, Training};
    /// use autoplan_input::Source;
    /// let json = r#"{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
    ///   "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
    ///   "vocab_size": 128256, "tie_word_embeddings": false}"#;
    /// let m = ModelSpec::from_hf_config(&Source::new("llama/config.json", json),
    ///     Training::IMPORT_DEFAULT).unwrap();
    /// assert!((m.total_params() / 8.03e9 - 1.0).abs() < 0.001);
    /// ```
    pub fn from_hf_config(src: &Source, training: Training) -> Result<ModelSpec, InputError> {
        let value: Value = serde_json::from_str(src.text()).map_err(|e| InputError::Syntax {
            file: src.file().to_path_buf(),
            location: (e.line() > 0).then(|| Location {
                line: e.line(),
                column: e.column(),
            }),
            message: e.to_string(),
        })?;
        let Some(obj) = value.as_object() else {
            return Err(InputError::Syntax {
                file: src.file().to_path_buf(),
                location: None,
                message: "expected a JSON object".into(),
            });
        };
        let model_type = match obj.get("model_type") {
            Some(Value::String(s)) => s.clone(),
            other => {
                return Err(InputError::Invalid {
                    file: src.file().to_path_buf(),
                    location: None,
                    field: "model_type".into(),
                    value: other.map_or("(missing)".to_string(), |v| v.to_string()),
                    reason: format!("must be one of {}", HF_MODEL_TYPES.join(", ")),
                })
            }
        };
        let mut c = Config {
            src,
            obj,
            model_type,
            used: Vec::new(),
        };
        if !HF_MODEL_TYPES.contains(&c.model_type.as_str()) {
            return Err(c.invalid(
                "model_type",
                format!("\"{}\"", c.model_type),
                format!("not supported (supported: {})", HF_MODEL_TYPES.join(", ")),
            ));
        }
        let raw = c.raw_file(src, &training)?;
        let mut spec = raw.validate(src).map_err(|e| c.translate(e))?;
        spec.training = training;
        Ok(spec)
    }
}

impl Config<'_> {
    fn raw_file(&mut self, src: &Source, training: &Training) -> Result<RawModelFile, InputError> {
        let mt = self.model_type.clone();
        let hidden = self.u64("model.hidden", "hidden_size")?;
        let layers = self.u64("model.layers", "num_hidden_layers")?;
        let heads = self.u64("model.heads", "num_attention_heads")?;
        let vocab = self.u64("model.vocab", "vocab_size")?;
        let ffn = self.opt_u64("model.ffn_hidden", "intermediate_size")?;
        let tied = self.opt_bool("tie_word_embeddings")?.unwrap_or(false);
        let deepseek = mt.starts_with("deepseek");
        let family = match mt.as_str() {
            "llama" | "mistral" => Family::Llama,
            "mixtral" => Family::Mixtral,
            "qwen2_moe" | "qwen3_moe" => Family::QwenMoe,
            "gpt_oss" => Family::GptOss,
            _ => Family::Deepseek,
        };
        let (sliding_window, full_attention_every) = self.window(&mt, layers)?;
        // gpt-oss: q/k/v/o and expert biases, per `attention_bias` (true in its config); the
        // other types' biases are not modelled (module docs).
        let bias = mt == "gpt_oss" && self.opt_bool("attention_bias")? != Some(false);

        let attention = self.attention(deepseek, heads, sliding_window, full_attention_every)?;
        let moe = self.moe(&mt)?;
        // An all-MoE model's intermediate_size is not a dense width: drop it unless needed.
        let all_moe = moe
            .as_ref()
            .is_some_and(|m| m.first_dense_layers.unwrap_or(0) == 0);
        let mtp = if mt == "deepseek_v3" {
            self.opt_u64("model.mtp_modules", "num_nextn_predict_layers")?
        } else {
            None
        };
        let name = model_name(src);
        Ok(RawModelFile {
            model: RawModel {
                name,
                family,
                layers,
                hidden,
                heads,
                ffn_hidden: if all_moe { None } else { ffn },
                mlp: Mlp::Swiglu,
                norm: Norm::RmsNorm,
                positions: Positions::Rope,
                max_positions: None,
                vocab,
                tied_embeddings: tied,
                bias,
                embedding_norm: None,
                parallel_block: None,
                mtp_modules: mtp,
            },
            attention,
            moe,
            training: RawTraining {
                seq_len: training.seq_len as u64,
                global_batch: training.global_batch as u64,
                precision: training.precision,
                optimizer: training.optimizer,
                tokens: training.tokens.map(crate::tokens::RawTokens::Number),
            },
        })
    }

    /// `[attention]`: MLA for DeepSeek types, else GQA (MHA when `num_key_value_heads` is
    /// absent).
    fn attention(
        &mut self,
        deepseek: bool,
        heads: u64,
        sliding_window: Option<u64>,
        full_attention_every: Option<u64>,
    ) -> Result<RawAttention, InputError> {
        Ok(if deepseek {
            RawAttention {
                kind: AttentionKind::Mla,
                kv_heads: None,
                head_dim: None,
                q_lora_rank: self.opt_u64("attention.q_lora_rank", "q_lora_rank")?,
                kv_lora_rank: Some(self.u64("attention.kv_lora_rank", "kv_lora_rank")?),
                qk_nope_head_dim: Some(self.u64("attention.qk_nope_head_dim", "qk_nope_head_dim")?),
                qk_rope_head_dim: Some(self.u64("attention.qk_rope_head_dim", "qk_rope_head_dim")?),
                v_head_dim: Some(self.u64("attention.v_head_dim", "v_head_dim")?),
                sliding_window,
                full_attention_every,
            }
        } else {
            // HF default: num_key_value_heads absent means MHA.
            let kv = self.opt_u64("attention.kv_heads", "num_key_value_heads")?;
            RawAttention {
                kind: AttentionKind::Gqa,
                kv_heads: Some(kv.unwrap_or(heads)),
                head_dim: self.opt_u64("attention.head_dim", "head_dim")?,
                q_lora_rank: None,
                kv_lora_rank: None,
                qk_nope_head_dim: None,
                qk_rope_head_dim: None,
                v_head_dim: None,
                sliding_window,
                full_attention_every,
            }
        })
    }

    /// `[moe]` of model type `mt` (`None` for dense types).
    fn moe(&mut self, mt: &str) -> Result<Option<RawMoe>, InputError> {
        Ok(match mt {
            "llama" | "mistral" => None,
            "mixtral" | "gpt_oss" => Some(RawMoe {
                experts: self.u64("moe.experts", "num_local_experts")?,
                top_k: self.u64("moe.top_k", "num_experts_per_tok")?,
                expert_ffn_hidden: self.u64("moe.expert_ffn_hidden", "intermediate_size")?,
                ..empty_moe()
            }),
            "qwen2_moe" | "qwen3_moe" => {
                if let Some(step) =
                    self.opt_u64("moe.decoder_sparse_step", "decoder_sparse_step")?
                {
                    if step != 1 {
                        return Err(self.invalid(
                            "decoder_sparse_step",
                            step,
                            "only 1 (every layer MoE) is supported",
                        ));
                    }
                }
                if let Some(v) = self.obj.get("mlp_only_layers") {
                    if v.as_array().is_some_and(|a| !a.is_empty()) {
                        return Err(self.invalid(
                            "mlp_only_layers",
                            v,
                            "dense layers among MoE layers are not supported (only leading ones)",
                        ));
                    }
                }
                let shared =
                    self.opt_u64("moe.shared_ffn_hidden", "shared_expert_intermediate_size")?;
                let shared = shared.filter(|&s| s > 0);
                Some(RawMoe {
                    experts: self.u64("moe.experts", "num_experts")?,
                    top_k: self.u64("moe.top_k", "num_experts_per_tok")?,
                    expert_ffn_hidden: self
                        .u64("moe.expert_ffn_hidden", "moe_intermediate_size")?,
                    shared_experts: shared.map(|_| 1),
                    shared_ffn_hidden: shared,
                    ..empty_moe()
                })
            }
            _ => {
                if let Some(freq) = self.opt_u64("moe.moe_layer_freq", "moe_layer_freq")? {
                    if freq != 1 {
                        return Err(self.invalid(
                            "moe_layer_freq",
                            freq,
                            "only 1 (every layer after the dense ones is MoE) is supported",
                        ));
                    }
                }
                let shared = self.opt_u64("moe.shared_experts", "n_shared_experts")?;
                let expert_ffn = self.u64("moe.expert_ffn_hidden", "moe_intermediate_size")?;
                Some(RawMoe {
                    experts: self.u64("moe.experts", "n_routed_experts")?,
                    top_k: self.u64("moe.top_k", "num_experts_per_tok")?,
                    expert_ffn_hidden: expert_ffn,
                    shared_experts: shared,
                    // DeepSeek's shared experts are MLPs of moe_intermediate_size each.
                    shared_ffn_hidden: shared.filter(|&s| s > 0).map(|_| expert_ffn),
                    first_dense_layers: self
                        .opt_u64("moe.first_dense_layers", "first_k_dense_replace")?,
                    // Group-limited routing (DeepSeek-V2 §2.1.3, V3 §2.1.2).
                    groups: self.opt_u64("moe.groups", "n_group")?,
                    group_top_k: self.opt_u64("moe.group_top_k", "topk_group")?,
                    ..empty_moe()
                })
            }
        })
    }

    /// (`sliding_window`, `full_attention_every`) of the model file, from `sliding_window` and,
    /// for gpt-oss, `layer_types` (module docs).
    fn window(
        &mut self,
        model_type: &str,
        layers: u64,
    ) -> Result<(Option<u64>, Option<u64>), InputError> {
        if model_type.starts_with("qwen") {
            if self.opt_bool("use_sliding_window")? == Some(true) {
                return Err(self.invalid(
                    "use_sliding_window",
                    true,
                    "Qwen's windows above max_window_layers are not supported",
                ));
            }
            return Ok((None, None));
        }
        if !matches!(model_type, "mistral" | "gpt_oss") {
            return Ok((None, None));
        }
        let Some(w) = self.opt_u64("attention.sliding_window", "sliding_window")? else {
            return Ok((None, None));
        };
        let Some(types) = self.obj.get("layer_types") else {
            return Ok((Some(w), None));
        };
        let bad = |c: &Self, why: String| c.invalid("layer_types", "[…]", why);
        let Some(types) = types.as_array() else {
            return Err(bad(self, "must be a list".into()));
        };
        if types.len() as u64 != layers {
            return Err(bad(
                self,
                format!(
                    "has {} entries for num_hidden_layers = {layers}",
                    types.len()
                ),
            ));
        }
        let mut full = Vec::with_capacity(types.len());
        for (i, t) in types.iter().enumerate() {
            full.push(match t.as_str() {
                Some("full_attention") => true,
                Some("sliding_attention") => false,
                _ => {
                    return Err(bad(
                        self,
                        format!(
                            "entry {i} is {t}: expected \"sliding_attention\" or \
                             \"full_attention\""
                        ),
                    ))
                }
            });
        }
        let Some(first) = full.iter().position(|&f| f) else {
            return Ok((Some(w), None));
        };
        if full.iter().all(|&f| f) {
            return Ok((None, None));
        }
        let every = first + 1;
        if let Some(i) = (0..full.len()).find(|&i| full[i] != ((i + 1) % every == 0)) {
            return Err(bad(
                self,
                format!(
                    "entry {i} breaks the pattern of one full_attention layer every {every} \
                     (the only pattern supported)"
                ),
            ));
        }
        self.used
            .push(("attention.full_attention_every", "layer_types"));
        Ok((Some(w), Some(every as u64)))
    }
}

fn empty_moe() -> RawMoe {
    RawMoe {
        experts: 0,
        top_k: 0,
        expert_ffn_hidden: 0,
        shared_experts: None,
        shared_ffn_hidden: None,
        first_dense_layers: None,
        routing: None,
        threshold: None,
        two_expert_fraction: None,
        capacity_factor: None,
        load_imbalance: None,
        load_imbalance_source: None,
        groups: None,
        group_top_k: None,
    }
}

/// The model's name: the file's stem, or its folder's name for a `config.json`.
fn model_name(src: &Source) -> String {
    let f = src.file();
    let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("hf-model");
    if stem == "config" {
        f.parent()
            .and_then(|p| p.file_name())
            .and_then(|s| s.to_str())
            .unwrap_or("hf-model")
            .to_string()
    } else {
        stem.to_string()
    }
}
