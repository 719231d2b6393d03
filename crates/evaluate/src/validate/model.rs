//! The model a published row is scored on (`case_model`): a bundled one whose shape agrees
//! with the row, else one built from the row's columns within the family its name points to,
//! checked against the row's parameter count; a hybrid model's row refused by name.

use autoplan_graph::{Family, ModelSpec, Moe, Optimizer, Positions, Routing};

use super::*;

/// Bundled model of a row's `model` cell, by name or alias (`GPT-3 175B (MLPerf reference)`,
/// `LLAMA3.1_405B`, `DeepSeekV3`...: `autoplan_graph::bundled_model_for`).
fn bundled_name(model: &str) -> Option<&'static str> {
    autoplan_graph::bundled_model_for(model)
}

/// A model from the row's own columns, built within the family its name points to
/// (`Family::of_model_name`; Llama-style when the name names none): BLOOM with ALiBi and its
/// embedding norm, GPT-NeoX with parallel blocks, MPT without biases... An MoE family without
/// MoE columns, or MoE columns under a dense family name, take the Llama-style MoE layout.
/// `Err((why, column))`: `column` names the blank cell when the row lacks a fact the model
/// needs (a data-missing skip), `None` when autoplan cannot build what the row gives.
fn model_from_columns(r: &PublishedRun) -> Result<ModelSpec, (String, Option<&'static str>)> {
    let missing = [
        ("layers", r.layers.is_none()),
        ("hidden", r.hidden.is_none()),
        ("heads", r.heads.is_none()),
        ("seq_len", r.seq_len.is_none()),
    ];
    let missing: Vec<&str> = missing.iter().filter(|m| m.1).map(|m| m.0).collect();
    if let Some(&first) = missing.first() {
        return Err((
            format!(
                "model `{}` is not bundled and the row does not give its architecture ({} not given)",
                r.model,
                missing.join(", ")
            ),
            Some(first),
        ));
    }
    let (layers, hidden, heads, seq) = (
        r.layers.unwrap_or(0),
        r.hidden.unwrap_or(0),
        r.heads.unwrap_or(0),
        r.seq_len.unwrap_or(0),
    );
    let named = Family::of_model_name(&r.model);
    let family = match (named, r.moe_experts.is_some()) {
        (Some(f), true) if f.is_moe() => f,
        (Some(f), false) if !f.is_moe() => f,
        _ if r.moe_experts.is_some() => Family::Mixtral,
        _ => Family::Llama,
    };
    // An MoE expert's width when not given: the dense width, as the shape's default (4h).
    let ffn4 = hidden.saturating_mul(4);
    let moe = r.moe_experts.map(|e| Moe {
        experts: e,
        top_k: r.moe_topk.unwrap_or(1),
        shared_experts: r.moe_shared_experts.unwrap_or(0),
        expert_ffn_hidden: r.moe_ffn_hidden.unwrap_or(ffn4),
        shared_ffn_hidden: r.moe_ffn_hidden.unwrap_or(ffn4),
        first_dense_layers: 0,
        routing: Routing::TopK,
        capacity_factor: None,
        load_imbalance: 1.0,
        groups: 1,
        group_top_k: 1,
    });
    let shape = autoplan_graph::Shape {
        layers,
        hidden,
        heads,
        kv_heads: r.kv_heads,
        ffn_hidden: r.ffn_hidden,
        vocab: r.vocab,
        seq_len: seq,
        moe,
    };
    // A dense model whose name names no family is built Llama-style (a gated MLP); where
    // that misses the row's published size and GPT's ungated GELU MLP meets it, the row's
    // model is GPT-style (Falcon-, Cerebras-GPT-, InternLM-1-like shapes: `ffn_hidden` =
    // 4·hidden in two matrices, not three). The size decides, as it does for tying below.
    let size = r.params_b.filter(|p| p.is_finite() && *p > 0.0);
    let build = |f: Family| ModelSpec::from_shape(&r.model, f, &shape);
    let family = match size {
        Some(p) if named.is_none() && family == Family::Llama => {
            let meets = |f: Family| build(f).is_ok_and(|m| sized(m, p).is_some());
            if !meets(Family::Llama) && meets(Family::Gpt) {
                Family::Gpt
            } else {
                family
            }
        }
        _ => family,
    };
    let model = build(family).map_err(|e| {
        // A family without a fixed vocabulary needs the row's `vocab`: a fact not given.
        let column = matches!(e, autoplan_graph::ShapeError::NoVocab(_)).then_some("vocab");
        (
            format!("{} shape from the row's columns: {e}", family.name()),
            column,
        )
    })?;
    // Whether the output layer shares the embedding is not a column, and sources of one family
    // differ (Megatron-LM ties by default, `--untie-embeddings-and-output-weights` unties).
    // The row's published size decides it when exactly one of the two matches it: e.g.
    // Megatron-Core's H100 scaling table (mcore08_*: 12·l·h² + 2·V·h at V = 131072).
    Ok(match size {
        Some(p) => sized(model.clone(), p).unwrap_or(model),
        None => model,
    })
}

