//! The benchmark scripts behind a row's figures, where their code was read: settings a
//! published table does not print but every run of its harness applied.
//!
//! NeMo's performance tables (NeMo's `docs/source/performance/performance_summary.md`, and
//! the NeMo-container sections of Megatron-Bridge's `docs/performance-summary*.md`) are
//! measured with NeMo's `scripts/performance` of the container's release, which ships in
//! nemo-toolkit's source distribution (each container taken as the nemo-toolkit release of
//! its month or just after). Read at (`tools/nemo_perf_scripts.sh` fetches them and prints
//! the lines below):
//! - 2.3.0 (2025-05-08, container 25.04): `scripts/performance/utils.py` L340-351 sets
//!   `grad_reduce_in_fp32 = False` inside `if compute_dtype == "fp8"`: FP8 runs reduce their
//!   gradients in BF16, BF16 runs keep the recipe's FP32 (Megatron's `bf16_mixed`);
//!   `pretrain_deepseek_v3.py` sets no dispatcher (the recipe's all-to-all).
//! - 2.4.0 (2025-07-25, 25.07), 2.5.0 (2025-10-07, 25.09), and 2.6.0 (2025-12-03, 25.11) alike:
//!   `helpers.py::set_precision_configs` (L224, L224, L234) sets `grad_reduce_in_fp32 =
//!   False` for every run, BF16 or FP8 (`--compute_dtype` defaults to `bf16`, so it is always
//!   reached); `llm/pretrain_deepseek_v3.py` (L72-80, L79-87, L78-86) runs DeepSeek-V3 on
//!   H100 with the `flex` dispatcher and DeepEP (`moe_enable_deepep = True`, no
//!   shared-expert overlap, router force-balanced from 2.5.0) and on every other GPU with
//!   the all-to-all dispatcher (`--gpu` takes only `h100`, `b200`, `gb200`,
//!   `argument_parser.py` L43-50 @ 2.5.0, so a run on an H800 or H200 passed `h100`); it builds `pretrain_recipe(performance_mode=True)`, whose
//!   `pretrain_performance_optimizations` adds `MegatronCommOverlapCallback(tp_comm_overlap
//!   = False)` (`recipes/deepseek_v3.py` L178, L186, L186), which the script does not turn
//!   back on: its TP communication is not overlapped.
//! - Every release: the FP8 precision plugins gather the parameters in FP8
//!   (`fp8_param_gather`), MXFP8's from 2.4.0, block scaling's never; from 2.4.0 MXFP8 runs
//!   also turn the parameter all-gather's overlap off ([`NemoPerfScripts::param_gather_bytes`],
//!   [`NemoPerfScripts::param_gather_exposed`]).
//!
//! - DeepSeek-V3's pipeline layout (2.3.0 on; [`deepseek_v3_stage_blocks`]), which Megatron-
//!   Bridge's own DeepSeek-V3 recipe shares (megatron-bridge 0.3.1 wheel), so it is read for
//!   the rows of its 25.11 section too.
//!
//! NeMo 24.07 and earlier ran NeMo-Framework-Launcher's YAML configurations, not these
//! scripts, and are not read here; nor are Megatron-Bridge's own ports of the scripts. Those
//! ran the 25.11 section of Megatron-Bridge's table, not 2.6.0's scripts: its DeepSeek-V3
//! rows on B200 and GB200 and its Qwen3-30B-A3B row say "dropless", where 2.6.0 runs both
//! models there with `MegatronTokenDropCallback` (capacity factor 1.0, padded:
//! `pretrain_deepseek_v3.py` L84-89, `pretrain_qwen3_30b_a3b.py` L84). So the releases read
//! are 25.04 to 25.09.

use autoplan_cluster::Precision;
use autoplan_graph::ModelSpec;

use super::PublishedRun;

/// A row measured with NeMo's performance scripts, by the container release its source names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NemoPerfScripts {
    /// (year − 2000, month) of the NeMo container, e.g. (25, 9).
    container: (u32, u32),
}

