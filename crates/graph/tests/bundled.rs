//! Every bundled model against its published parameter count (source cited per row).
//!
//! A published figure is met when our count is within 0.5% of it, or, for a figure published
//! rounded (e.g. "1.7B", "37B"), when our count rounds to it: |ours − published| ≤ unit/2.
//! Rounded figures can be several percent from the exact count (Narayanan's "1.7B" GPT has
//! 1.652B parameters by the paper's own formula), so 0.5% alone would reject correct models.

use autoplan_graph::{bundled_models, resolve_model, ModelSpec};

const B: f64 = 1e9;

/// A published active count (billions) and the unit of its last digit.
type Active = Option<(f64, f64)>;

/// (model, published total (billions), unit of its last digit, active if MoE, source)
const PUBLISHED: &[(&str, f64, f64, Active, &str)] = &[
    ("gpt-1.7b", 1.7, 0.1, None, "Narayanan+21 Table 1"),
    ("gpt-3.6b", 3.6, 0.1, None, "Narayanan+21 Table 1"),
    ("gpt-7.5b", 7.5, 0.1, None, "Narayanan+21 Table 1"),
    ("gpt-18b", 18.4, 0.1, None, "Narayanan+21 Table 1"),
    ("gpt-39b", 39.1, 0.1, None, "Narayanan+21 Table 1"),
    ("gpt-76b", 76.1, 0.1, None, "Narayanan+21 Table 1"),
    ("gpt-145b", 145.6, 0.1, None, "Narayanan+21 Table 1"),
    ("gpt-310b", 310.1, 0.1, None, "Narayanan+21 Table 1"),
    ("gpt-530b", 529.6, 0.1, None, "Narayanan+21 Table 1"),
    ("gpt-1t", 1008.0, 0.1, None, "Narayanan+21 Table 1"),
    ("gpt-22b", 22.0, 1.0, None, "Korthikanti+22 Table 3"),
    (
        "gpt2-1b",
        1.16,
        0.01,
        None,
        "Megatron-LM README 2020 tables.tex",
    ),
    (
        "gpt2-2b",
        2.03,
        0.01,
        None,
        "Megatron-LM README 2020 tables.tex",
    ),
    (
        "gpt2-4b",
        4.24,
        0.01,
        None,
        "Megatron-LM README 2020 tables.tex",
    ),
    (
        "gpt2-8b",
        8.67,
        0.01,
        None,
        "Megatron-LM README 2020 tables.tex",
    ),
    ("gpt3-175b", 175.0, 0.1, None, "Brown+20 Table 2.1 (175.0B)"),
    (
        "llama2-7b",
        6.74,
        0.01,
        None,
        "HF meta-llama/Llama-2-7b-hf (6.74B)",
    ),
    (
        "llama2-13b",
        13.0,
        0.1,
        None,
        "HF meta-llama/Llama-2-13b-hf (13.0B)",
    ),
    (
        "llama2-70b",
        69.0,
        0.1,
        None,
        "HF meta-llama/Llama-2-70b-hf (69.0B)",
    ),
    (
        "llama3-8b",
        8.03,
        0.01,
        None,
        "HF meta-llama/Meta-Llama-3-8B (8.03B)",
    ),
    (
        "llama3-70b",
        70.6,
        0.1,
        None,
        "HF meta-llama/Meta-Llama-3-70B (70.6B)",
    ),
    ("llama3.1-405b", 405.0, 1.0, None, "Dubey+24 (405B)"),
    (
        "mixtral-8x7b",
        46.7,
        0.1,
        Some((12.9, 0.1)),
        "Mistral AI, Dec 2023: 46.7B / 12.9B",
    ),
    (
        "mixtral-8x22b",
        141.0,
        1.0,
        Some((39.0, 1.0)),
        "Mistral AI, Apr 2024: 141B / 39B",
    ),
    // DeepSeek counts activated parameters without the embedding table (checked below).
    (
        "deepseek-v2",
        236.0,
        1.0,
        Some((21.0, 1.0)),
        "DeepSeek-V2 §1: 236B / 21B",
    ),
    (
        "deepseek-v3",
        671.0,
        1.0,
        Some((37.0, 1.0)),
        "DeepSeek-V3 §1: 671B / 37B",
    ),
    (
        "qwen3-235b-a22b",
        235.0,
        1.0,
        Some((22.0, 1.0)),
        "Qwen3 report Table 2: 235B / 22B",
    ),
    // Nemotron-4 340B report §2.2: 9.4B embedding + 331.6B non-embedding parameters.
    (
        "nemotron-340b",
        341.0,
        0.1,
        None,
        "Nemotron-4 340B report (arXiv:2406.11704) §2.2: 9.4B + 331.6B",
    ),
    // The gpt-oss card counts active parameters with the unembedding, without the embedding.
    (
        "gpt-oss-120b",
        116.83,
        0.01,
        Some((5.13, 0.01)),
        "gpt-oss model card (arXiv:2508.10925) Table 1: 116.83B / 5.13B",
    ),
    // Qwen's card truncates: 3.353B activated is published as "3.3B" (see `meets`).
    (
        "qwen3-30b-a3b",
        30.5,
        0.1,
        Some((3.3, 0.1)),
        "Qwen3 model card: 30.5B / 3.3B",
    ),
];

