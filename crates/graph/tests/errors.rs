//! Each kind of bad model input gives its clear error (file, line, field, value, reason), and
//! random mutations of every bundled file never panic the parser.

use autoplan_graph::{bundled_model_text, bundled_models, resolve_model, ModelSpec};
use autoplan_input::Source;
use proptest::prelude::*;

/// Parse `name`'s bundled text after replacing `from` by `to`; the error message.
fn err(name: &str, from: &str, to: &str) -> String {
    let text = bundled_model_text(name).unwrap();
    assert!(text.contains(from), "{name} has no `{from}`");
    let src = Source::new(format!("{name}.toml"), text.replacen(from, to, 1));
    match ModelSpec::from_toml(&src) {
        Ok(_) => panic!("{name}: `{from}` → `{to}` was accepted"),
        Err(e) => e.to_string(),
    }
}

fn line_of(name: &str, from: &str) -> usize {
    let text = bundled_model_text(name).unwrap();
    text[..text.find(from).unwrap()].matches('\n').count() + 1
}

#[track_caller]
fn expect(e: &str, parts: &[&str]) {
    for p in parts {
        assert!(e.contains(p), "`{e}` lacks `{p}`");
    }
}

#[test]
fn malformed_toml_gives_file_line_and_column() {
    let e = err("llama3-8b", "hidden = 4096", "hidden = = 4096");
    let line = line_of("llama3-8b", "hidden = 4096");
    assert!(e.starts_with(&format!("llama3-8b.toml:{line}:")), "{e}");
}

#[test]
fn unknown_field_names_it_and_the_allowed_ones() {
    let e = err("llama3-8b", "vocab = 128256", "vocab_size = 128256");
    expect(&e, &["llama3-8b.toml:", "vocab_size", "`vocab`"]);
}

#[test]
fn missing_required_field_is_named() {
    let e = err("llama3-8b", "vocab = 128256\n", "");
    expect(&e, &["llama3-8b.toml", "missing field `vocab`"]);
    let e = err("llama3-8b", "kv_heads = 8\n", "");
    expect(
        &e,
        &["attention.kv_heads = (missing): required with kind = \"gqa\""],
    );
    let e = err("llama3-8b", "ffn_hidden = 14336\n", "");
    expect(
        &e,
        &["model.ffn_hidden = (missing): required: 32 blocks have a dense MLP"],
    );
}

#[test]
fn hidden_not_divisible_by_heads() {
    let e = err("llama3-8b", "hidden = 4096", "hidden = 4097");
    let line = line_of("llama3-8b", "hidden = 4096");
    assert_eq!(
        e,
        format!("llama3-8b.toml:{line}:1: model.hidden = 4097: not divisible by model.heads = 32")
    );
}

#[test]
fn kv_heads_not_dividing_heads() {
    let e = err("llama3-70b", "kv_heads = 8", "kv_heads = 12");
    expect(
        &e,
        &["attention.kv_heads = 12: does not divide model.heads = 64"],
    );
    let e = err("llama3-70b", "kv_heads = 8", "kv_heads = 128");
    expect(
        &e,
        &["attention.kv_heads = 128: does not divide model.heads = 64"],
    );
}

#[test]
fn top_k_above_experts() {
    let e = err("mixtral-8x7b", "top_k = 2", "top_k = 9");
    let line = line_of("mixtral-8x7b", "top_k = 2");
    expect(
        &e,
        &[&format!(
            "mixtral-8x7b.toml:{line}:1: moe.top_k = 9: exceeds moe.experts = 8"
        )],
    );
}

#[test]
fn zero_and_negative_sizes() {
    let e = err("deepseek-v3", "layers = 61", "layers = 0");
    expect(&e, &["model.layers = 0: must be positive"]);
    let e = err("deepseek-v3", "kv_lora_rank = 512", "kv_lora_rank = 0");
    expect(&e, &["attention.kv_lora_rank = 0: must be positive"]);
    let e = err(
        "deepseek-v3",
        "expert_ffn_hidden = 2048",
        "expert_ffn_hidden = -2048",
    );
    expect(&e, &["deepseek-v3.toml:", "-2048"]);
    let e = err("gpt3-175b", "seq_len = 2048", "seq_len = 0");
    expect(&e, &["training.seq_len = 0: must be positive"]);
    let e = err("llama3-8b", "hidden = 4096", "hidden = 99999999999");
    expect(
        &e,
        &["model.hidden = 99999999999: too large (at most 16777216)"],
    );
}

