//! Reading the wording of a row's cells: precision and FP8 recipe, recompute modules,
//! Megatron's pipeline split, the FLOP convention a row declares.

use super::*;

/// The training precision a row's `precision` cell names; `None` for a 16-bit run whose format
/// the cell leaves open (blank, "mixed precision", "not stated"), which the era decides; `Err`
/// for wording none of these rules reads.
///
/// - `nvfp4`/`fp4`: NVFP4; `mxfp8`: MXFP8 (Megatron `--fp8-recipe mxfp8`).
/// - FP8 by its scaling recipe (frameworks.md §1.8): block (`1x128`, `128x128`, `block`,
///   `fine-grained`: DeepSeek-V3's), current (`current`, `fp8-cs`, `tensorwise`, and
///   torchtitan's `Float8` linears, whose default recipe is tensorwise dynamic scaling,
///   frameworks.md §2.5), delayed (`delayed`, or no recipe named: Megatron's default; `FP8_HYBRID`
///   names the E4M3/E5M2 format, not a recipe). A cell that only implies FP8 ("not stated (fp8
///   implied)") takes the recipe its `notes` name, if any.
/// - `mxfp8`, `MX-FP8`, `fp8 (MX)`, microscaling: MXFP8.
/// - `fp16` (`mixed fp16`, `--fp16`, Lightning's `16-mixed`): FP16; `bf16` (`amp_bf16`,
///   `bf16 (PURE)`): BF16; `mixed`, `AMP`, `apex` naming no format: the era's 16-bit format.
pub(crate) fn row_precision(cell: &str, notes: &str) -> Result<Option<Precision>, ()> {
    let c = cell.to_ascii_lowercase();
    let fp8_recipe = |t: &str| {
        if ["1x128", "128x128", "block", "fine-grained"]
            .iter()
            .any(|w| t.contains(w))
        {
            Some(Precision::Fp8Block)
        } else if ["current", "fp8-cs", "tensorwise", "float8"]
            .iter()
            .any(|w| t.contains(w))
        {
            Some(Precision::Fp8Current)
        } else if t.contains("delayed") {
            Some(Precision::Fp8)
        } else {
            None
        }
    };
    let implied = c.contains("implied") || c.contains("not stated");
    let words: Vec<&str> = c.split(|ch: char| !ch.is_ascii_alphanumeric()).collect();
    // AMP or apex with no format named: a 16-bit run whose format the era decides.
    let amp_only = ["amp", "apex", "mixed"].iter().any(|w| words.contains(w));
    Ok(Some(if c.contains("fp4") {
        Precision::Nvfp4
    } else if c.contains("mxfp8")
        || c.contains("microscal")
        || (c.contains("fp8") && words.contains(&"mx"))
    {
        Precision::Mxfp8
    } else if c.contains("fp8") || c.contains("float8") {
        fp8_recipe(&c)
            .or_else(|| {
                implied
                    .then(|| fp8_recipe(&notes.to_ascii_lowercase()))
                    .flatten()
            })
            .unwrap_or(Precision::Fp8)
    } else if c.contains("bf16") || c.contains("bfloat16") {
        Precision::Bf16
    } else if c.contains("fp16")
        || c.contains("float16")
        || c.contains("half")
        || c.contains("16-mixed")
    {
        Precision::Fp16
    } else if c.trim().is_empty() || amp_only || implied {
        return Ok(None);
    } else {
        return Err(());
    }))
}