impl NemoPerfScripts {
    /// The scripts of row `r`: its source names a NeMo container release `YY.MM` (`"25.09
    /// NeMo container"`, `"NeMo 25.04 container"`) and a performance summary document
    /// (`performance_summary` / `performance-summary`), and the release
    /// is one whose scripts ran its table (25.04 to 25.09; [module docs](self)).
    pub(super) fn of(r: &PublishedRun) -> Option<NemoPerfScripts> {
        let s = r.source.to_ascii_lowercase();
        // The table itself, not another document run in a NeMo container.
        if !(s.contains("container") && names_nemo(&s) && names_summary(&s)) {
            return None;
        }
        let container = release(&s)?;
        ((25, 4)..=(25, 9))
            .contains(&container)
            .then_some(NemoPerfScripts { container })
    }

    /// The DP gradient reduction runs in BF16 (`grad_reduce_in_fp32 = False`): every run
    /// from 25.07, FP8 runs in 25.04.
    pub(super) fn reduces_grads_in_bf16(self, precision: Precision) -> bool {
        self.container >= (25, 7) || precision.is_low_precision()
    }

    /// DeepSeek-V3 on H100 runs DeepEP without TP-communication overlap (from 25.07).
    pub(super) fn deepseek_v3_h100_deepep(self) -> bool {
        self.container >= (25, 7)
    }

    /// Bytes per parameter of the DP parameter all-gathers where the run gathers its
    /// parameters in FP8: NeMo's FP8 precision plugins set `fp8_param_gather = True` for
    /// delayed and current scaling in every release read, for MXFP8 from 2.4.0 (25.07; `False`
    /// in 2.3.0), never for block scaling (`subchannel`)
    /// (`nemo/collections/llm/recipes/precision/mixed_precision.py`: L56-70 delayed, L92-101
    /// MXFP8, in every release; current scaling L118-135 and subchannel L181-192 @ 2.3.0 and
    /// 2.4.0, L120-137 and L204-215 @ 2.5.0 and 2.6.0; `tools/nemo_perf_scripts.sh`). MXFP8
    /// adds its E8M0 scale of every 32 elements. `None`: 16-bit.
    pub(super) fn param_gather_bytes(self, precision: Precision) -> Option<f64> {
        match precision {
            Precision::Fp8 | Precision::Fp8Current => Some(1.0),
            Precision::Mxfp8 if self.container >= (25, 7) => Some(1.0 + 1.0 / 32.0),
            _ => None,
        }
    }

    /// The distributed optimizer's parameter all-gather runs exposed: from 25.07 an MXFP8 run
    /// gathers into its gradient buffer and the scripts turn `overlap_param_gather` off,
    /// "because it is not supported with reuse_grad_buf_for_mxfp8_param_ag"
    /// (`scripts/performance/helpers.py::set_precision_configs` @ 2.4.0 L226-237, 2.5.0
    /// L226-234, 2.6.0 L236-244).
    pub(super) fn param_gather_exposed(self, precision: Precision) -> bool {
        self.container >= (25, 7) && precision == Precision::Mxfp8
    }
}

