//! Number formats and training precisions ([`Precision`]), and which of them a GPU trains in
//! ([`Gpu::check_training_precision`], [`Gpu::training_precision_for`]): the tensor cores it has
//! and the compute capability the frameworks' kernels ask for.

use crate::Gpu;

/// Numeric precision: a number format whose dense tensor-core peak a GPU lists (`fp32`, `tf32`,
/// `fp16`, `bf16`, `fp8`, `fp4`), and a model's training precision (`[training] precision`:
/// `bf16`, `fp16`, or a low-precision GEMM recipe of Transformer Engine as Megatron-Core names
/// them, `--fp8-recipe {delayed, tensorwise, blockwise, mxfp8}` and `--fp4-recipe nvfp4`,
/// frameworks.md §1.8).
///
/// The recipes differ in where they are accepted ([`Gpu::check_training_precision`]: MXFP8 and
/// NVFP4 need Blackwell tensor cores) and in the peak their GEMMs run at ([`Precision::gemm_format`]:
/// every FP8 recipe at the FP8 peak, NVFP4 at the FP4 peak). Their scaling overheads are not
/// told apart: each low-precision GEMM pays one memory-bound cast of its 16-bit input (autoplan-
/// evaluate's compute module), the only cast measured (`results/h100/fp8cast.csv`) being per-tensor
/// current scaling on an H100, which does not separate the recipes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Tf32,
    Fp16,
    Bf16,
    /// FP8 (E4M3 forward, E5M2 gradients) with per-tensor **delayed** scaling (scales from an
    /// amax history: Transformer Engine's `DelayedScaling`, Megatron's default
    /// `--fp8-recipe delayed`, frameworks.md §1.8); also the `fp8` peak key of a GPU.
    #[serde(alias = "fp8-delayed")]
    Fp8,
    /// FP8 with per-tensor **current** scaling (the amax of the tensor being cast: Megatron
    /// `--fp8-recipe tensorwise`, NeMo/Megatron-Bridge `fp8-cs`, torchtitan's Float8
    /// `tensorwise`; frameworks.md §1.8, §2).
    #[serde(rename = "fp8-current", alias = "fp8-tensorwise", alias = "fp8-cs")]
    Fp8Current,
    /// FP8 with **block** scaling as DeepSeek-V3 trained: 1×128 tiles for activations, 128×128
    /// blocks for weights (DeepSeek-V3 report §3.3.2; Megatron `--fp8-recipe blockwise`,
    /// frameworks.md §1.8). Runs on Hopper and Blackwell.
    #[serde(rename = "fp8-block", alias = "fp8-blockwise")]
    Fp8Block,
    /// MXFP8: FP8 elements with one E8M0 scale per 32 (Megatron `--fp8-recipe mxfp8`,
    /// Blackwell-only, frameworks.md §1.8).
    Mxfp8,
    /// NVFP4: FP4 (E2M1) GEMMs with block scales (Megatron `--fp4-format e2m1 --fp4-recipe
    /// nvfp4`, frameworks.md §1.8); Blackwell's FP4 tensor cores (hardware.md §1).
    Nvfp4,
    /// FP4 (E2M1): a GPU's `fp4` peak key only (not a training precision: train with `nvfp4`).
    Fp4,
}

/// The training precisions, with their file names (what [`Precision::name`] gives).
pub const TRAINING_PRECISIONS: [Precision; 7] = [
    Precision::Bf16,
    Precision::Fp16,
    Precision::Fp8,
    Precision::Fp8Current,
    Precision::Fp8Block,
    Precision::Mxfp8,
    Precision::Nvfp4,
];