/// What row `r`'s pipeline split counts besides the blocks (Megatron-Core's
/// `--account-for-embedding/loss-in-pipeline-split`, frameworks.md §1.2): the flags its notes
/// name; otherwise the embedding and the loss where that is the only even split Megatron can
/// build: the `blocks` do not divide into the `pp·vpp` model chunks and `blocks + 2` do
/// (Qwen3-235B's 94 blocks on pp 32 × vpp 3, pp 8 × vpp 4, pp 4 × vpp 6: uneven first/last
/// stages need counts divisible by vpp, which 94 does not leave).
pub(crate) fn pipeline_split(r: &PublishedRun, blocks: u32, pp: u32, vpp: u32) -> PipelineSplit {
    let notes = r
        .notes
        .as_deref()
        .unwrap_or("")
        .to_ascii_lowercase()
        .replace('_', "-");
    let named = |part: &str| notes.contains(&format!("account-for-{part}"));
    let chunks = pp.max(1) * vpp.max(1);
    match (named("embedding"), named("loss")) {
        (true, true) => PipelineSplit::EmbeddingLoss,
        (true, false) => PipelineSplit::Embedding,
        (false, true) => PipelineSplit::Loss,
        (false, false)
            if pp > 1 && !blocks.is_multiple_of(chunks) && (blocks + 2).is_multiple_of(chunks) =>
        {
            PipelineSplit::EmbeddingLoss
        }
        _ => PipelineSplit::Blocks,
    }
}

/// The attention FLOP convention of row `r`'s TFLOP/s or MFU: the one the row declares
/// ([`crate::AttentionFlops::of_row`]), else its source's as `published_runs_SOURCES.md`
/// documents it: Megatron-LM 2020–22 (`meg20_`, `nar21_`, `kor22_`: the 72/96·B·s·l·h²
/// formulas), the Megatron-Core 0.8 README table (`mcore08_`, Megatron's formula of 2024) and
/// NeMo 24.07 (`nemo2407_`: 57.9 GFLOP per token for Llama3-8B at 8K) count the full `s×s`
/// matrix; everything else the causal half, Megatron-LM's count since 2025.
pub(crate) fn row_attention_flops(r: &PublishedRun) -> crate::AttentionFlops {
    let full_sources = ["meg20", "nar21", "kor22", "mcore08", "nemo2407"];
    crate::AttentionFlops::of_row(
        r.tflops_convention.as_deref().unwrap_or(""),
        r.notes.as_deref().unwrap_or(""),
    )
    .unwrap_or(if full_sources.iter().any(|p| r.id.starts_with(p)) {
        crate::AttentionFlops::Full
    } else {
        crate::AttentionFlops::Causal
    })
}

/// The modules of a row's selective recompute: the parenthesised list of the ModelZoo's
/// `selective (norm, act, shared_expert)` or of DeepSeek-V3's `selective (RMSNorm + MLA
/// up-projection)` (items separated by `,` or `+`), in Megatron-Core's names (`norm`, `rmsnorm`
/// → `layernorm`, `act` → `moe_act`, `shared_expert` → `shared_experts`, `attention core` →
/// `core_attn`, `mla up-projection` → `mla_up_proj`, `dense-layer MLP` → `mlp`). A cell that
/// says only `selective` takes the list from the row's notes where they give one: in
/// parentheses (`selective recompute (moe_act, layernorm)`: the ModelZoo's GB200 rows) or as
/// the clause after "recompute" (`recompute dense-layer MLP + MLA up-proj`: the DeepSeek-V3
/// GB200 guide's baseline). A cell of module names alone (`layernorm, moe_act`, `selective:
/// moe_act`, after a label: `AC: core_attn`) names them. Megatron's default `core_attn` when
/// none names a module.
pub(crate) fn recompute_modules(rc: &str, notes: &str) -> RecomputeModules {
    let list = |t: &str| {
        t.split_once('(')
            .and_then(|(_, rest)| rest.split_once(')'))
            .map(|(l, _)| l.to_string())
    };
    let notes = notes.to_ascii_lowercase();
    let rc = without_label(rc);
    if let Some(set) = list(rc)
        .and_then(|l| modules_named(&l))
        .or_else(|| only_modules(rc))
    {
        return set;
    }
    if !rc.starts_with("selective") {
        return RecomputeModules::DEFAULT;
    }
    let parenthesised = notes.find("recompute (").and_then(|i| list(&notes[i..]));
    // Each clause that follows a "recompute ", up to the next `,`, `.` or `;`.
    let clauses = notes.match_indices("recompute ").map(|(i, w)| {
        notes[i + w.len()..]
            .split([',', '.', ';'])
            .next()
            .unwrap_or("")
    });
    parenthesised
        .iter()
        .map(String::as_str)
        .chain(clauses)
        .find_map(modules_named)
        .unwrap_or(RecomputeModules::DEFAULT)
}

