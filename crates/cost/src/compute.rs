//! Compute time: GEMMs from their tile waves, memory-bound kernels from HBM bandwidth.
//!
//! GEMM form (wave quantisation, then a roofline):
//!
//! ```text
//! tiles    = ⌈m / tile_m⌉ · ⌈n / tile_n⌉                  output tiles, one per SM at a time
//! u        = m·n / (⌈tiles / sms⌉ · sms · tile_m · tile_n)  useful share of the waves run
//!            (1 where the architecture's library splits work over every SM: Hopper, below)
//! t_math   = F / (peak(precision) · r · eff_max · u) + latency   F = 2·m·n·k FLOPs
//! t_memory = (m·k + k·n + m·n) · bytes(precision) / (hbm_bw · hbm_eff(bytes))
//! t        = max(t_math, t_memory)
//! ```
//!
//! cuBLAS/CUTLASS kernels compute one `tile_m × tile_n` output tile per SM (thread-block
//! cluster) and run the tiles in waves of `sms`; a GEMM with fewer tiles than SMs, or a partial
//! last wave, leaves SMs idle for the wave's whole duration (NVIDIA, "Matrix Multiplication
//! Background User's Guide", §"Wave quantization"). That is what makes per-GPU GEMMs slow after
//! TP/EP sharding on V100 and A100 in this model: e.g. one expert's 512 tokens × 3072 features
//! on A100 fill 24 tiles of 108 SMs. On Hopper it is not what cuBLAS does: measured on an H100
//! (`tools/gpu/probe.py`, `results/h100/gemm.csv`), its `nvjet` kernels pick among many tiles
//! and split the reduction (stream-K) so that every SM stays busy — 144 tiles of 128×256, two
//! waves in the form above (u = 0.55), ran at the rate of 132 tiles, one wave; 512 × 4096 ×
//! 4096 (u = 0.48) at the rate of 8192³ — so Hopper prices u = 1 (`wave_quantization: false`).
//! Experts' GEMMs are priced as any GEMM, one per local expert at its own shape: the probe
//! found no wave loss for them either — 16 experts × 512 rows × 3072 × 4096 ran at 677 TF/s as
//! 16 cuBLAS calls and 729 as one grouped kernel (`results/h100/grouped.csv`), like a large
//! GEMM. What a MoE layer costs beyond its GEMMs (router, token permutation, per-expert
//! launches) is itemised by the evaluator (autoplan-evaluate's MoE work table).
//! `r` is the FP8 rate: FP8 GEMMs reach a smaller share of their peak than BF16 GEMMs of theirs
//! (measured on the H100: 0.86–0.91 of the 2× the peaks promise, `results/h100/ratio.csv`).
//! `latency` is a kernel's launch, prologue and epilogue plus the framework's gap per GEMM
//! (an isolated kernel's floor is 3–4 µs on the H100); skinny GEMMs (few rows, e.g. few tokens
//! per expert) become HBM-bound through the roofline.
//!
//! The attention core (FlashAttention-class fused kernel, [`attention_fwd_time`]) is priced as
//! the kernel runs it. FlashAttention-2 (Dao 2023, §3.2–3.3) and FlashAttention-3 (Shah et al.
//! 2024, §3.1) give each thread block (CTA) one `B×d` query tile of one (sequence, head) and
//! loop it over the key tiles it attends to; causal masking skips the key tiles above the
//! diagonal and runs the diagonal one whole (FA-2 §3.1.1). With `B = attn_tile`:
//!
//! ```text
//! work      = P · (q/B) · (k̄/B + edge)        key-tile steps of all CTAs (P problems = batch × heads)
//! longest   = k_max/B + edge                    the CTA with the most key tiles
//! steps     = max(work / sms + (k_max − k̄)/B, longest)  on the busiest SM
//! t_fwd     = steps · sms · 2·B²·(d_qk + d_v) / R(d) + latency
//! R(d)      = peak · gemm_eff_max · attn_rate · (1 + d₀/128) / (1 + d₀/d),   d = (d_qk + d_v)/2
//! t_bwd     = attn_bwd · (t_fwd − latency) + 3 · latency
//! ```
//!
//! `k̄` is the mean keys a query attends to (`s/2` causal, `s` full, `w − w²/2s` in a window
//! `w`), `k_max` the most any query tile attends to, `edge` the key tiles per query tile run
//! whole but masked in part (½ causal: the diagonal; `1 − w/2s` in a window: the diagonal
//! and, past the first `w` tokens, the window's lower edge; 0 full). The SMs take
//! the CTAs in grid order as they free up: uniform CTAs (full attention) fill the waves, while
//! CTAs whose work spreads from nothing to `k_max` (causal) leave the SMs finishing their last
//! ones over that spread, on average `k_max − k̄` after the mean (the term `(k_max − k̄)/B`),
//! and no kernel is shorter than its longest CTA. So short sequences, and few heads per GPU,
//! run below the asymptotic rate, causal ones more than full ones: measured on the H100 with
//! 8 heads, causal attention at 2K tokens took as long as full attention (32.5 µs, 30.4 µs;
//! `results/h100/attention_seq.csv`), at 32K half as long (3.6 ms, 7.3 ms). Both papers report
//! the rate rising with the sequence length (FA-2 §4.1, FA-3 §4.1, their figures of
//! TFLOP/s against sequence length at a fixed 16K tokens per batch). `R(d)`: the softmax's
//! exponentials and rescaling cost per score, whatever the head dim, while the matmuls cost
//! `∝ d` (FA-3 §3.1: the H100's 989 TFLOP/s of matmul against 3.9 TFLOP/s of special
//! functions), so the rate rises with the head dim with a half-point `d₀`; FA-3's figures
//! rank head dims 64 < 128 < 256 so. The backward runs three kernels (FA-2's preprocessing
//! `rowsum(dO∘O)`, the main kernel, the dQ conversion from its FP32 accumulator): three
//! latencies. Tile counts are continuous (`s/B`, not rounded): training sequences and their
//! CP chunks are multiples of the tile, and the rounded form would make the time a step
//! function of `s`.
//!
//! On Hopper the constants come from the H100 probe (`results/h100/attention.csv`,
//! `attention_seq.csv`: cuDNN's kernels through PyTorch's SDPA; `crates/cost/tests/
//! h100_probe.rs` recomputes them and reproduces the timings): `attn_rate` the median, over the
//! head-dim-128 rows at ≥ 4K tokens, of the rate the form needs to match each (relative to the
//! large BF16 GEMMs' rate), `attn_head_dim_half` (d₀) the value at which head dims 64 and 128
//! give the same median (≥ 8K tokens), `attn_bwd` the median backward ÷ forward at ≥ 8K
//! tokens. FlashAttention-2's kernels (sm80 code, what PyTorch SDPA's flash backend and the
//! `flash-attn` package run: [`ArchEfficiency::with_flash_attention_2`]) are priced on Hopper by
//! the same form at `fa2_rate` of that rate and with their own backward ratio `fa2_bwd`, both
//! measured against cuDNN's kernel at the one shape both ran (`results/h200/mla.csv`).
//! Ampere (A100) and Ada (L40S), not measured here, take Hopper's three as a prior,
//! as Blackwell does: FlashAttention-2 reports its kernels at 50–73% of the A100's peak
//! (Dao 2023, abstract and §4.1), 0.73 ÷ 0.82 = 0.89 of the A100's fitted GEMM rate at best —
//! Hopper's measured 0.90 (0.738 of the peak) — where `attn_rate` 1 priced them at the GEMM
//! rate, 0.82 of the peak, far above that paper's best (Ada runs the same sm80 kernels). Elsewhere (V100, `Other`): `attn_rate` 1, d₀
//! 0 (no head-dim effect), and FlashAttention-2's FLOP ratio 2.5 for `attn_bwd` (Dao 2023,
//! §3.1.2); the tile form holds on every architecture with its SM count.
//!
//! Memory-bound kernels (norms, activations, softmax, dropout, optimizer update):
//! `t = bytes / (hbm_bw · hbm_eff(bytes))`, `hbm_eff(b) = hbm_eff_max · (1 − exp(−b / hbm_half))`.
//!
//! All per-architecture constants live in [`ARCH_TABLE`], the one place to recalibrate.
//! The attention call's shape ([`AttnCall`]: causal, full or windowed, how a CP rank splits its
//! sequence into calls) is the caller's.