fn meets(ours: f64, published: f64, unit: f64) -> bool {
    let d = (ours - published * B).abs();
    d <= 0.005 * published * B || d <= unit * B / 2.0
}

/// Qwen3 model cards truncate to the published digit (30.53B → "30.5B", 3.353B → "3.3B").
fn meets_truncated(ours: f64, published: f64, unit: f64) -> bool {
    ours >= published * B && ours < (published + unit) * B
}

fn active(m: &ModelSpec) -> f64 {
    if m.name.starts_with("deepseek") || m.name.starts_with("gpt-oss") {
        m.active_params_excluding_embedding()
    } else {
        m.active_params()
    }
}

#[test]
fn every_bundled_model_matches_its_published_parameter_count() {
    let mut failures = Vec::new();
    for (name, total, unit, act, source) in PUBLISHED {
        let m = resolve_model(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&m.name, name);
        if !meets(m.total_params(), *total, *unit) {
            failures.push(format!(
                "{name}: total {:.3}B vs {total}B ({source})",
                m.total_params() / B
            ));
        }
        match (act, &m.moe) {
            (Some((a, u)), Some(_)) => {
                let ok = if name.starts_with("qwen3-30b") {
                    meets_truncated(active(&m), *a, *u)
                } else {
                    meets(active(&m), *a, *u)
                };
                if !ok {
                    failures.push(format!(
                        "{name}: active {:.3}B vs {a}B ({source})",
                        active(&m) / B
                    ));
                }
            }
            (None, None) => assert_eq!(m.active_params(), m.total_params(), "{name}"),
            _ => failures.push(format!("{name}: MoE-ness disagrees with the table")),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Models known by a nominal size only ("5B"), no published parameter count: NeMo 24.07's
/// GPT3-5B/20B and Nemotron-8B/22B. Their architecture is checked instead by their FLOPs per
/// token against the NeMo rows' TFLOP/s ÷ tokens/s
/// (`crates/evaluate/tests/published.rs::nemo_model_flops_per_token_match_the_rows`).
const NOMINAL: &[&str] = &["gpt3-5b", "gpt3-20b", "nemotron-8b", "nemotron-22b"];

/// The models of the other families (issue 16) and the later MoE models, against their
/// published counts within 1% (their sources publish counts rounded to two or three digits:
/// MPT-7B's "6.7B" is 6.65B by its config). (model, total, active if published, source)
const FAMILIES: &[(&str, f64, Option<f64>, &str)] = &[
    (
        "bloom-176b",
        176.247,
        None,
        "HF bigscience/bloom: 176,247,271,424",
    ),
    ("opt-175b", 175.0, None, "Zhang+22 Table 1: 175B"),
    ("mt-nlg-530b", 530.0, None, "Smith+22: 530B"),
    (
        "gpt-neox-20b",
        20.555,
        None,
        "HF EleutherAI/gpt-neox-20b: 20,554,567,680",
    ),
    ("mpt-7b", 6.7, None, "HF mosaicml/mpt-7b model card: 6.7B"),
    ("mpt-30b", 30.0, None, "HF mosaicml/mpt-30b model card: 30B"),
    (
        "mpt-70b",
        64.86,
        None,
        "published_runs_2.csv mpt_70b_* params_b (llm-foundry)",
    ),
    (
        "nemotron-4-15b",
        15.7,
        None,
        "Parmar+24 §2: 3.2B embedding + 12.5B non-embedding",
    ),
    // Grok-1's README gives the total only.
    ("grok-1", 314.0, None, "xai-org/grok-1 README: 314B"),
    // Activated: 2.45B under V2/V3's convention (embedding excluded) against the published
    // "2.4B" (2% off: a truncation, or a convention we cannot pin), so the total only.
    ("deepseek-v2-lite", 15.7, None, "DeepSeek-V2 App. B: 15.7B"),
    (
        "gpt-oss-20b",
        20.91,
        Some(3.61),
        "gpt-oss model card Table 1: 20.91B / 3.61B",
    ),
];

#[test]
fn the_other_families_and_new_moe_models_match_their_published_counts() {
    let within = |ours: f64, published: f64| (ours / (published * B) - 1.0).abs() <= 0.01;
    let mut failures = Vec::new();
    for (name, total, act, source) in FAMILIES {
        let m = resolve_model(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&m.name, name);
        if !within(m.total_params(), *total) {
            failures.push(format!(
                "{name}: total {:.3}B vs {total}B ({source})",
                m.total_params() / B
            ));
        }
        if let Some(a) = act {
            if !within(active(&m), *a) {
                failures.push(format!(
                    "{name}: active {:.3}B vs {a}B ({source})",
                    active(&m) / B
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Seed 004's Transformer-XL MoE models (the thesis's "#Params", rounded to 1M): (model,
/// published total in millions, where). Transformer-XL's relative-position projection `r_net`
/// (hidden² per layer, Dai et al. 2019 §3.3) has no autoplan family, so the bundled files
/// count it out (`positions = "rope"` stands in); with it added back every count is within 2%
/// of the thesis's figure, without it 1.4–6.3% below.
const THESIS: &[(&str, f64, &str)] = &[
    ("thesis-txl-45m", 45.0, "seed 004 Table 5-1"),
    ("thesis-txl-94m", 94.0, "seed 004 Tables 5-2, 5-4"),
    ("thesis-txl-145m", 145.0, "seed 004 Table 5-3"),
    ("thesis-txl-8l-4e", 94.0, "seed 004 Table 2-1"),
    ("thesis-txl-12l-4e", 117.0, "seed 004 Table 2-1"),
    ("thesis-txl-24l-4e", 233.0, "seed 004 Table 2-1"),
];

#[test]
fn thesis_models_match_the_thesis_counts_with_r_net() {
    for (name, total, source) in THESIS {
        let m = resolve_model(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let r_net = m.layers as f64 * (m.hidden as f64).powi(2);
        let with = m.total_params() + r_net;
        let err = with / (total * 1e6) - 1.0;
        assert!(err.abs() <= 0.02, "{name}: {with} vs {total}M ({source})");
        // Without r_net the count is below the thesis's: the missing block, not a wrong shape.
        assert!(m.total_params() < total * 1e6, "{name}");
    }
}

#[test]
fn published_architectures_beyond_the_count() {
    // BLOOM and GPT-NeoX to the parameter (HF's counts), which pins the embedding norm, ALiBi
    // (no table), tied vs untied, and the parallel block's two LayerNorms.
    let bloom = resolve_model("bloom-176b").unwrap();
    assert_eq!(bloom.total_params(), 176_247_271_424.0);
    assert!(bloom.embedding_norm && !bloom.parallel_block);
    let neox = resolve_model("gpt-neox-20b").unwrap();
    assert_eq!(neox.total_params(), 20_554_567_680.0);
    assert!(neox.parallel_block);
    // Nemotron-4 15B: §2's 12.5B non-embedding parameters (its "3.2B" embedding parameters
    // are 2 × 256000 × 6144 = 3.15B, untied input and output).
    let n = resolve_model("nemotron-4-15b").unwrap();
    let emb = n.embedding_params() + n.lm_head_params();
    assert_eq!(emb, 2.0 * 256_000.0 * 6144.0);
    assert!(((n.total_params() - emb) / B - 12.5).abs() < 0.05);
}

#[test]
fn the_table_covers_every_bundled_model() {
    for (name, _) in bundled_models() {
        let entries = PUBLISHED.iter().filter(|p| p.0 == *name).count()
            + FAMILIES.iter().filter(|p| p.0 == *name).count()
            + THESIS.iter().filter(|p| p.0 == *name).count()
            + usize::from(NOMINAL.contains(name));
        assert_eq!(
            entries, 1,
            "{name} needs exactly one of a published figure or a nominal-size entry"
        );
    }
    assert_eq!(
        bundled_models().len(),
        PUBLISHED.len() + FAMILIES.len() + THESIS.len() + NOMINAL.len()
    );
}

#[test]
fn deepseek_activated_counts_exclude_the_embedding() {
    // Only this convention rounds to both published figures: with the embedding table
    // DeepSeek-V3 has 37.55B (→ "38B"), without 36.63B (→ "37B"); V2 21.38B / 20.85B (both "21B").
    let v3 = resolve_model("deepseek-v3").unwrap();
    assert!((v3.active_params() / B).round() == 38.0);
    assert!((v3.active_params_excluding_embedding() / B).round() == 37.0);
    // Main model 671B; the MTP module adds 11.6B of its own (the 14B of the released checkpoint
    // also stores copies of the shared embedding and head, 2 × 0.93B).
    assert!(
        (v3.mtp_params() / B - 11.61).abs() < 0.01,
        "{}",
        v3.mtp_params()
    );
}

#[test]
fn narayanan_flops_formula_holds_for_the_gpt_table() {
    // Narayanan+21 eq. 3, one forward pass per token (see layers.rs for the derivation), with
    // causal attention: 24·l·h²·(1 + s/(12h)) + 2·h·V.
    for name in ["gpt-1.7b", "gpt-39b", "gpt-1t", "gpt3-175b"] {
        let m = resolve_model(name).unwrap();
        let (l, h, s, v) = (
            m.layers as f64,
            m.hidden as f64,
            m.training.seq_len as f64,
            m.vocab as f64,
        );
        let want = 24.0 * l * h * h * (1.0 + s / (12.0 * h)) + 2.0 * h * v;
        assert!((m.flops_per_token() / want - 1.0).abs() < 1e-12, "{name}");
    }
}

#[test]
fn bundled_files_are_named_after_their_model() {
    for (name, text) in bundled_models() {
        assert!(text.contains(&format!("name = \"{name}\"")), "{name}");
        assert!(
            text.starts_with('#'),
            "{name}: cite the source in a leading comment"
        );
    }
}

#[test]
fn moe_flops_match_megatron_model_flops_of_published_runs() {
    // published_runs.csv reports model TFLOP/s per GPU and tokens/s per GPU for the same runs;
    // their ratio is Megatron's training FLOPs per token (3 × forward, no recompute):
    // mzoo_h100_Qwen3_235B_a22B_xnode_ep32: 245 TFLOP/s / 1663.4 tok/s (seq 4096);
    // bridge2511_h100_Qwen3_30B_a3B_16gpu_fp8: 121 TFLOP/s / 5275 tok/s (seq 4096).
    // The TFLOP/s are rounded to 3 digits, so agreement within 1% is the most they support.
    for (name, tflops, tokens) in [
        ("qwen3-235b-a22b", 245e12, 1663.4),
        ("qwen3-30b-a3b", 121e12, 5275.0),
    ] {
        let m = resolve_model(name).unwrap();
        assert_eq!(m.training.seq_len, 4096);
        let published = tflops / tokens;
        let ours = 3.0 * m.flops_per_token();
        assert!(
            (ours / published - 1.0).abs() < 0.01,
            "{name}: {ours:e} vs {published:e}"
        );
    }
}
