//! Which framework profile a published row ran under (issue 17 item 4): a rule on the row's
//! source (its id's source prefix, the `source` column, and the stack its notes name), never on
//! the row itself. The profile's mechanisms are its evaluation options and the TP overlap of
//! its plan (`case.rs`).

use autoplan_plan::framework::{AttentionKernel, CostProfile};

use super::hardware::cluster_name_for;

use super::PublishedRun;

/// The profile of row `r`:
///
/// - `meg20_`, or a source citing Shoeybi+19 (the Megatron-LM paper, whose code the v1 README
///   ran): Megatron-LM v1 (2020); `nar21_`, or a source citing Narayanan+21 (its runs at other
///   scales): Megatron-LM 2021; `kor22_`, or a source citing Korthikanti+22: Megatron-LM 2022,
///   its asynchronous backward TP collectives (published_runs_SOURCES.md §2, §3).
/// - torchtitan's benchmark tables (`tt_`, or a source or notes naming torchtitan): torchtitan with
///   `compile` where the row's notes name it or async TP (which needs it, frameworks.md
///   §2.1), or its precision Float8 linears (every Float8 row of torchtitan's tables that
///   names its stack names compile); otherwise, or where the notes say "no torch.compile", eager
///   torchtitan (`compile` is off by default, frameworks.md §2.4).
/// - llm-foundry's benchmarking README, or a run whose source or notes name llm-foundry:
///   llm-foundry (Composer, FSDP1).
/// - A run whose source or notes name MaxText (its GPU configurations' README tables): MaxText
///   (JAX/XLA).
/// - A run whose source or notes name DeepSpeed or GPT-NeoX (BLOOM's Megatron-DeepSpeed,
///   MT-NLG's "DeepSpeed pipeline + Megatron TP", GPT-NeoX, built on DeepSpeed): Megatron-
///   DeepSpeed of 2021–22, unless it names FlashAttention (`deepspeed_profile`).
/// - A run its notes call "baseline Megatron-LM" (MegaScale's Table 2 baseline, plain
///   Megatron-LM at commit 285068c8 with its defaults): Megatron-LM 2023.
/// - A run of another stack that predates FlashAttention and Transformer Engine — its source
///   dated 2022 or earlier ([`source_year`]), or a V100, which no FlashAttention kernel runs
///   on (sm80 and newer; the evaluator prices any V100 run's attention unfused whatever the
///   profile, `GpuArch::runs_fused_attention`) — ran what the Megatron-LM of its time ran: unfused attention, no TP
///   overlap, no sequence parallelism unless stated (FlashAttention: Dao+22, in Megatron-LM
///   from 2023 as `--use-flash-attn`; TP overlap with Transformer Engine, 2023; frameworks.md
///   §1.3): Megatron-LM 2021–22, not Megatron-Core's 2024 defaults.
/// - Everything else (NVIDIA's NeMo, Megatron-Bridge, ModelZoo, MLPerf and Megatron-LM README
///   tables; MegaScale's own rows, which overlap all three parallel dimensions' communication
///   and use FlashAttention-2, Jiang+24 §3.2–3.3; Llama 3, DeepSeek): Megatron-Core.
pub fn row_profile(r: &PublishedRun) -> CostProfile {
    let id = r.id.as_str();
    let source = r.source.to_ascii_lowercase();
    let text = format!("{source} {}", r.notes.as_deref().unwrap_or("")).to_ascii_lowercase();
    let names = |papers: &[&str]| papers.iter().any(|p| source.contains(p));
    if id.starts_with("meg20") || names(&["shoeybi+19", "shoeybi et al"]) {
        CostProfile::MEGATRON_LM_2020
    } else if id.starts_with("kor22") || names(&["korthikanti+22", "korthikanti et al"]) {
        CostProfile::MEGATRON_LM_2022
    } else if id.starts_with("nar21") || names(&["narayanan+21", "narayanan et al"]) {
        CostProfile::MEGATRON_LM_2021
    } else if id.starts_with("tt_") || text.contains("torchtitan") {
        let notes = r.notes.as_deref().unwrap_or("").to_ascii_lowercase();
        let float8 = r
            .precision
            .as_deref()
            .is_some_and(|p| p.to_ascii_lowercase().contains("float8"));
        let compiled = (float8 || notes.contains("compile") || notes.contains("asynctp"))
            && !notes.contains("no torch.compile");
        torchtitan_sdpa(
            if compiled {
                CostProfile::TORCHTITAN
            } else {
                CostProfile::TORCHTITAN_EAGER
            },
            r,
        )
    } else if ["llm-foundry", "llm foundry", "llmfoundry"]
        .iter()
        .any(|w| text.contains(w))
    {
        CostProfile::LLM_FOUNDRY
    } else if text.contains("maxtext") {
        CostProfile::MAXTEXT
    } else if text.contains("deepspeed") || text.contains("gpt-neox") {
        deepspeed_profile(r, &text)
    } else if text.contains("baseline megatron-lm") {
        CostProfile::MEGATRON_LM_2023
    } else if source_year(&r.source).is_some_and(|y| y <= 2022)
        || r.gpu.to_ascii_lowercase().contains("v100")
    {
        CostProfile::MEGATRON_LM_2021
    } else {
        CostProfile::MEGATRON_CORE
    }
}

