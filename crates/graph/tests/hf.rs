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
    assert_eq!(n, 9, "one fixture per HF-importable bundled model");
}

#[test]
fn resolve_model_reads_a_config_json_path_with_the_import_workload() {
    let path = fixtures().join("mixtral-8x7b.json");
    let m = resolve_model(path.to_str().unwrap()).unwrap();
    assert_eq!(m.name, "mixtral-8x7b");
    assert_eq!(m.training, Training::IMPORT_DEFAULT);
}

fn import(json: &str) -> String {
    ModelSpec::from_hf_config(&Source::new("config.json", json), Training::IMPORT_DEFAULT)
        .unwrap_err()
        .to_string()
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
