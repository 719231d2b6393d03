//! `autoplan show --model` and `autoplan models` end to end (issue 2's done criterion).

mod common;

/// `common::autoplan` with success as a flag.
fn autoplan(args: &[&str]) -> (bool, String, String) {
    let (code, out, err) = common::autoplan(args);
    (code == Some(0), out, err)
}

#[test]
fn show_deepseek_v3_json_reports_671b_total() {
    let (ok, out, err) = autoplan(&["show", "--model", "deepseek-v3", "--format", "json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // DeepSeek-V3 report §1: 671B total, 37B activated (DeepSeek's count excludes the
    // embedding table; `active_params` includes it, see docs/decisions.md).
    let total = v["total_params"].as_f64().unwrap();
    assert!((total / 671e9 - 1.0).abs() < 0.005, "{total}");
    let active = v["active_params_excluding_embedding"].as_f64().unwrap();
    assert!((active / 1e9).round() == 37.0, "{active}");
    assert!(v["active_params"].as_f64().unwrap() > active);
}

#[test]
fn show_table_and_paths_resolve() {
    let (ok, out, err) = autoplan(&["show", "--model", "models/mixtral-8x7b.toml"]);
    assert!(ok, "{err}");
    assert!(out.contains("46.70B") && out.contains("12.88B"), "{out}");
    let (ok, out, err) = autoplan(&["show", "--model", "tests/fixtures/hf/llama3-8b.json"]);
    assert!(ok, "{err}");
    assert!(out.contains("8.03B"), "{out}");
}

#[test]
fn models_lists_every_bundled_model() {
    let (ok, out, err) = autoplan(&["models"]);
    assert!(ok, "{err}");
    for name in ["deepseek-v3", "llama3.1-405b", "qwen3-235b-a22b", "gpt-1t"] {
        assert!(
            out.lines().any(|l| l.starts_with(name)),
            "{name} missing:\n{out}"
        );
    }
}

#[test]
fn a_bad_model_is_a_clear_error_not_a_panic() {
    let (ok, _, err) = autoplan(&["show", "--model", "no-such-model"]);
    assert!(!ok);
    assert!(err.contains("unknown model `no-such-model`"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