/// Whether row `r`'s run could pick Megatron-Core's selective recompute by module
/// (`--recompute-modules`: `moe_act`, `layernorm`, `mla_up_proj`, `mlp`, `moe`, ...;
/// Megatron-Core 0.12 on, frameworks.md §1.7): not where its source names an older stack — a
/// Megatron-Core release `r0.N` with N < 12, a NeMo container before 25.04 (nemo-toolkit
/// 2.3.0, container 25.04, is the first whose performance scripts take `--recompute_modules`,
/// `scripts/performance/argument_parser.py` L303; 2.0.0rc1, of NeMo 24.07, has none) — or is
/// dated 2024 or earlier (`source_year`; Megatron-Core 0.12 is of 2025).
pub(super) fn takes_recompute_modules(r: &PublishedRun) -> bool {
    let s = r.source.to_ascii_lowercase();
    let nemo_before = names_nemo(&s) && release(&s).is_some_and(|c| c < (25, 4));
    let core_before = s.match_indices("r0.").any(|(i, _)| {
        let digits: String = s[i + 3..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse::<u32>().is_ok_and(|n| n < 12)
    });
    let dated_before = super::source_year(&r.source).is_some_and(|y| y < 2025);
    !(nemo_before || core_before || dated_before)
}

/// A parallel layout NeMo configures for one of its models: the defaults of the model's
/// recipe `trainer()` in `nemo/collections/llm/recipes/<name>.py` @ nemo-toolkit 2.3.0 (the
/// wheel), with the model identified by the recipe's config class
/// (`nemo/collections/llm/gpt/model/{base,llama,nemotron,mixtral}.py`). Only the recipes that
/// interleave (a `virtual_pipeline_parallelism` other than `None`). Megatron-Bridge's recipes
/// carry the same layouts (`megatron/bridge/recipes/gpt/gpt3_175b.py` L39-43,
/// `recipes/llama/llama3.py` L203-207, L315-319 @ megatron-bridge 0.2.0rc6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NemoRecipe {
    /// The recipe's module name.
    pub(super) name: &'static str,
    layers: u32,
    hidden: u32,
    heads: u32,
    /// The FFN width (an expert's, for a MoE model).
    ffn: u32,
    /// Routed experts (0: dense).
    experts: u32,
    tp: u32,
    pp: u32,
    cp: u32,
    /// Model chunks per pipeline rank.
    pub(super) vpp: u32,
}

const fn recipe(
    name: &'static str,
    [layers, hidden, heads, ffn, experts]: [u32; 5],
    [tp, pp, cp, vpp]: [u32; 4],
) -> NemoRecipe {
    NemoRecipe {
        name,
        layers,
        hidden,
        heads,
        ffn,
        experts,
        tp,
        pp,
        cp,
        vpp,
    }
}

/// nemo-toolkit 2.3.0's interleaving recipes: TP, PP, VPP and CP (`gpt3_175b.py` L61-65,
/// `llama3_70b.py` L62-66, `llama31_70b.py` L66-70, `llama31_405b.py` L66-70,
/// `nemotron3_22b.py` L61-65, `nemotron4_340b.py` L61-65, `mixtral_8x7b.py` L60-64,
/// `mixtral_8x22b.py` L60-64).
const NEMO_RECIPES: [NemoRecipe; 7] = [
    recipe("gpt3_175b", [96, 12288, 96, 49152, 0], [4, 8, 1, 6]),
    recipe("llama3_70b", [80, 8192, 64, 28672, 0], [4, 4, 2, 5]),
    recipe("llama31_405b", [126, 16384, 128, 53248, 0], [8, 8, 4, 2]),
    recipe("nemotron3_22b", [40, 6144, 48, 24576, 0], [2, 4, 1, 10]),
    recipe("nemotron4_340b", [96, 18432, 96, 73728, 0], [8, 12, 2, 8]),
    recipe("mixtral_8x7b", [32, 4096, 32, 14336, 8], [1, 4, 1, 8]),
    recipe("mixtral_8x22b", [56, 6144, 48, 16384, 8], [2, 4, 2, 14]),
];

impl NemoRecipe {
    /// The recipe behind row `r`'s pipeline: the row ran in NeMo (its source names NeMo, a
    /// NeMo container included), gives no `vpp` and its notes name no schedule, and its model
    /// and its TP, PP and CP degrees are a recipe's. Such a run kept the recipe's layout, so it
    /// kept its depth too: where NeMo's own tables give a recipe's TP, PP and CP they give its
    /// depth (NeMo 24.07's GPT-3 175B, Llama 3 70B and Nemotron-22B rows: 6, 5, 10).
    pub(super) fn of(
        r: &PublishedRun,
        model: &ModelSpec,
        [tp, pp, cp]: [u32; 3],
    ) -> Option<NemoRecipe> {
        let notes = r.notes.as_deref().unwrap_or("").to_ascii_lowercase();
        let names_schedule = ["interleav", "1f1b", "vpp", "virtual pipeline"]
            .iter()
            .any(|w| notes.contains(w));
        if !names_nemo(&r.source.to_ascii_lowercase())
            || r.vpp.is_some()
            || names_schedule
            || pp <= 1
        {
            return None;
        }
        let (ffn, experts) = model
            .moe
            .as_ref()
            .map_or((model.ffn_hidden, 0), |m| (m.expert_ffn_hidden, m.experts));
        let shape = [model.layers, model.hidden, model.heads, ffn, experts];
        NEMO_RECIPES.into_iter().find(|c| {
            [c.layers, c.hidden, c.heads, c.ffn, c.experts] == shape
                && [c.tp, c.pp, c.cp] == [tp, pp, cp]
        })
    }
}