#[test]
fn the_largest_accepted_dimensions_do_not_overflow() {
    // Every dimension at the cap: the accounting must stay finite (no u64 overflow panic).
    let text = bundled_model_text("deepseek-v3").unwrap();
    let mut t = String::new();
    for line in text.lines() {
        let key = line.split(" = ").next().unwrap_or("");
        let big = [
            "hidden",
            "heads",
            "ffn_hidden",
            "vocab",
            "q_lora_rank",
            "kv_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
            "experts",
            "top_k",
            "expert_ffn_hidden",
            "shared_ffn_hidden",
        ];
        if big.contains(&key) {
            t.push_str(&format!("{key} = 16777216\n"));
        } else if key == "group_top_k" {
            // top_k = experts: every group must be open to a token.
            t.push_str("group_top_k = 8\n");
        } else {
            t.push_str(line);
            t.push('\n');
        }
    }
    let m = ModelSpec::from_toml(&Source::new("big.toml", t)).unwrap();
    assert!(m.total_params().is_finite() && m.flops_per_token().is_finite());
}

#[test]
fn impossible_combinations() {
    let e = err("gpt3-175b", "seq_len = 2048", "seq_len = 4096");
    expect(
        &e,
        &["training.seq_len = 4096: exceeds model.max_positions = 2048"],
    );
    let e = err("gpt3-175b", "max_positions = 2048\n", "");
    expect(
        &e,
        &["model.max_positions = (missing): required with positions = \"learned\""],
    );
    let e = err(
        "llama3-8b",
        "vocab = 128256",
        "vocab = 128256\nmax_positions = 8192",
    );
    expect(
        &e,
        &["model.max_positions = 8192: not allowed with positions = \"rope\""],
    );
    let e = err(
        "llama3-8b",
        "kv_heads = 8",
        "kv_heads = 8\nkv_lora_rank = 512",
    );
    expect(
        &e,
        &["attention.kv_lora_rank = 512: not allowed with kind = \"gqa\""],
    );
    let e = err(
        "deepseek-v3",
        "first_dense_layers = 3",
        "first_dense_layers = 61",
    );
    expect(
        &e,
        &["moe.first_dense_layers = 61: leaves no MoE block among model.layers = 61"],
    );
    let e = err("deepseek-v3", "shared_ffn_hidden = 2048\n", "");
    expect(
        &e,
        &["moe.shared_ffn_hidden = (missing): required with moe.shared_experts = 1"],
    );
    let e = err(
        "mixtral-8x7b",
        "load_imbalance = 1.0",
        "load_imbalance = 0.5",
    );
    expect(
        &e,
        &["moe.load_imbalance = 0.5: must be a finite number ≥ 1"],
    );
    let e = err(
        "mixtral-8x7b",
        "top_k = 2",
        "top_k = 2\ncapacity_factor = nan",
    );
    expect(
        &e,
        &["moe.capacity_factor = NaN: must be a positive number"],
    );
    let e = err(
        "mixtral-8x7b",
        "top_k = 2",
        "top_k = 1\nrouting = \"dynamic-top1-top2\"",
    );
    expect(
        &e,
        &["moe.top_k = 1: must be 2 with routing = \"dynamic-top1-top2\""],
    );
    let e = err(
        "mixtral-8x7b",
        "top_k = 2",
        "top_k = 2\nrouting = \"dynamic-top1-top2\"\nthreshold = 1.5\ntwo_expert_fraction = 0.3",
    );
    expect(&e, &["moe.threshold = 1.5: must lie in (0, 1)"]);
    let e = err("mixtral-8x7b", "top_k = 2", "top_k = 2\nthreshold = 0.1");
    expect(
        &e,
        &["moe.threshold = 0.1: not allowed with routing = \"top-k\""],
    );
    let e = err("mixtral-8x7b", "[moe]", "[not-moe]");
    expect(&e, &["not-moe"]);
    let text = bundled_model_text("mixtral-8x7b").unwrap();
    let cut = &text[..text.find("[moe]").unwrap()];
    let rest = &text[text.find("[training]").unwrap()..];
    let e = ModelSpec::from_toml(&Source::new("m.toml", format!("{cut}{rest}")))
        .unwrap_err()
        .to_string();
    expect(
        &e,
        &["model.family = mixtral: is a MoE family: a [moe] section is required"],
    );
}