/// The modules a list of names (`,` or `+` between them) names; `None` when it names none.
fn modules_named(list: &str) -> Option<RecomputeModules> {
    let mut set = 0;
    for item in list.split([',', '+']) {
        // `MLA up-projection`, `mla_up_proj` and `mla up proj` alike.
        let item = item.trim().to_ascii_lowercase().replace(['-', '_'], " ");
        let name = match item.as_str() {
            "norm" | "layernorm" | "rmsnorm" => "layernorm",
            "act" | "moe act" => "moe_act",
            "shared expert" | "shared experts" => "shared_experts",
            "attention core" | "core attn" => "core_attn",
            "mla up projection" | "mla up proj" => "mla_up_proj",
            "dense layer mlp" | "dense mlp" => "mlp",
            other => other,
        };
        let name = name.replace(' ', "_");
        if let Some(&(_, bit)) = RecomputeModules::NAMES.iter().find(|(n, _)| *n == name) {
            set |= bit;
        }
    }
    (set != 0).then_some(RecomputeModules(set))
}

/// Labels a `recompute` cell may put before its value (`AC: full`).
const RECOMPUTE_LABELS: &[&str] = &[
    "ac",
    "activation checkpointing",
    "activation recompute",
    "activation recomputation",
    "checkpointing",
    "gradient checkpointing",
    "recompute",
    "recomputation",
];

/// `c` (lower case) without a [`RECOMPUTE_LABELS`] label and its colon (`ac: full` → `full`);
/// `c` itself where it has none or nothing follows it.
fn without_label(c: &str) -> &str {
    match c.split_once(':') {
        Some((label, value))
            if !value.trim().is_empty()
                && RECOMPUTE_LABELS.contains(&label.trim().replace(['-', '_'], " ").as_str()) =>
        {
            value.trim()
        }
        _ => c,
    }
}

/// The modules of a list that names nothing but Megatron's modules (`core_attn`, `layernorm,
/// moe_act`, after `selective:` too); `None` when an item is something else.
fn only_modules(list: &str) -> Option<RecomputeModules> {
    let list = list.trim();
    let list = list
        .strip_prefix("selective")
        .map_or(list, |rest| rest.trim_start_matches([':', ' ', '-']));
    let every = !list.is_empty()
        && list
            .split([',', '+'])
            .all(|item| !item.trim().is_empty() && modules_named(item).is_some());
    every.then(|| modules_named(list)).flatten()
}