/// `m` as built, or with its output layer tied the other way, whichever has the published
/// size `p` (billions) within [`params_tolerance`] — the built tying first; `None` when
/// neither has.
fn sized(m: ModelSpec, p: f64) -> Option<ModelSpec> {
    let fits = |m: &ModelSpec| (m.total_params() / 1e9 / p - 1.0).abs() <= params_tolerance(p);
    if fits(&m) {
        return Some(m);
    }
    let other = ModelSpec {
        tied_embeddings: !m.tied_embeddings,
        ..m
    };
    fits(&other).then_some(other)
}

/// The largest relative difference between the built model's parameters and the row's
/// `params_b` accepted (issue 16's bound), at least: a different architecture is far outside
/// it (BLOOM-176B built Llama-style: 237B, +35%; MT-NLG 530B: 707B, +33%). A size published
/// with few digits is wider ([`params_tolerance`]).
const PARAMS_TOLERANCE: f64 = 0.03;

/// What a built model may differ from a published size `p` (billions) by: a published size is
/// rounded to its last digit, so "1.7" is anything from 1.65 to 1.75 (Narayanan+21's "1.7B"
/// GPT has 1.652B; Megatron-Core's "GPT 1.7B", counted 12·l·h² + 2·V·h, 1.745B), and the row's
/// columns leave out biases, norms and position tables (1% more); never below
/// [`PARAMS_TOLERANCE`]. The digits are those of the cell's shortest decimal form.
fn params_tolerance(p: f64) -> f64 {
    let text = format!("{p}");
    let decimals = text.split_once('.').map_or(0, |(_, d)| d.len());
    let half_unit = 0.5 * 10f64.powi(-(decimals.min(12) as i32));
    PARAMS_TOLERANCE.max(half_unit / p + 0.01)
}

/// The layer kind autoplan cannot price that row `r`'s model has, by its name or notes:
/// state-space (Mamba) or linear-attention (Gated DeltaNet, lightning attention, RWKV) layers,
/// which hybrid models interleave with attention (Nemotron-H, Jamba, Zamba, Falcon-H1,
/// Qwen3-Next, MiniMax-01). The row's columns describe only its transformer part.
pub fn unmodelled_layers(r: &PublishedRun) -> Option<&'static str> {
    let squash = |t: &str| -> String {
        t.chars()
            .filter(char::is_ascii_alphanumeric)
            .collect::<String>()
            .to_ascii_lowercase()
    };
    let name = squash(&r.model);
    let notes = r.notes.as_deref().unwrap_or("").to_ascii_lowercase();
    const HYBRIDS: [&str; 7] = [
        "nemotronh",
        "jamba",
        "zamba",
        "falconh1",
        "qwen3next",
        "minimaxtext01",
        "minimaxm1",
    ];
    const STATE_SPACE: [&str; 3] = ["mamba", "rwkv", "hyena"];
    const LINEAR_ATTENTION: [&str; 5] = [
        "linear attention",
        "linear-attention",
        "deltanet",
        "lightning attention",
        "lightning-attention",
    ];
    if STATE_SPACE
        .iter()
        .any(|w| name.contains(w) || notes.contains(w))
    {
        Some("a state-space (Mamba-style) model")
    } else if LINEAR_ATTENTION.iter().any(|w| notes.contains(w)) || name.contains("deltanet") {
        Some("a linear-attention hybrid")
    } else if HYBRIDS.iter().any(|w| name.contains(w)) {
        Some("a hybrid of attention and recurrent or linear-attention layers")
    } else {
        None
    }
}