/// The blocks on the first and last pipeline stages that NVIDIA's DeepSeek-V3 performance
/// configurations give a run of row `r` at `pp` stages without interleaving (`vpp` 1), where
/// `model` is DeepSeek-V3 (61 blocks, 256 routed experts) and the row says nothing of its
/// split. Its 61 blocks are laid out as if they were 64, 64/pp a stage, the three short on the
/// last stages:
/// - from container 25.07 (nemo-toolkit 2.4.0, 2.5.0, 2.6.0 `scripts/performance/llm/
///   pretrain_deepseek_v3.py` L89-97, L98-106, L97-105, `map_pp_vp_to_layout`; Megatron-Bridge's
///   recipe alike, `megatron/bridge/recipes/deepseek/deepseek_v3.py` @ megatron-bridge 0.3.1
///   L29-50, whose default is this row's PP 16): the first stage the embedding and 64/pp
///   blocks, the last 64/pp − 3 blocks with the MTP module and the loss, for PP 4, 8 and 16
///   (the scripts refuse other PP sizes);
/// - container 25.04 (nemo-toolkit 2.3.0, the same file L71-75): `num_layers_in_first_
///   pipeline_stage` 64/pp − 1 and `num_layers_in_last_pipeline_stage` 64/pp − 2.
///
/// The interleaved layouts (one block in the last model chunk) are not first/last counts, so
/// `None` for `vpp` > 1; `None` too for every other source, model or PP size.
pub(super) fn deepseek_v3_stage_blocks(
    r: &PublishedRun,
    model: &ModelSpec,
    pp: u32,
    vpp: u32,
) -> Option<(u32, u32)> {
    let s = r.source.to_ascii_lowercase();
    let notes = r.notes.as_deref().unwrap_or("").to_ascii_lowercase();
    let names_split = [
        "layout",
        "pipeline-num-layers",
        "pipeline stage",
        "account-for",
        "account_for",
    ]
    .iter()
    .any(|w| notes.contains(w));
    let deepseek_v3 = model.layers == 61
        && model.hidden == 7168
        && model.moe.as_ref().is_some_and(|m| m.experts == 256);
    if !(names_nemo(&s) && names_summary(&s) && deepseek_v3) || names_split || vpp != 1 {
        return None;
    }
    let container = release(&s)?;
    if container >= (25, 7) {
        [4, 8, 16].contains(&pp).then(|| (64 / pp, 64 / pp - 3))
    } else if container >= (25, 4) {
        (pp >= 2 && 64 % pp == 0).then(|| (64 / pp - 1, 64 / pp - 2))
    } else {
        None
    }
}

/// Source `s` (lower case) names a performance summary document (NeMo's
/// `performance_summary.md`, Megatron-Bridge's `performance-summary*.md`).
fn names_summary(s: &str) -> bool {
    s.contains("performance_summary") || s.contains("performance-summary")
}

/// Source `s` (lower case) names NeMo itself, not only a Nemotron model.
fn names_nemo(s: &str) -> bool {
    s.match_indices("nemo")
        .any(|(i, _)| !s[i..].starts_with("nemotron"))
}