/// torchtitan profile `p` with the attention kernel its SDPA ran for row `r`. torchtitan
/// before 0.2.0 (2025-10) ran FlashAttention-2 below compute capability 10.0: 0.1.0 orders
/// SDPA's backends flash, memory-efficient, math, with cuDNN first only from 10.0
/// (`models/attention.py` @ 0.1.0 L199-213); before it the model code called SDPA as it was,
/// and PyTorch's own order put flash first from torch 2.5.1 to 2.8 (`ATen/Context.h` @ torch
/// 2.6.0 L391-395; docs/frameworks.md, "Attention kernels"). From 0.2.0 it orders cuDNN first
/// everywhere (`models/attention.py` @ 0.2.0 L89-93), what [`CostProfile::TORCHTITAN`] prices.
/// The release a row ran is read from its source's year: 2025 or earlier is before 0.2.0
/// (ten of 2025's twelve months are).
fn torchtitan_sdpa(p: CostProfile, r: &PublishedRun) -> CostProfile {
    // 0.1.0's `has_cuda_capability(10, 0)`, on the row's bundled GPU.
    let cudnn_first = cluster_name_for(&r.gpu)
        .and_then(|c| autoplan_cluster::resolve_cluster(c).ok())
        .is_some_and(|c| c.gpu.arch.at_least((10, 0)));
    if !cudnn_first && source_year(&r.source).is_some_and(|y| y <= 2025) {
        p.with_attention(AttentionKernel::FlashAttention2)
    } else {
        p
    }
}

/// The profile of a DeepSpeed-based row (text: its source and notes, lower case). The 2021–22
/// profile is what the Megatron-DeepSpeed forks of those years ran — Megatron's unfused
/// attention of 2021, their own kernels (its fitted `unpriced_compute` stands for them, fitted
/// on BLOOM, MT-NLG and GPT-NeoX). FlashAttention is opt-in there (Megatron-DeepSpeed's
/// `--use-flash-attn`, after Megatron-LM's, frameworks.md §1.3), so a row's date does not
/// switch it: a row that names FlashAttention ran the fused kernel, and is priced with
/// DeepSpeed's engine rules (gradient reduction after the backward below stage 3, all-reduced
/// buckets: frameworks.md §3.3, §3.5) and nothing fitted on the older forks' unfused rows:
/// DeepSpeed-MoE's einsum dispatch unless its source is dated 2026 or later
/// (`DEEPSPEED_MOE_2023`: the gather by index came in v0.19.4, the release before v0.19.5 of
/// 2026-08, frameworks.md's version table; `DEEPSPEED` after). For a dense model the two are
/// the same. Every other DeepSpeed row takes the 2021–22 profile. The fused kernel such a row
/// names is the `flash-attn` package's (Megatron-DeepSpeed's `--use-flash-attn-v2` calls it),
/// whose kernels are FlashAttention-2's sm80 code on every GPU
/// ([`AttentionKernel::FlashAttention2`]: Hopper's own kernels are FlashAttention-3's, a
/// separate package); on Ampere that is the GPU's own kernel, the same price.
fn deepspeed_profile(r: &PublishedRun, text: &str) -> CostProfile {
    let flash = [
        "flashattention",
        "flash attention",
        "flash-attn",
        "flash_attn",
    ]
    .iter()
    .any(|w| text.contains(w));
    match source_year(&r.source) {
        _ if !flash => CostProfile::MEGATRON_DEEPSPEED_2022,
        Some(y) if y >= 2026 => {
            CostProfile::DEEPSPEED.with_attention(AttentionKernel::FlashAttention2)
        }
        _ => CostProfile::DEEPSPEED_MOE_2023.with_attention(AttentionKernel::FlashAttention2),
    }
}

/// The latest year a source names: a four-digit year from 2015 to 2030 (`Sep 2020`,
/// `NSDI'24` is not one), or a citation's two digits after `+` (`Zhang+22`, `Dubey+24`).
/// `None` when it names none.
pub fn source_year(source: &str) -> Option<u32> {
    let b = source.as_bytes();
    let digits = |i: usize, n: usize| -> Option<u32> {
        let run = b.get(i..i + n)?;
        let bounded =
            |j: Option<usize>| j.and_then(|j| b.get(j)).is_none_or(|c| !c.is_ascii_digit());
        (run.iter().all(u8::is_ascii_digit) && bounded(i.checked_sub(1)) && bounded(Some(i + n)))
            .then(|| run.iter().fold(0, |v, d| v * 10 + u32::from(d - b'0')))
    };
    let mut best: Option<u32> = None;
    for i in 0..b.len() {
        let year = match digits(i, 4) {
            Some(y) if (2015..=2030).contains(&y) => Some(y),
            _ if i > 0 && b[i - 1] == b'+' && i > 1 && b[i - 2].is_ascii_alphabetic() => {
                digits(i, 2).map(|y| 2000 + y)
            }
            _ => None,
        };
        best = best.max(year);
    }
    best
}

/// The source family of a row, the unit `validate` reports MAPE by: its id's prefix before
/// the first `_` (`nar21`, `nemo2407`, `bridge2511`, `megascale`, `mpt`, ...), which names
/// the publication (data/published_runs_SOURCES.md, published_runs_2_SOURCES.md).
pub fn source_family(id: &str) -> String {
    id.split('_').next().unwrap_or(id).to_string()
}