/// The model of row `r`: a bundled one whose shape agrees with the row, else the row's
/// columns; with the row's sequence length, global batch, vocabulary and precision.
pub(super) fn case_model(
    r: &PublishedRun,
    era: Era,
    resolve_model: &dyn Fn(&str) -> Option<ModelSpec>,
) -> Result<ModelSpec, Skipped> {
    let id = r.id.as_str();
    // The model: a bundled one whose shape agrees with the row, else the row's columns.
    let bundled = bundled_name(&r.model).and_then(resolve_model).filter(|m| {
        r.layers.is_none_or(|l| l == m.layers)
            && r.hidden.is_none_or(|h| h == m.hidden)
            && r.heads.is_none_or(|a| a == m.heads)
    });
    let mut model = match bundled {
        Some(m) => m,
        None => model_from_columns(r).map_err(|(why, column)| match column {
            Some(c) => Skipped {
                kind: SkipKind::DataMissing,
                column: Some(c.to_string()),
                ..skip(id, why)
            },
            None => skip(id, why),
        })?,
    };
    // After the data checks (a row lacking a fact is data missing first, docs/validation.md).
    if let Some(kind) = unmodelled_layers(r) {
        return Err(skip(
            id,
            format!(
                "{kind}: autoplan's layers are attention (full, sliding-window, MLA), dense \
                 MLPs and MoE; a hybrid's recurrent or linear-attention layers are not priced, \
                 and pricing them as attention would misstate the run"
            ),
        ));
    }
    // The Megatron-Bridge DeepSeek-V3 rows say whether the run had its MTP module ("w/o MTP",
    // "w/ MTP"); the bundled model has DeepSeek-V3's one.
    if r.notes
        .as_deref()
        .is_some_and(|n| n.to_ascii_lowercase().contains("w/o mtp"))
    {
        model.mtp_modules = 0;
    }
    match r.seq_len {
        Some(s) => model.training.seq_len = s,
        None => return Err(skip(id, "sequence length not given")),
    }
    if model.positions == Positions::Learned {
        model.max_positions = model.max_positions.max(model.training.seq_len);
    }
    match r.global_batch {
        Some(b) => model.training.global_batch = b,
        None => return Err(skip(id, "global batch not given")),
    }
    if let Some(v) = r.vocab {
        model.vocab = v;
    }
    // Never score a row on a different model: the built parameters must match the row's.
    if let Some(p) = r.params_b.filter(|p| p.is_finite() && *p > 0.0) {
        let built = model.total_params() / 1e9;
        if (built / p - 1.0).abs() > params_tolerance(p) {
            let untied = if model.tied_embeddings {
                let head = model.vocab as f64 * model.hidden as f64 / 1e9;
                format!(" ({:.2}B with an untied output layer)", built + head)
            } else {
                String::new()
            };
            return Err(skip(
                id,
                format!(
                    "built {} shape of `{}` has {built:.2}B params{untied}, row says {p}B \
                     (more than {:.0}% apart)",
                    model.family.name(),
                    r.model,
                    params_tolerance(p) * 100.0
                ),
            ));
        }
    }
    let cell = r.precision.as_deref().unwrap_or("");
    // A blank cell whose source names the table's one format ("NeMo 24.07 container,
    // DGX-H100, FP8").
    let from_source = if cell.trim().is_empty() {
        source_precision(&r.source)
    } else {
        None
    };
    model.training.precision = match (
        row_precision(cell, r.notes.as_deref().unwrap_or("")),
        from_source,
    ) {
        (Ok(Some(p)), _) | (Ok(None), Some(p)) => p,
        // Blank precision: the source's TFLOP/s ÷ MFU implies the 16-bit dense peak.
        (Ok(None), None) if era == Era::Megatron2021 => Precision::Fp16,
        (Ok(None), None) => Precision::Bf16,
        (Err(()), _) => return Err(skip(id, format!("precision `{cell}` not modelled"))),
    };
    // Adam moments kept in BF16, where the row says so ("BF16 optimizer moments", "bf16
    // optimizer states"): DeepSeek-V3 report §3.3.3, Megatron-Core's precision-aware optimizer
    // (`--exp-avg-dtype/--exp-avg-sq-dtype bf16`, frameworks.md §1.9).
    let text = format!("{cell} {}", r.notes.as_deref().unwrap_or("")).to_ascii_lowercase();
    if model.training.optimizer == Optimizer::Adam
        && ["bf16 optimizer", "bf16 moments", "bf16 adam"]
            .iter()
            .any(|w| text.contains(w))
    {
        model.training.optimizer = Optimizer::AdamBf16Moments;
    }
    Ok(model)
}

/// The training precision a row's `source` names, where it names exactly one format as a word
/// (`FP8`, `MXFP8`, `BF16`, `FP16`, `NVFP4`: a performance table's section, "NeMo 24.07
/// container, DGX-H100, FP8"); `None` where it names none or several ("BF16 and FP8 tables").
/// FP8 named without its recipe is the delayed-scaling default, as the `precision` cell's
/// bare `fp8` is (`row_precision`).
pub(super) fn source_precision(source: &str) -> Option<Precision> {
    let s = source.to_ascii_lowercase();
    let words: Vec<&str> = s
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let named: Vec<Precision> = [
        ("fp8", Precision::Fp8),
        ("mxfp8", Precision::Mxfp8),
        ("bf16", Precision::Bf16),
        ("fp16", Precision::Fp16),
        ("nvfp4", Precision::Nvfp4),
    ]
    .into_iter()
    .filter(|(w, _)| words.contains(w))
    .map(|(_, p)| p)
    .collect();
    match named.as_slice() {
        [p] => Some(*p),
        _ => None,
    }
}