use autoplan_cluster::{Gpu, GpuArch, Precision};

/// Efficiency constants of one GPU architecture.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArchEfficiency {
    pub arch: GpuArch,
    /// Fraction of dense peak a GEMM reaches on the SMs it keeps busy.
    pub gemm_eff_max: f64,
    /// Streaming multiprocessors (A100 108, H100/H800/H200 SXM 132, V100 80, L40S 142).
    pub sms: u32,
    /// Output tile of one SM in cuBLAS's large-GEMM kernels (rows × columns).
    pub tile_m: u32,
    pub tile_n: u32,
    /// Whether a GEMM pays for its partial waves of `tile_m × tile_n` tiles (module docs):
    /// false where the library keeps every SM busy whatever the shape (measured on Hopper).
    pub wave_quantization: bool,
    /// FP8 GEMM rate as a fraction of BF16's times the FP8 : BF16 peak ratio (1: FP8 reaches
    /// the same share of its peak as BF16 of its own). Only where the GPU has an FP8 peak.
    pub fp8_rate: f64,
    /// Block-scaled FP8 GEMMs' rate (1×128 activation tiles, 128×128 weight blocks: DeepSeek-V3
    /// report §3.3.2, Megatron `--fp8-recipe blockwise`) as a fraction of per-tensor-scaled FP8's
    /// (the kernel reads and applies a scale per 128-wide K block of each tile); 1 where not
    /// measured.
    pub fp8_block_rate: f64,
    /// The attention core's forward rate at head dim 128 on long sequences (the tile losses
    /// of the module docs aside) as a fraction of a large GEMM's on the same GPU
    /// (FlashAttention-class kernels, BF16): 1 where not measured.
    pub attn_rate: f64,
    /// The attention core's backward math time over its forward's: FlashAttention-2's 5
    /// matmuls of the forward's 2 give 2.5 (Dao 2023, §3.1.2) where not measured.
    pub attn_bwd: f64,
    /// Query and key tile of the attention kernel (rows): FlashAttention-2/3 and cuDNN run
    /// 128 × 128 at head dim 128 (FA-2 §3.3 tunes {64, 128}²; FA-3 §4 uses 128 × 128).
    pub attn_tile: u32,
    /// Head dim `d₀` at which the softmax's per-score cost equals the matmuls' (module docs,
    /// `R(d)`); 0: the rate does not depend on the head dim (not measured).
    pub attn_head_dim_half: f64,
    /// FlashAttention-2's forward rate as a fraction of the rate `attn_rate` prices, at the same
    /// shape: FlashAttention-2's kernels are sm80 code (`mma.sync`, none of Hopper's `wgmma` or
    /// TMA), what PyTorch SDPA's flash backend and the `flash-attn` 2.x package run on any GPU
    /// (`AttentionKernel::FlashAttention2`, a framework's choice). 1 where FlashAttention-2 is
    /// the architecture's own fused kernel (Ampere, Ada: `attn_rate` is its) or nothing was
    /// measured.
    pub fa2_rate: f64,
    /// FlashAttention-2's backward math time over its forward's (as `attn_bwd`).
    pub fa2_bwd: f64,
    /// Seconds a GEMM kernel costs beyond its math: launch, prologue, epilogue.
    pub gemm_latency: f64,
    /// Asymptotic fraction of HBM bandwidth a streaming kernel reaches.
    pub hbm_eff_max: f64,
    /// Bytes at which a streaming kernel reaches 63% of `hbm_eff_max`.
    pub hbm_bytes_half: f64,
    /// The architecture whose published runs these constants were fitted on (itself, or H100
    /// for H800 and H200, the same silicon); `None`: not fitted, no measured run to fit on.
    pub fitted_on: Option<GpuArch>,
}