#[test]
fn bad_enums_list_the_allowed_values() {
    let e = err("llama3-8b", "mlp = \"swiglu\"", "mlp = \"tanh\"");
    expect(&e, &["tanh", "gelu", "relu", "swiglu", "geglu"]);
    // A bad family lists the known ones, the issue-16 families among them.
    let e = err("llama3-8b", "family = \"llama\"", "family = \"bert\"");
    expect(
        &e,
        &[
            "bert", "gpt", "bloom", "opt", "mt-nlg", "gpt-neox", "mpt", "glm", "llama",
        ],
    );
    let e = err("llama3-8b", "positions = \"rope\"", "positions = \"nope\"");
    expect(&e, &["nope", "rope", "alibi", "learned"]);
    let e = err("llama3-8b", "precision = \"bf16\"", "precision = \"fp32\"");
    expect(
        &e,
        &[
            "training.precision = fp32: training precision must be bf16, fp16, fp8",
            "fp8-current",
            "fp8-block",
            "mxfp8 or nvfp4",
        ],
    );
    // A GPU peak format is not a training precision.
    let e = err("llama3-8b", "precision = \"bf16\"", "precision = \"fp4\"");
    expect(
        &e,
        &["training.precision = fp4: training precision must be"],
    );
    let e = err("llama3-8b", "kind = \"gqa\"", "kind = \"mqa\"");
    expect(&e, &["mqa", "gqa", "mla"]);
}

#[test]
fn unknown_model_lists_the_bundled_ones() {
    let e = resolve_model("llama-9b").unwrap_err().to_string();
    expect(
        &e,
        &["unknown model `llama-9b`", "llama3-8b", "deepseek-v3"],
    );
}

/// One random edit of a line-oriented text.
#[derive(Debug, Clone)]
enum Mutation {
    DeleteLine(usize),
    ChangeNumber(usize, i64),
    InsertGarbage(usize, String),
    DuplicateLine(usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::DeleteLine),
        (
            any::<usize>(),
            prop_oneof![
                Just(0i64),
                Just(-1),
                Just(1),
                Just(1 << 24),
                Just(u32::MAX as i64),
                Just(i64::MAX),
                -100_000i64..100_000
            ]
        )
            .prop_map(|(i, n)| Mutation::ChangeNumber(i, n)),
        (any::<usize>(), "[ -~]{0,12}").prop_map(|(i, g)| Mutation::InsertGarbage(i, g)),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        return text.to_string();
    }
    let n = lines.len();
    match m {
        Mutation::DeleteLine(i) => {
            lines.remove(i % lines.len());
        }
        Mutation::ChangeNumber(i, v) => {
            // The i-th line holding a number, its value replaced.
            let numbered: Vec<usize> = (0..lines.len())
                .filter(|&k| {
                    lines[k].contains(" = ") && lines[k].bytes().any(|b| b.is_ascii_digit())
                })
                .collect();
            if let Some(&k) = numbered.get(i % numbered.len().max(1)) {
                let key = lines[k].split(" = ").next().unwrap_or("").to_string();
                lines[k] = format!("{key} = {v}");
            }
        }
        Mutation::InsertGarbage(i, g) => lines.insert(i % n, g.clone()),
        Mutation::DuplicateLine(i) => {
            let l = lines[i % lines.len()].clone();
            lines.insert(i % lines.len(), l);
        }
        Mutation::Truncate(i) => {
            let cut = i % text.len().max(1);
            let cut = (0..=cut)
                .rev()
                .find(|&c| text.is_char_boundary(c))
                .unwrap_or(0);
            return text[..cut].to_string();
        }
    }
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn mutated_bundled_files_never_panic(
        which in 0..bundled_models().len(),
        edits in proptest::collection::vec(mutation(), 1..4),
    ) {
        let (name, text) = bundled_models()[which];
        let mut t = text.to_string();
        for e in &edits {
            t = apply(&t, e);
        }
        // Either a validated model (whose accounting must then be finite) or an error that names
        // the file.
        match ModelSpec::from_toml(&Source::new(format!("{name}.toml"), t)) {
            Ok(m) => {
                prop_assert!(m.total_params().is_finite() && m.total_params() > 0.0);
                prop_assert!(m.active_params() <= m.total_params());
                prop_assert!(m.flops_per_token().is_finite());
            }
            Err(e) => {
                let file = format!("{name}.toml");
                prop_assert!(e.to_string().starts_with(&file), "{}", e);
            }
        }
    }
}