impl Precision {
    /// The name files and flags use (`fp8`, `fp8-current`, `mxfp8`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
            Precision::Fp8Current => "fp8-current",
            Precision::Fp8Block => "fp8-block",
            Precision::Mxfp8 => "mxfp8",
            Precision::Nvfp4 => "nvfp4",
            Precision::Fp4 => "fp4",
        }
    }

    /// The number format a GEMM of this precision multiplies in, i.e. whose peak it runs at:
    /// FP8 for every FP8 recipe (MXFP8 included), FP4 for NVFP4, itself otherwise.
    pub fn gemm_format(self) -> Precision {
        match self {
            Precision::Fp8 | Precision::Fp8Current | Precision::Fp8Block | Precision::Mxfp8 => {
                Precision::Fp8
            }
            Precision::Nvfp4 | Precision::Fp4 => Precision::Fp4,
            p => p,
        }
    }

    /// A low-precision GEMM recipe (FP8 or FP4 GEMMs): Transformer Engine casts each GEMM's
    /// 16-bit input, and Megatron-Core keeps the attention core and the LM head in 16 bits.
    pub fn is_low_precision(self) -> bool {
        matches!(self.gemm_format(), Precision::Fp8 | Precision::Fp4)
    }

    /// A precision a model may train in (`[training] precision`, `--precision`): one of
    /// [`TRAINING_PRECISIONS`].
    pub fn is_training(self) -> bool {
        TRAINING_PRECISIONS.contains(&self)
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    /// A precision by its name or an alias the serde form accepts (`fp8-delayed`,
    /// `fp8-tensorwise`, `fp8-cs`, `fp8-blockwise`), case-insensitive.
    fn from_str(s: &str) -> Result<Precision, String> {
        let k = s.trim().to_ascii_lowercase();
        let p = match k.as_str() {
            "fp32" => Precision::Fp32,
            "tf32" => Precision::Tf32,
            "fp16" => Precision::Fp16,
            "bf16" => Precision::Bf16,
            "fp8" | "fp8-delayed" => Precision::Fp8,
            "fp8-current" | "fp8-tensorwise" | "fp8-cs" => Precision::Fp8Current,
            "fp8-block" | "fp8-blockwise" => Precision::Fp8Block,
            "mxfp8" => Precision::Mxfp8,
            "nvfp4" => Precision::Nvfp4,
            "fp4" => Precision::Fp4,
            _ => {
                let names: Vec<&str> = TRAINING_PRECISIONS.iter().map(|p| p.name()).collect();
                return Err(format!(
                    "unknown precision `{s}`: expected one of {}",
                    names.join(", ")
                ));
            }
        };
        Ok(p)
    }
}

impl Gpu {
    /// The precision a model whose file says `p` trains in here when no precision is asked
    /// for: `p` where the GPU can train in it ([`Gpu::check_training_precision`]), else its
    /// 16-bit format (BF16 where the file gives a `bf16` peak, else FP16) with the reason `p`
    /// cannot run — DeepSeek-V3's FP8 file on an A100 trains in BF16, as Megatron-Core would
    /// launch it there. A requested precision is checked, never replaced.
    ///
    /// ```
    /// use autoplan_cluster::{resolve_cluster, Precision};
    /// let a100 = resolve_cluster("a100x64").unwrap().gpu;
    /// let (p, why) = a100.training_precision_for(Precision::Fp8Block);
    /// assert_eq!(p, Precision::Bf16);
    /// assert!(why.unwrap().contains("FP8 tensor cores"));
    /// assert_eq!(a100.training_precision_for(Precision::Bf16), (Precision::Bf16, None));
    /// ```
    pub fn training_precision_for(&self, p: Precision) -> (Precision, Option<String>) {
        // The reason alone: the hint of `check_training_precision` is for one who asked.
        match self.refusal(p) {
            None => (p, None),
            Some((why, _)) => {
                let sixteen = if self.peak(Precision::Bf16).is_some() {
                    Precision::Bf16
                } else {
                    Precision::Fp16
                };
                (sixteen, Some(why))
            }
        }
    }