/// The Hopper fit (H100 rows), shared by H800 and H200.
const HOPPER: ArchEfficiency = ArchEfficiency {
    arch: GpuArch::H100,
    gemm_eff_max: 0.69,
    sms: 132,
    tile_m: 128,
    tile_n: 256,
    wave_quantization: false,
    fp8_rate: 0.89,
    // Median over eight expert and dense shapes of per-tensor ÷ block-scaled FP8 time through
    // cuBLAS (`torch._scaled_mm`, the library Transformer Engine's blockwise recipe calls on
    // Hopper), 0.86–0.94: `results/h200/fp8block.csv`, `crates/cost/tests/h100_probe.rs`.
    fp8_block_rate: 0.92,
    attn_rate: 0.90,
    attn_bwd: 2.78,
    attn_tile: 128,
    attn_head_dim_half: 58.0,
    // SDPA's flash backend (FlashAttention-2) against cuDNN's kernel at the same causal shape
    // on an H200 (`results/h200/mla.csv`, the rows with V padded to 192, the one head dim both
    // ran: 16 and 128 heads, 4K and 16K tokens): cuDNN's forward time over FlashAttention-2's
    // 0.478, 0.468, 0.508 (median 0.478), FlashAttention-2's backward over its forward 3.30,
    // 2.83, 2.92 (median 2.92); `crates/cost/tests/h100_probe.rs` recomputes both. FA-3's
    // abstract puts FlashAttention-2 at 35% of the H100's peak; these ran at 0.24-0.31 of it
    // forward.
    fa2_rate: 0.478,
    fa2_bwd: 2.92,
    gemm_latency: 27.5e-6,
    hbm_eff_max: 0.50,
    hbm_bytes_half: 1.6e6,
    fitted_on: Some(GpuArch::H100),
};

