//! Hugging Face config.json import: each fixture (tests/fixtures/hf, transcribed from the public
//! model repositories) must import to exactly the bundled TOML model of the same name.

use std::path::PathBuf;

use autoplan_graph::{resolve_model, ModelSpec, Training};
use autoplan_input::Source;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hf")
}

#[test]
fn every_fixture_imports_to_its_bundled_model() {
    let mut n = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let bundled = resolve_model(&name).unwrap();
        let src = Source::read(&path).unwrap();
        let mut imported = ModelSpec::from_hf_config(&src, bundled.training.clone())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(imported.total_params(), bundled.total_params(), "{name}");
        assert_eq!(imported.active_params(), bundled.active_params(), "{name}");
        imported.training = bundled.training.clone();
        assert_eq!(imported, bundled, "{name}");
        n += 1;
    }
    assert_eq!(n, 10, "one fixture per HF-importable bundled model");
}

#[test]
fn resolve_model_reads_a_config_json_path_with_the_import_workload() {
    let path = fixtures().join("mixtral-8x7b.json");
    let m = resolve_model(path.to_str().unwrap()).unwrap();
    assert_eq!(m.name, "mixtral-8x7b");
    assert_eq!(m.training, Training::IMPORT_DEFAULT);
}

/// `json` imported as `file`, with the import workload.
fn imported(file: &str, json: &str) -> Result<ModelSpec, String> {
    ModelSpec::from_hf_config(&Source::new(file, json), Training::IMPORT_DEFAULT)
        .map_err(|e| e.to_string())
}

fn import(json: &str) -> String {
    imported("config.json", json).unwrap_err()
}

#[test]
fn hf_errors_name_the_config_key() {
    let base = std::fs::read_to_string(fixtures().join("mixtral-8x7b.json")).unwrap();
    let e = import(&base.replace("\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9"));
    assert!(
        e.contains("config.json:")
            && e.contains("num_experts_per_tok = 9: exceeds num_local_experts = 8"),
        "{e}"
    );
    let e = import(&base.replace("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5"));
    assert!(
        e.contains("num_key_value_heads = 5: does not divide num_attention_heads = 32"),
        "{e}"
    );
    let e = import(&base.replace("\"hidden_size\": 4096,", ""));
    assert!(
        e.contains("hidden_size = (missing): required for model_type = \"mixtral\""),
        "{e}"
    );
    let e = import(&base.replace("\"model_type\": \"mixtral\"", "\"model_type\": \"bert\""));
    assert!(e.contains("model_type = \"bert\": not supported"), "{e}");
    let e = import(&base.replace("\"vocab_size\": 32000", "\"vocab_size\": -1"));
    assert!(
        e.contains("vocab_size = -1: must be a non-negative integer"),
        "{e}"
    );
    let e = import("{\"model_type\": ");
    assert!(e.starts_with("config.json:1:"), "{e}");
}

#[test]
fn qwen2_moe_with_a_shared_expert() {
    // Qwen/Qwen1.5-MoE-A2.7B config.json (model_type qwen2_moe); model card: 14.3B parameters,
    // 2.7B activated. Its q/k/v biases (24 × 4096 weights) are not modelled.
    let json = r#"{
      "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe",
      "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16,
      "num_key_value_heads": 16, "intermediate_size": 5632, "moe_intermediate_size": 1408,
      "shared_expert_intermediate_size": 5632, "num_experts": 60, "num_experts_per_tok": 4,
      "decoder_sparse_step": 1, "vocab_size": 151936, "tie_word_embeddings": false,
      "max_position_embeddings": 8192, "rope_theta": 1000000.0, "norm_topk_prob": false
    }"#;
    let m = imported("Qwen1.5-MoE-A2.7B/config.json", json).unwrap();
    assert_eq!(m.name, "Qwen1.5-MoE-A2.7B");
    let moe = m.moe.as_ref().unwrap();
    assert_eq!((moe.shared_experts, moe.shared_ffn_hidden), (1, 5632));
    assert_eq!(m.dense_blocks(), 0);
    assert!(
        (m.total_params() / 1e9 - 14.3).abs() < 0.05,
        "{}",
        m.total_params()
    );
    assert!(
        (m.active_params() / 1e9 - 2.7).abs() < 0.05,
        "{}",
        m.active_params()
    );
}

#[test]
fn sliding_windows_from_config_json() {
    let base = std::fs::read_to_string(fixtures().join("gpt-oss-120b.json")).unwrap();
    // A layer out of the one-full-in-N pattern.
    let e = import(&base.replacen("\"full_attention\"", "\"sliding_attention\"", 1));
    assert!(
        e.contains("layer_types")
            && e.contains("entry 5 breaks the pattern of one full_attention layer every 4"),
        "{e}"
    );
    let e = import(&base.replacen("\"full_attention\"", "\"chunked_attention\"", 1));
    assert!(e.contains("entry 1 is \"chunked_attention\""), "{e}");
    let e = import(&base.replace("\"num_hidden_layers\": 36", "\"num_hidden_layers\": 35"));
    assert!(
        e.contains("has 36 entries for num_hidden_layers = 35"),
        "{e}"
    );
    let e = import(&base.replace("\"sliding_window\": 128", "\"sliding_window\": 0"));
    assert!(e.contains("sliding_window = 0: must be positive"), "{e}");
    // No layer_types: every layer windowed (Mistral 7B v0.1 style).
    let all = base.replace("\"layer_types\"", "\"unused_layer_types\"");
    let m = imported("config.json", &all).unwrap();
    assert_eq!(m.windowed_blocks(), 36);
    // Mistral: sliding_window windows every layer; null means none.
    let mistral = r#"{"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
      "vocab_size": 32000, "sliding_window": 4096}"#;
    let m = imported("config.json", mistral).unwrap();
    assert_eq!(
        m.window,
        Some(autoplan_graph::SlidingWindow {
            tokens: 4096,
            full_every: 0
        })
    );
    let none = mistral.replace("4096}", "null}");
    let m = imported("config.json", &none).unwrap();
    assert_eq!(m.window, None);
    // Qwen's windows above max_window_layers are refused, not ignored.
    let qwen = std::fs::read_to_string(fixtures().join("qwen3-30b-a3b.json")).unwrap();
    let e = import(&qwen.replace(
        "\"use_sliding_window\": false",
        "\"use_sliding_window\": true",
    ));
    assert!(
        e.contains("use_sliding_window = true: Qwen's windows"),
        "{e}"
    );
}