/// The recompute a row's `recompute` cell names, with the blocks per model chunk where it
/// names Megatron's block method; `Ok(None)` for a blank cell or one that says it is not
/// known (`-`, `n/a`, `unknown`, `not stated`), which the era decides; `Err` with the reason
/// for wording none of these rules reads (never a silent "none").
///
/// - `none`, `no`, `off`, `false`, `0`, `without …` (Llama 3's "none (8K seq trained without
///   activation checkpointing)"): no recompute;
/// - `full …`, `uniform …`, `yes`, `true`, `on`, `1`, or activation/gradient checkpointing
///   named (`--checkpoint-activations`, `checkpoint every layer`): every block in full, unless
///   the cell names the block method with a count (`full (block, 2 layers)`, `block 4`:
///   Megatron's `--recompute-method block --recompute-num-layers N`, the first N of each model
///   chunk, frameworks.md §1.7);
///   `--recompute-method uniform`'s count (`full (uniform, 1 layer)`, 2021's
///   `checkpoint_activations, 1 layer`) groups the blocks it checkpoints and still recomputes
///   all of them;
/// - `selective …`, or Megatron's module names alone (`core_attn`, `layernorm, moe_act`):
///   selective ([`recompute_modules`] reads its modules);
/// - a MaxText remat policy (`minimal_with_context`, `save_dot_except_mlp`, …): selective, its
///   modules read by `remat.rs`, or refused where its recompute cannot be priced;
/// - a label before any of these (`AC: full`, `recompute: selective`): the value after it;
/// - activation offload named beside it (`selective + CPU offload`): refused (`Err`); its
///   absence said (`full (no offload)`) is the recompute alone.
pub(crate) fn recompute_cell(cell: &str) -> Result<Option<(Recompute, Option<u32>)>, String> {
    let c = cell.trim().to_ascii_lowercase();
    let words: Vec<&str> = c
        .split(|ch: char| !ch.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let first = words.first().copied().unwrap_or("");
    if words.is_empty()
        || matches!(c.as_str(), "n/a" | "na" | "?" | "unknown" | "unstated")
        || c.starts_with("not stated")
        || c.starts_with("not given")
    {
        return Ok(None);
    }
    // A MaxText remat policy (`minimal_with_context`, …): selective, or refused with the reason
    // (`remat.rs`).
    if let Some(read) = super::remat::remat_recompute(&c) {
        return read.map(|rc| Some((rc, None)));
    }
    // Activation offload beside the recompute (`selective + CPU offload`): which layers went to
    // host memory (Megatron's `--cpu-offloading-num-layers`) is not read from this cell, and
    // priced without it the run would read too fast: refused, not dropped.
    let no_offload = [
        "no offload",
        "without offload",
        "no cpu offload",
        "without cpu offload",
    ]
    .iter()
    .any(|p| c.contains(p));
    if c.contains("offload") && !no_offload {
        return Err(format!(
            "recompute `{}`: names activation offload, which is not read from the recompute \
             cell (which layers went to host memory?) and is never dropped",
            cell.trim()
        ));
    }
    // A label before the value (`AC: full`, `activation checkpointing: selective`): the value.
    let unlabelled = without_label(&c);
    if unlabelled.len() < c.len() {
        return recompute_cell(unlabelled);
    }
    if matches!(
        first,
        "none" | "no" | "off" | "false" | "0" | "disabled" | "without"
    ) {
        return Ok(Some((Recompute::None, None)));
    }
    // Megatron's `--recompute-modules` names alone (`core_attn`, `layernorm, moe_act`): the
    // selective granularity they belong to, whose modules [`recompute_modules`] reads.
    if only_modules(&c).is_some() {
        return Ok(Some((Recompute::Selective, None)));
    }
    // torchtitan's per-op selective checkpointing, however it is written ("selective (op)",
    // "per-op SAC"): selective, which the torchtitan reading then names as not priced.
    if first == "selective" || words.contains(&"sac") || (first == "per" && words.contains(&"op")) {
        return Ok(Some((Recompute::Selective, None)));
    }
    let block = words.contains(&"block");
    let full = first == "full"
        || block
        || matches!(first, "yes" | "true" | "on" | "1" | "enabled")
        // Megatron's `--recompute-method uniform` recomputes every block in full (`block` takes
        // its count, below).
        || first == "uniform"
        || [
            "activation checkpoint",
            "gradient checkpoint",
            "checkpoint activations",
            "activation recompute",
            "checkpoint every",
            "checkpoint each",
            "checkpoint all",
            "recompute all",
            "recompute every",
        ]
        .iter()
        .any(|p| words.join(" ").contains(p));
    if !full {
        return Err(format!(
            "recompute `{}`: not none, full (or Megatron's block count), or selective",
            cell.trim()
        ));
    }
    if !block {
        return Ok(Some((Recompute::Full, None)));
    }
    match words.iter().find_map(|w| w.parse::<u32>().ok()) {
        Some(n) if n >= 1 => Ok(Some((Recompute::Full, Some(n)))),
        _ => Err(format!(
            "recompute `{}`: the block method without its count of blocks",
            cell.trim()
        )),
    }
}