/// Blackwell's prior: Hopper's calibrated set (see [`ARCH_TABLE`]), not fitted on Blackwell.
/// `sms` stays Hopper's 132 (only the tile-wave form reads it, which Blackwell's prior does not
/// use; no Blackwell SM count is in the reference notes); `hbm_bytes_half` is scaled per GPU with its HBM bandwidth, as
/// H200's is.
pub const BLACKWELL_PRIOR: ArchEfficiency = ArchEfficiency {
    arch: GpuArch::B200,
    fitted_on: None,
    ..HOPPER
};

/// The per-architecture table: ONE set per GPU type, no per-model or per-run constant.
///
/// - `sms`, `tile_m × tile_n` are facts of the silicon and of cuBLAS's kernels (Ampere/Hopper
///   128×256, Volta 128×128). `wave_quantization` and `fp8_rate` of Hopper were measured on an
///   H100 (`tools/gpu/probe.py`; `results/h100/`, whose README says how): cuBLAS's GEMMs lose
///   nothing to partial waves there, and its FP8 GEMMs run at 0.89 (median of five large
///   shapes, 0.86–0.91) of twice its BF16 rate; so are `attn_rate`, `attn_bwd` and
///   `attn_head_dim_half` (module docs). `fp8_block_rate` was measured on an H200 (the same
///   silicon and software; `results/h200/`), where the H100's other constants were checked
///   out of sample too (`crates/cost/tests/h100_probe.rs`). V100, A100 and L40S were not measured (no such GPU
///   lent): they keep the tile-wave form and `fp8_rate` 1; A100 and L40S take Hopper's
///   attention constants as a prior (module docs), V100 `attn_rate` 1, `attn_bwd` 2.5, no
///   head-dim effect; `attn_tile` is the kernels' 128 everywhere.
/// - `gemm_eff_max`, `gemm_latency`, `hbm_eff_max` of V100, A100 and H100 (H800, H200: the same
///   Hopper silicon and software stack, not fitted separately) are the minimum-MAPE points of
///   `autoplan validate --fit v100|a100|h100` over `data/published_runs.csv`
///   (procedure in docs/calibration.md, "Compute"), every link and collective constant and the
///   measured Hopper constants fixed beforehand. `eff_max` is an end-to-end
///   efficiency: it absorbs what the analytical step does not itemise (fused epilogues,
///   framework overhead), hence at or below cuBLAS's isolated rate (H100: 0.69 against 0.71 of
///   the BF16 peak on large GEMMs, `results/h100/ratio.csv`).
///   Fits (`--fit`, 2026-11): V100 4 rows MAPE 2.3%, A100 26 rows 3.9%, H100 25 rows 4.4%
///   (refitted when the H100 measurements replaced Hopper's tile waves for dense GEMMs: from
///   0.66, 25 µs, MAPE 5.1%, to 0.68, 30 µs, 4.5% with `fp8_rate` (4.8% with it set to 1;
///   both `--fit h100` at commit 659b048), then 0.69, 27.5 µs, 4.43% with the attention
///   constants). The latency grid stops at 30 µs (a launch
///   plus the framework's gap per GEMM); V100 and A100 sit on that edge, where MAPE is flat
///   (A100 3.86% at 27.5 µs), and H100's MAPE is flat across it (4.44% at 0.69, 30 µs);
///   V100's `hbm_eff_max` (0.90) and H100's (0.50) sit on the edges of the 0.50–0.90 grid too.
/// - L40S, Other: not fitted (no usable measured row; `fitted_on: None`, which `evaluate` and
///   `search` print as a caveat); `eff_max` as for large cuBLAS GEMMs, latency as fitted.
/// - Blackwell (B200, GB200, GB300): no run on them is measured in this repository, and no
///   published row is fitted on (that would be fitting to the rows it is then judged by). Their
///   prior is Hopper's calibrated set ([`BLACKWELL_PRIOR`]): the same vendor stack (cuBLAS,
///   Transformer Engine, Megatron-Core) on the next tensor-core generation, so the fractions
///   of peak Hopper reaches are the nearest measured evidence; its `fp8_rate` applies to FP8
///   and FP4 GEMMs alike. `fitted_on: None`: the CLI prints the caveat.
pub const ARCH_TABLE: [ArchEfficiency; 10] = [
    ArchEfficiency {
        arch: GpuArch::V100,
        gemm_eff_max: 0.78,
        sms: 80,
        tile_m: 128,
        tile_n: 128,
        wave_quantization: true,
        fp8_rate: 1.0,
        fp8_block_rate: 1.0,
        attn_rate: 1.0,
        attn_bwd: 2.5,
        attn_tile: 128,
        attn_head_dim_half: 0.0,
        fa2_rate: 1.0,
        fa2_bwd: 2.5,
        gemm_latency: 30e-6,
        hbm_eff_max: 0.90,
        hbm_bytes_half: 1.0e6,
        fitted_on: Some(GpuArch::V100),
    },
    ArchEfficiency {
        arch: GpuArch::A100,
        gemm_eff_max: 0.82,
        sms: 108,
        tile_m: 128,
        tile_n: 256,
        wave_quantization: true,
        fp8_rate: 1.0,
        fp8_block_rate: 1.0,
        // FlashAttention on Ampere: Hopper's measured constants as a prior (module docs).
        attn_rate: HOPPER.attn_rate,
        attn_bwd: HOPPER.attn_bwd,
        attn_tile: 128,
        attn_head_dim_half: HOPPER.attn_head_dim_half,
        // FlashAttention-2 is this architecture's own kernel (its `attn_rate`).
        fa2_rate: 1.0,
        fa2_bwd: HOPPER.attn_bwd,
        gemm_latency: 30e-6,
        hbm_eff_max: 0.60,
        hbm_bytes_half: 1.0e6,
        fitted_on: Some(GpuArch::A100),
    },
    HOPPER,
    // H800: the H100 SXM5 compute die and HBM3 (its NVLink is cut, not its SMs).
    ArchEfficiency {
        arch: GpuArch::H800,
        ..HOPPER
    },
    // H200: the same die with HBM3e; `hbm_bytes_half` scaled with its bandwidth (4.8/3.35).
    ArchEfficiency {
        arch: GpuArch::H200,
        hbm_bytes_half: 2.3e6,
        ..HOPPER
    },
    // Blackwell: Hopper's constants as a prior (above), HBM half-width scaled with bandwidth.
    ArchEfficiency {
        arch: GpuArch::B200,
        hbm_bytes_half: 1.6e6 * 7.7 / 3.35,
        ..BLACKWELL_PRIOR
    },
    ArchEfficiency {
        arch: GpuArch::Gb200,
        hbm_bytes_half: 1.6e6 * 8.0 / 3.35,
        ..BLACKWELL_PRIOR
    },
    ArchEfficiency {
        arch: GpuArch::Gb300,
        hbm_bytes_half: 1.6e6 * 8.0 / 3.35,
        ..BLACKWELL_PRIOR
    },
    ArchEfficiency {
        arch: GpuArch::L40s,
        gemm_eff_max: 0.80,
        sms: 142,
        tile_m: 128,
        tile_n: 256,
        wave_quantization: true,
        fp8_rate: 1.0,
        fp8_block_rate: 1.0,
        // FlashAttention-2's sm80 kernels, as on Ampere: Hopper's constants as a prior.
        attn_rate: HOPPER.attn_rate,
        attn_bwd: HOPPER.attn_bwd,
        attn_tile: 128,
        attn_head_dim_half: HOPPER.attn_head_dim_half,
        // FlashAttention-2 is this architecture's own kernel (its `attn_rate`).
        fa2_rate: 1.0,
        fa2_bwd: HOPPER.attn_bwd,
        gemm_latency: 30e-6,
        hbm_eff_max: 0.85,
        hbm_bytes_half: 0.6e6,
        fitted_on: None,
    },
    ArchEfficiency {
        arch: GpuArch::Other,
        gemm_eff_max: 0.80,
        sms: 108,
        tile_m: 128,
        tile_n: 256,
        wave_quantization: true,
        fp8_rate: 1.0,
        fp8_block_rate: 1.0,
        attn_rate: 1.0,
        attn_bwd: 2.5,
        attn_tile: 128,
        attn_head_dim_half: 0.0,
        fa2_rate: 1.0,
        fa2_bwd: 2.5,
        gemm_latency: 30e-6,
        hbm_eff_max: 0.85,
        hbm_bytes_half: 1.0e6,
        fitted_on: None,
    },
];