/// The first `YY.MM` release in `s` (lower case): two digits, a dot, two digits, not part of
/// a longer number, YY in 20–39 and MM in 1–12.
fn release(s: &str) -> Option<(u32, u32)> {
    let b = s.as_bytes();
    (0..b.len().saturating_sub(4)).find_map(|i| {
        let w = &b[i..i + 5];
        let digit = |j: usize| w[j].is_ascii_digit();
        let bounded = (i == 0 || !(b[i - 1].is_ascii_digit() || b[i - 1] == b'.'))
            && b.get(i + 5)
                .is_none_or(|c| !(c.is_ascii_digit() || *c == b'.'));
        if !(digit(0) && digit(1) && w[2] == b'.' && digit(3) && digit(4) && bounded) {
            return None;
        }
        let n = |j: usize| u32::from(w[j] - b'0') * 10 + u32::from(w[j + 1] - b'0');
        let (y, m) = (n(0), n(3));
        ((20..40).contains(&y) && (1..=12).contains(&m)).then_some((y, m))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(source: &str) -> PublishedRun {
        PublishedRun {
            source: source.into(),
            ..PublishedRun::default()
        }
    }

    #[test]
    fn recompute_modules_are_megatron_core_0_12s() {
        // Sources of Megatron-Core 0.12 and later, or undated: the module sets.
        for source in [
            "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @4ab94df \
             (25.09 NeMo container section)",
            "NVIDIA/NeMo docs/source/performance/performance_summary.md (NeMo 25.04 container)",
            "yanring/Megatron-MoE-ModelZoo best_practice/qwen3/readme.md @798dfb5",
            "Megatron-Core r0.14.0 README",
        ] {
            assert!(takes_recompute_modules(&row(source)), "{source}");
        }
        // Older stacks: no `--recompute-modules`.
        for source in [
            "NVIDIA/NeMo docs/source/performance/performance_summary.md @9c5c5e97 \
             (NeMo 24.07 container, DGX-H100, FP8)",
            "NVIDIA/Megatron-LM README images/model_table.png (Megatron-Core r0.8.0)",
            "NVIDIA/Megatron-LM megatron/core/transformer/moe/README.md @0b981f9 (Aug 2024)",
        ] {
            assert!(!takes_recompute_modules(&row(source)), "{source}");
        }
    }

    #[test]
    fn the_release_is_read_from_the_source() {
        let bridge = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @4ab94df \
                      (25.09 NeMo container section)";
        assert_eq!(
            NemoPerfScripts::of(&row(bridge)),
            Some(NemoPerfScripts { container: (25, 9) })
        );
        let nemo = "NVIDIA/NeMo docs/source/performance/performance_summary.md @9c5c5e97 \
                    (NeMo 25.04 container, DGX-H100, FP8)";
        assert_eq!(
            NemoPerfScripts::of(&row(nemo)),
            Some(NemoPerfScripts { container: (25, 4) })
        );
        // NeMo 24.07 ran the launcher's configurations: not read.
        let old = "NVIDIA/NeMo docs/source/performance/performance_summary.md @9c5c5e97 \
                   (NeMo 24.07 container, DGX-H100, FP8)";
        assert_eq!(NemoPerfScripts::of(&row(old)), None);
        // A release not read or whose table the scripts did not make (25.11), a version of
        // something else, another document.
        let table = |v: &str| format!("NeMo {v} container, docs/performance_summary.md");
        for v in ["25.11", "26.02", "1.25.09"] {
            assert_eq!(NemoPerfScripts::of(&row(&table(v))), None, "{v}");
        }
        assert_eq!(
            NemoPerfScripts::of(&row("NeMo 25.09 container guide")),
            None
        );
        // A model zoo's scripts run in a NeMo container are not NeMo's performance table.
        let zoo = "yanring/Megatron-MoE-ModelZoo best_practice readme (NeMo 25.09 container)";
        assert_eq!(NemoPerfScripts::of(&row(zoo)), None);
        assert_eq!(release("v2.25.090"), None);
        assert_eq!(release("25.13 and 25.11"), Some((25, 11)));
    }

    #[test]
    fn each_release_reduces_and_dispatches_as_its_scripts() {
        let at = |y, m| NemoPerfScripts { container: (y, m) };
        assert!(!at(25, 4).reduces_grads_in_bf16(Precision::Bf16));
        assert!(at(25, 4).reduces_grads_in_bf16(Precision::Fp8Current));
        assert!(at(25, 7).reduces_grads_in_bf16(Precision::Bf16));
        assert!(!at(25, 4).deepseek_v3_h100_deepep());
        assert!(at(25, 9).deepseek_v3_h100_deepep());
    }
}