    /// Whether a model may train in `p` on this GPU: MXFP8 and NVFP4 need Blackwell's
    /// block-scaled tensor cores (Megatron: `mxfp8` is Blackwell-only, frameworks.md §1.8;
    /// FP4 is not on Hopper, hardware.md §1.1), and NVFP4 a GPU whose file gives its `fp4`
    /// peak. The FP8 recipes (`fp8`, `fp8-current`, `fp8-block`) need FP8 tensor cores, which
    /// a GPU whose file gives no `fp8` peak lacks (A100 and V100: their datasheets give none):
    /// torchtitan's Float8 needs SM89 or newer (frameworks.md §2.5) and Transformer Engine's
    /// FP8, Megatron-Core's, likewise refuses an older GPU ("Device compute capability 8.9 or
    /// higher required for FP8 execution", `check_fp8_support`, `pytorch/quantization.py` @
    /// transformer-engine 2.9.0 L47-57). BF16 needs BF16 tensor cores, which a GPU whose file
    /// gives no `bf16` peak lacks (V100: "no BF16 or TF32" in its datasheet): Transformer
    /// Engine's `is_bf16_available` says "BF16 support requires a GPU with compute capability
    /// 8.0 or higher" (`pytorch/utils.py` @ 2.9.0 L459-486), and PyTorch runs BF16 GEMMs there
    /// off the tensor cores. Block-scaled FP8 (`fp8-block`) needs compute capability 9.0
    /// (`check_fp8_block_scaling_support`, `pytorch/quantization.py` @ 2.9.0 L78-86): not on
    /// Ada (L40S). FP16 and FP32 run anywhere.
    ///
    /// ```
    /// use autoplan_cluster::{resolve_cluster, Precision};
    /// let h100 = resolve_cluster("dgx-h100").unwrap().gpu;
    /// assert!(h100.check_training_precision(Precision::Fp8Block).is_ok());
    /// assert!(h100.check_training_precision(Precision::Mxfp8).unwrap_err().contains("Blackwell"));
    /// let a100 = resolve_cluster("a100x64").unwrap().gpu;
    /// assert!(a100.check_training_precision(Precision::Fp8Current).unwrap_err().contains("FP8"));
    /// let b200 = resolve_cluster("b200x256").unwrap().gpu;
    /// assert!(b200.check_training_precision(Precision::Nvfp4).is_ok());
    /// ```
    pub fn check_training_precision(&self, p: Precision) -> Result<(), String> {
        match self.refusal(p) {
            None => Ok(()),
            Some((why, None)) => Err(why),
            Some((why, Some(hint))) => Err(format!("{why}; {hint}")),
        }
    }

    /// Why the GPU cannot train in `p`, and the hint to one who asked for it (none where no
    /// other precision is the answer); `None`: it can.
    fn refusal(&self, p: Precision) -> Option<(String, Option<&'static str>)> {
        if !p.is_training() {
            let names: Vec<&str> = TRAINING_PRECISIONS.iter().map(|p| p.name()).collect();
            return Some((
                format!(
                    "precision {p} is not a training precision ({})",
                    names.join(", ")
                ),
                None,
            ));
        }
        let block_scaled = matches!(p, Precision::Mxfp8 | Precision::Nvfp4);
        if block_scaled && !self.arch.is_blackwell() {
            return Some((
                format!(
                    "training precision {p} needs a Blackwell GPU (b200, gb200, gb300: its \
                     block-scaled tensor cores; Megatron-Core accepts `{}` only there), and {} is \
                     {:?}",
                    if p == Precision::Mxfp8 {
                        "--fp8-recipe mxfp8"
                    } else {
                        "--fp4-recipe nvfp4"
                    },
                    self.name,
                    self.arch
                ),
                Some("use fp8, fp8-current or fp8-block"),
            ));
        }
        let fp8_recipe = matches!(
            p,
            Precision::Fp8 | Precision::Fp8Current | Precision::Fp8Block
        );
        if fp8_recipe && self.peak(Precision::Fp8).is_none() {
            return Some((
                format!(
                    "training precision {p} needs FP8 tensor cores (SM89 or newer: Ada, Hopper, \
                     Blackwell), and {} has none (its file gives no gpu.tflops.fp8)",
                    self.name
                ),
                Some("use bf16 or fp16"),
            ));
        }
        if p == Precision::Fp8Block && !self.arch.at_least((9, 0)) {
            return Some((
                format!(
                    "training precision fp8-block needs compute capability 9.0 (Hopper or newer) \
                     for its block-scaled FP8 GEMMs (Transformer Engine: \"FP8 block scaled GEMM \
                     requires compute capability 9.0 or higher\"), and {} has {}",
                    self.name,
                    self.arch
                        .compute_capability()
                        .map_or(String::new(), |(a, b)| format!("{a}.{b}"))
                ),
                Some("use fp8 or fp8-current"),
            ));
        }
        if p == Precision::Bf16 && self.peak(Precision::Bf16).is_none() {
            return Some((
                format!(
                    "training precision bf16 needs BF16 tensor cores (compute capability 8.0: \
                     Ampere or newer), and {} has none (its file gives no gpu.tflops.bf16)",
                    self.name
                ),
                Some("use fp16"),
            ));
        }
        if p == Precision::Nvfp4 && self.peak(Precision::Fp4).is_none() {
            return Some((
                format!(
                    "training precision nvfp4 needs the GPU's FP4 peak, and {} gives none \
                     (gpu.tflops.fp4)",
                    self.name
                ),
                None,
            ));
        }
        None
    }
}