impl ArchEfficiency {
    /// These constants with the attention core run by FlashAttention-2's kernels (`fa2_rate`,
    /// `fa2_bwd`): the same on an architecture whose own kernel it is.
    pub fn with_flash_attention_2(&self) -> ArchEfficiency {
        ArchEfficiency {
            attn_rate: self.attn_rate * self.fa2_rate,
            attn_bwd: self.fa2_bwd,
            ..*self
        }
    }
}

/// The efficiency constants of `arch`.
pub fn arch_efficiency(arch: GpuArch) -> &'static ArchEfficiency {
    ARCH_TABLE
        .iter()
        .find(|e| e.arch == arch)
        .unwrap_or(&ARCH_TABLE[ARCH_TABLE.len() - 1])
}

/// Bytes per element a GEMM of precision `p` reads: of its number format
/// ([`Precision::gemm_format`]); block scales (one per 32 or 128 elements) are not counted.
pub fn bytes_per_element(p: Precision) -> f64 {
    match p.gemm_format() {
        Precision::Fp32 | Precision::Tf32 => 4.0,
        Precision::Fp16 | Precision::Bf16 => 2.0,
        Precision::Fp4 => 0.5,
        _ => 1.0,
    }
}

/// Dense peak FLOP/s at `p` (at its [`Precision::gemm_format`]: every FP8 recipe at the FP8
/// peak, NVFP4 at the FP4 peak). A precision the GPU lacks runs at the fastest wider one it has
/// (FP8 on A100 runs as BF16/FP16; BF16 on V100 as FP16); a GPU with none of them yields 0.
pub fn peak_flops(gpu: &Gpu, p: Precision) -> f64 {
    let p = p.gemm_format();
    let order: &[Precision] = match p {
        Precision::Fp4 => &[
            Precision::Fp4,
            Precision::Fp8,
            Precision::Bf16,
            Precision::Fp16,
            Precision::Tf32,
            Precision::Fp32,
        ],
        Precision::Fp8 => &[
            Precision::Fp8,
            Precision::Bf16,
            Precision::Fp16,
            Precision::Tf32,
            Precision::Fp32,
        ],
        Precision::Bf16 | Precision::Fp16 => &[
            p,
            Precision::Bf16,
            Precision::Fp16,
            Precision::Tf32,
            Precision::Fp32,
        ],
        Precision::Tf32 => &[Precision::Tf32, Precision::Fp32],
        _ => &[Precision::Fp32],
    };
    order.iter().find_map(|&q| gpu.peak(q)).unwrap_or(0.0)
}