#[test]
fn sliding_window_fields_are_checked() {
    let m = "gpt-oss-120b";
    let line = line_of(m, "full_attention_every = 2");
    let e = err(m, "full_attention_every = 2", "full_attention_every = 1");
    expect(
        &e,
        &[
            &format!("gpt-oss-120b.toml:{line}:"),
            "attention.full_attention_every = 1: must be at least 2",
        ],
    );
    let e = err(m, "full_attention_every = 2", "full_attention_every = 37");
    expect(
        &e,
        &["full_attention_every = 37: exceeds model.layers = 36"],
    );
    let e = err(m, "sliding_window = 128", "sliding_window = 0");
    expect(&e, &["attention.sliding_window = 0: must be positive"]);
    let e = err(m, "sliding_window = 128\n", "");
    expect(
        &e,
        &["attention.full_attention_every = 2: not allowed without attention.sliding_window"],
    );
    let line = line_of(m, "sliding_window = 128");
    let e = err(m, "sliding_window = 128", "sliding_window = -1");
    expect(&e, &[&format!("gpt-oss-120b.toml:{line}:18:"), "-1"]);
}

/// Issue 21: every numeric field has a stated range; out of it, the error names it.
#[test]
fn workload_and_moe_numbers_have_ranges() {
    let e = err("llama3-8b", "seq_len = 8192", "seq_len = 16777217");
    expect(
        &e,
        &["training.seq_len = 16777217: too large: expected [1, 16777216]"],
    );
    let e = err("mixtral-8x7b", "load_imbalance = 1.0", "load_imbalance = 9");
    expect(&e, &["moe.load_imbalance = 9: too large", "[1, 8]"]);
    let e = err(
        "mixtral-8x7b",
        "top_k = 2",
        "top_k = 2\ncapacity_factor = 1e300",
    );
    expect(&e, &["moe.capacity_factor = 1e300", "(0, 1024]"]);
    let m = resolve_model("llama3-8b").unwrap();
    let mut t = m.training.clone();
    t.global_batch = u32::MAX;
    let e = m.with_training(t).unwrap_err().to_string();
    expect(&e, &["training.global_batch = 4294967295: too large"]);
}

#[test]
fn routing_groups_are_checked() {
    // DeepSeek-V3: 256 experts in 8 groups, a token's experts from 4 of them.
    let m = resolve_model("deepseek-v3").unwrap();
    let moe = m.moe.unwrap();
    assert_eq!((moe.groups, moe.group_top_k), (8, 4));
    let line = line_of("deepseek-v3", "groups = 8");
    let e = err("deepseek-v3", "groups = 8", "groups = 7");
    expect(
        &e,
        &[
            &format!("deepseek-v3.toml:{line}:"),
            "moe.groups = 7: must divide moe.experts = 256",
        ],
    );
    let e = err("deepseek-v3", "group_top_k = 4", "group_top_k = 9");
    expect(&e, &["moe.group_top_k = 9: exceeds moe.groups = 8"]);
    // Two groups of 2 experts cannot hold a top-8 (256 experts in 128 groups of 2).
    let e = err(
        "deepseek-v3",
        "groups = 8\ngroup_top_k = 4",
        "groups = 128\ngroup_top_k = 2",
    );
    expect(
        &e,
        &["moe.group_top_k = 2: too few: 2 groups of 2 experts cannot hold moe.top_k = 8"],
    );
    let e = err("deepseek-v3", "groups = 8\n", "");
    expect(&e, &["moe.group_top_k", "without moe.groups"]);
    let e = err("deepseek-v3", "groups = 8", "groups = 0");
    expect(&e, &["moe.groups = 0"]);
    // Without group_top_k every group is open: no limit.
    let text = bundled_model_text("deepseek-v3")
        .unwrap()
        .replace("group_top_k = 4\n", "");
    let m = ModelSpec::from_toml(&Source::new("open.toml", text)).unwrap();
    let moe = m.moe.unwrap();
    assert_eq!((moe.groups, moe.group_top_k), (8, 8));
}