/// The rate a GEMM's math is priced from before `gemm_eff_max`: the dense peak at `p`
/// ([`peak_flops`]), times `fp8_rate` for a low-precision GEMM (FP8 recipes, NVFP4) on a GPU
/// with a peak of its format, and `fp8_block_rate` more under block scaling (`fp8-block`).
pub fn gemm_peak(gpu: &Gpu, e: &ArchEfficiency, p: Precision) -> f64 {
    let peak = peak_flops(gpu, p);
    let f = p.gemm_format();
    if matches!(f, Precision::Fp8 | Precision::Fp4) && gpu.peak(f).is_some() {
        let block = if p == Precision::Fp8Block {
            e.fp8_block_rate
        } else {
            1.0
        };
        peak * e.fp8_rate * block
    } else {
        peak
    }
}

/// Useful share of the tile-waves an `m × n` output runs (module docs): `m·n` over the
/// `waves · sms · tile_m · tile_n` outputs the SMs compute, padded tiles and idle SMs included;
/// 1 where the architecture has no `wave_quantization`. 1 for whole tiles in whole waves; the GEMM's time `F / (peak · eff_max · u)` is then
/// `waves` times one tile's work, so it never falls as `m`, `n` or `k` grow.
pub fn wave_utilisation(e: &ArchEfficiency, m: f64, n: f64) -> f64 {
    if !e.wave_quantization {
        return 1.0;
    }
    let (tm, tn) = (e.tile_m.max(1) as f64, e.tile_n.max(1) as f64);
    let (m, n) = (m.max(1.0), n.max(1.0));
    let tiles = ceil_pos(m / tm) * ceil_pos(n / tn);
    let sms = e.sms.max(1) as f64;
    (m * n) / (ceil_pos(tiles / sms) * sms * tm * tn)
}

/// `⌈x⌉` for `0 ≤ x < 2⁶³` without a libm call (x86-64's baseline has no rounding
/// instruction, and `f64::ceil` is a function call in the evaluator's hot loop).
#[inline]
fn ceil_pos(x: f64) -> f64 {
    let t = x as u64 as f64;
    if t < x {
        t + 1.0
    } else {
        t
    }
}

/// [`gemm_time_with`] with everything that depends only on the GPU, its constants and the
/// precision resolved once (the evaluator's hot loop prices thousands of GEMMs per second).
/// `time` returns exactly what `gemm_time_with` does.
#[derive(Debug, Clone, Copy)]
pub struct GemmPricer {
    e: ArchEfficiency,
    /// `gemm_peak(precision) · gemm_eff_max`.
    peak_eff: f64,
    bytes_per_element: f64,
    hbm_bw: f64,
}

impl GemmPricer {
    pub fn new(gpu: &Gpu, e: &ArchEfficiency, precision: Precision) -> GemmPricer {
        GemmPricer {
            e: *e,
            peak_eff: gemm_peak(gpu, e, precision) * e.gemm_eff_max,
            bytes_per_element: bytes_per_element(precision),
            hbm_bw: gpu.hbm_bw,
        }
    }

    /// Seconds of one GEMM (see [`gemm_time`]).
    #[inline]
    pub fn time(&self, flops: f64, m: f64, n: f64, k: f64) -> f64 {
        if flops <= 0.0 {
            return 0.0;
        }
        let e = &self.e;
        let t_math = if self.peak_eff > 0.0 && !e.wave_quantization {
            flops / self.peak_eff + e.gemm_latency
        } else if self.peak_eff > 0.0 {
            let (tm, tn) = (e.tile_m.max(1) as f64, e.tile_n.max(1) as f64);
            let (mm, nn) = (m.max(1.0), n.max(1.0));
            let tiles = ceil_pos(mm / tm) * ceil_pos(nn / tn);
            let sms = e.sms.max(1) as f64;
            let u = (mm * nn) / (ceil_pos(tiles / sms) * sms * tm * tn);
            flops / (self.peak_eff * u) + e.gemm_latency
        } else {
            f64::INFINITY
        };
        let bytes = (m * k + k * n + m * n).max(0.0) * self.bytes_per_element;
        if bytes <= 0.0 {
            return t_math;
        }
        // Past 10 half-widths `hbm_eff ≥ hbm_eff_max·(1 − e⁻¹⁰)`, so the memory time is below
        // `bytes / (bw · hbm_eff_max) · 1.0001`: when the math time exceeds that, it is the max
        // and the exponential need not be evaluated (the same value either way).
        let floor = bytes / (self.hbm_bw * e.hbm_eff_max);
        if bytes >= 10.0 * e.hbm_bytes_half && t_math >= floor * 1.0001 {
            return t_math;
        }
        t_math.max(bytes / (self.hbm_bw * hbm_efficiency(e, bytes)))
    }
}

/// Seconds of one GEMM of `flops` FLOPs (normally 2·m·n·k) with an `m×k` by `k×n` shape on one
/// GPU, at `precision`. See the module docs for the form. Infinite where the GPU has no
/// matrix throughput at all.
pub fn gemm_time(gpu: &Gpu, flops: f64, m: f64, n: f64, k: f64, precision: Precision) -> f64 {
    gemm_time_with(gpu, arch_efficiency(gpu.arch), flops, m, n, k, precision)
}

/// [`gemm_time`] under the efficiency constants `e` (a caller that overrides [`ARCH_TABLE`],
/// e.g. `autoplan validate --fit`).
pub fn gemm_time_with(
    gpu: &Gpu,
    e: &ArchEfficiency,
    flops: f64,
    m: f64,
    n: f64,
    k: f64,
    precision: Precision,
) -> f64 {
    GemmPricer::new(gpu, e, precision).time(flops, m, n, k)
}

fn hbm_efficiency(e: &ArchEfficiency, bytes: f64) -> f64 {
    e.hbm_eff_max * (1.0 - (-bytes / e.hbm_bytes_half).exp())
}

/// Seconds of a memory-bound kernel that reads and writes `bytes` in total on one GPU.
pub fn memory_bound_time(gpu: &Gpu, bytes: f64) -> f64 {
    memory_bound_time_with(gpu, arch_efficiency(gpu.arch), bytes)
}

/// [`memory_bound_time`] under the efficiency constants `e`.
pub fn memory_bound_time_with(gpu: &Gpu, e: &ArchEfficiency, bytes: f64) -> f64 {
    if bytes <= 0.0 {
        return 0.0;
    }
    bytes / (gpu.hbm_bw * hbm_efficiency(e, bytes))
}

/// One attention-core kernel call on one GPU (module docs): `problems` independent
/// (sequence, head) pairs of `queries` query rows each, attending on average to `keys` keys
/// and at most `max_keys` (per query tile), with `edge` partly masked key tiles run whole per
/// query tile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttnCall {
    /// Sequences × query heads on this GPU.
    pub problems: f64,
    /// Query rows per problem.
    pub queries: f64,
    /// Mean keys per query: `s/2` causal, `s` full, `w − w²/2s` in a window `w < s`.
    pub keys: f64,
    /// Keys of the query tile that attends to the most (causal and full: `s`; window: `w`).
    pub max_keys: f64,
    /// Key tiles per query tile computed whole but masked in part: ½ causal (the diagonal
    /// tile), `1 − w/2s` in a window (the diagonal, and the lower edge past the first `w`
    /// tokens), 0 full.
    pub edge: f64,
    /// Query/key and value head dims (MLA: 192 and 128).
    pub d_qk: f64,
    pub d_v: f64,
}

impl AttnCall {
    /// A causal self-attention call over `seq` tokens.
    pub fn causal(problems: f64, seq: f64, d_qk: f64, d_v: f64) -> AttnCall {
        AttnCall {
            problems,
            queries: seq,
            keys: seq / 2.0,
            max_keys: seq,
            edge: 0.5,
            d_qk,
            d_v,
        }
    }

    /// A full (unmasked) call: `queries` rows against `keys` keys each.
    pub fn full(problems: f64, queries: f64, keys: f64, d_qk: f64, d_v: f64) -> AttnCall {
        AttnCall {
            problems,
            queries,
            keys,
            max_keys: keys,
            edge: 0.0,
            d_qk,
            d_v,
        }
    }

    /// The FLOPs the call is credited with: `2·(d_qk + d_v)` per (query, key) pair attended.
    pub fn flops(&self) -> f64 {
        2.0 * self.problems * self.queries * self.keys * (self.d_qk + self.d_v)
    }
}

/// The math seconds of `call`'s forward (module docs: `t_fwd − latency`); infinite where the
/// GPU has no matrix throughput.
fn attention_math(gpu: &Gpu, e: &ArchEfficiency, call: &AttnCall, precision: Precision) -> f64 {
    if call.problems <= 0.0 || call.queries <= 0.0 || call.keys <= 0.0 {
        return 0.0;
    }
    let b = e.attn_tile.max(1) as f64;
    let sms = e.sms.max(1) as f64;
    let d = 0.5 * (call.d_qk + call.d_v);
    let d0 = e.attn_head_dim_half.max(0.0);
    let head_dim = (1.0 + d0 / 128.0) / (1.0 + d0 / d.max(1.0));
    let rate = peak_flops(gpu, precision) * e.gemm_eff_max * e.attn_rate * head_dim;
    if rate <= 0.0 {
        return f64::INFINITY;
    }
    let max_keys = call.max_keys.max(call.keys);
    let work = call.problems * call.queries / b * (call.keys / b + call.edge);
    let longest = max_keys / b + call.edge;
    let steps = (work / sms + (max_keys - call.keys) / b).max(longest);
    steps * sms * 2.0 * b * b * (call.d_qk + call.d_v) / rate
}

/// Seconds of one attention-core forward call on one GPU, as one fused kernel (module docs);
/// `bytes` its HBM traffic (Q, K, V, O), a floor.
pub fn attention_fwd_time(gpu: &Gpu, call: &AttnCall, bytes: f64, precision: Precision) -> f64 {
    attention_fwd_time_with(gpu, arch_efficiency(gpu.arch), call, bytes, precision)
}

/// [`attention_fwd_time`] under the efficiency constants `e`.
pub fn attention_fwd_time_with(
    gpu: &Gpu,
    e: &ArchEfficiency,
    call: &AttnCall,
    bytes: f64,
    precision: Precision,
) -> f64 {
    let math = attention_math(gpu, e, call, precision);
    if math <= 0.0 {
        return memory_bound_time_with(gpu, e, bytes);
    }
    (math + e.gemm_latency).max(memory_bound_time_with(gpu, e, bytes))
}

/// Seconds of the backward of one attention-core call (module docs: `attn_bwd` times the
/// forward's math, three kernels' latency); `bytes` the forward's HBM traffic (the backward
/// reads Q, K, V, O, dO and writes dQ, dK, dV: twice it, a floor).
pub fn attention_bwd_time(gpu: &Gpu, call: &AttnCall, bytes: f64, precision: Precision) -> f64 {
    attention_bwd_time_with(gpu, arch_efficiency(gpu.arch), call, bytes, precision)
}

/// [`attention_bwd_time`] under the efficiency constants `e`.
pub fn attention_bwd_time_with(
    gpu: &Gpu,
    e: &ArchEfficiency,
    call: &AttnCall,
    bytes: f64,
    precision: Precision,
) -> f64 {
    let math = attention_math(gpu, e, call, precision);
    let floor = memory_bound_time_with(gpu, e, 2.0 * bytes);
    if math <= 0.0 {
        return floor;
    }
    (e.attn_bwd * math + 3.0 * e.gemm_latency).max(floor)
}

/// Seconds of an unfused attention core's batched GEMMs (QKᵀ and softmax·V through cuBLAS) on
/// one GPU: `flops` at the GEMM rate of full waves plus one kernel's latency, `bytes` of HBM
/// traffic a floor. The backward and the stored softmax are the caller's.
pub fn attention_core_time(gpu: &Gpu, flops: f64, bytes: f64, precision: Precision) -> f64 {
    attention_core_time_with(gpu, arch_efficiency(gpu.arch), flops, bytes, precision)
}

/// [`attention_core_time`] under the efficiency constants `e`.
pub fn attention_core_time_with(
    gpu: &Gpu,
    e: &ArchEfficiency,
    flops: f64,
    bytes: f64,
    precision: Precision,
) -> f64 {
    if flops <= 0.0 {
        return memory_bound_time_with(gpu, e, bytes);
    }
    let peak = peak_flops(gpu, precision) * e.gemm_eff_max;
    let t_math = if peak > 0.0 {
        flops / peak + e.gemm_latency
    } else {
        f64::INFINITY
    };
    t_math.max(memory_bound_time_with(gpu, e, bytes))
}

#[cfg(test)]
mod tests;
