//! Compute time: GEMMs with a shape-dependent efficiency, memory-bound kernels from HBM
//! bandwidth.
//!
//! GEMM efficiency form (saturation in the work size, then a roofline):
//!
//! ```text
//! eff(F)   = eff_max · (1 − exp(−F / flops_half))          F = FLOPs of one GEMM on one GPU
//! t_math   = F / (peak(precision) · eff(F))
//! t_memory = (m·k + k·n + m·n) · bytes(precision) / (hbm_bw · hbm_eff(bytes))
//! t        = max(t_math, t_memory)
//! ```
//!
//! Small per-GPU GEMMs (after TP/EP sharding) fill fewer SMs and waves, so `eff` falls; skinny
//! ones (small `m`, e.g. decode-like or few tokens per expert) become HBM-bound through the
//! roofline: arithmetic intensity `F / bytes` below `peak / hbm_bw`. As F → 0 the time tends
//! to `flops_half / (peak · eff_max)`, a launch-like floor (≈3 µs on A100).
//!
//! Memory-bound kernels (norms, activations, softmax, dropout, optimizer update):
//! `t = bytes / (hbm_bw · hbm_eff(bytes))`, `hbm_eff(b) = hbm_eff_max · (1 − exp(−b / hbm_half))`.
//!
//! All per-architecture constants live in [`ARCH_TABLE`], the one place to recalibrate.
//! Attention's causal factor (≈½ of the score/value FLOPs) is the caller's: pass the FLOPs
//! actually executed to [`attention_core_time`].

use autoplan_cluster::{Gpu, GpuArch, Precision};

/// Efficiency constants of one GPU architecture.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArchEfficiency {
    pub arch: GpuArch,
    /// Asymptotic fraction of dense peak a large GEMM reaches.
    pub gemm_eff_max: f64,
    /// FLOPs at which a GEMM reaches (1 − 1/e) ≈ 63% of `gemm_eff_max`.
    pub gemm_flops_half: f64,
    /// Asymptotic fraction of HBM bandwidth a streaming kernel reaches.
    pub hbm_eff_max: f64,
    /// Bytes at which a streaming kernel reaches 63% of `hbm_eff_max`.
    pub hbm_bytes_half: f64,
}

/// The per-architecture table: ONE set per GPU type, no per-model or per-run constant.
///
/// - V100, A100 and H100 (H800, H200: the same Hopper silicon and software stack, not fitted
///   separately) are fitted to `../shared/data/published_runs.csv` with `autoplan validate`
///   (owner: autoplan-evaluate; procedure in ARCHITECTURE.md, "Calibration"): a grid over
///   `gemm_eff_max` × `gemm_flops_half` × `hbm_eff_max` minimising the MAPE of the usable rows
///   of that GPU, with every other constant (links, collectives) fixed beforehand by the cost
///   crate's own calibration. V100: 4 Megatron 2020 rows, MAPE 3.3%; A100: 26 Megatron rows
///   (2020–2022), MAPE 4.6%; H100: 20 Megatron-Core/NeMo rows (2024–2025, bf16 and fp8), MAPE
///   6.7%. `eff_max` is an end-to-end GEMM efficiency: it absorbs what the analytical step does
///   not itemise (launch gaps, fused epilogues, framework overhead), hence below cuBLAS's
///   isolated ~0.8–0.9; Hopper's large `flops_half` says its GEMMs need ~20 GFLOP of work to
///   reach 63% of that.
/// - L40S, Other: not fitted (no usable measured row); `flops_half` scaled from A100 by
///   dense BF16 peak, `eff_max` as for large cuBLAS GEMMs.
pub const ARCH_TABLE: [ArchEfficiency; 7] = [
    ArchEfficiency {
        arch: GpuArch::V100,
        gemm_eff_max: 0.78,
        gemm_flops_half: 0.4e9,
        hbm_eff_max: 0.80,
        hbm_bytes_half: 1.0e6,
    },
    ArchEfficiency {
        arch: GpuArch::A100,
        gemm_eff_max: 0.70,
        gemm_flops_half: 1.0e9,
        hbm_eff_max: 0.80,
        hbm_bytes_half: 1.0e6,
    },
    ArchEfficiency {
        arch: GpuArch::H100,
        gemm_eff_max: 0.58,
        gemm_flops_half: 2.0e10,
        hbm_eff_max: 0.60,
        hbm_bytes_half: 1.6e6,
    },
    ArchEfficiency {
        arch: GpuArch::H800,
        gemm_eff_max: 0.58,
        gemm_flops_half: 2.0e10,
        hbm_eff_max: 0.60,
        hbm_bytes_half: 1.6e6,
    },
    ArchEfficiency {
        arch: GpuArch::H200,
        gemm_eff_max: 0.58,
        gemm_flops_half: 2.0e10,
        hbm_eff_max: 0.60,
        hbm_bytes_half: 2.3e6,
    },
    ArchEfficiency {
        arch: GpuArch::L40s,
        gemm_eff_max: 0.80,
        gemm_flops_half: 1.2e9,
        hbm_eff_max: 0.85,
        hbm_bytes_half: 0.6e6,
    },
    ArchEfficiency {
        arch: GpuArch::Other,
        gemm_eff_max: 0.80,
        gemm_flops_half: 1.0e9,
        hbm_eff_max: 0.85,
        hbm_bytes_half: 1.0e6,
    },
];

/// The efficiency constants of `arch`.
pub fn arch_efficiency(arch: GpuArch) -> &'static ArchEfficiency {
    ARCH_TABLE
        .iter()
        .find(|e| e.arch == arch)
        .unwrap_or(&ARCH_TABLE[ARCH_TABLE.len() - 1])
}

/// Bytes per element of `p`.
pub fn bytes_per_element(p: Precision) -> f64 {
    match p {
        Precision::Fp32 | Precision::Tf32 => 4.0,
        Precision::Fp16 | Precision::Bf16 => 2.0,
        Precision::Fp8 => 1.0,
    }
}

/// Dense peak FLOP/s at `p`. A precision the GPU lacks runs at the fastest wider one it has
/// (FP8 on A100 runs as BF16/FP16; BF16 on V100 as FP16); a GPU with none of them yields 0.
pub fn peak_flops(gpu: &Gpu, p: Precision) -> f64 {
    let order: &[Precision] = match p {
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
        Precision::Fp32 => &[Precision::Fp32],
    };
    order.iter().find_map(|&q| gpu.peak(q)).unwrap_or(0.0)
}

/// Fraction of dense peak a GEMM of `flops` FLOPs reaches on `gpu` (before the roofline).
pub fn gemm_efficiency(gpu: &Gpu, flops: f64) -> f64 {
    let e = arch_efficiency(gpu.arch);
    e.gemm_eff_max * (1.0 - (-flops.max(0.0) / e.gemm_flops_half).exp())
}

/// Seconds of one GEMM of `flops` FLOPs (normally 2·m·n·k) with an `m×k` by `k×n` shape on one
/// GPU, at `precision`. See the module docs for the form. Infinite where the GPU has no
/// matrix throughput at all.
pub fn gemm_time(gpu: &Gpu, flops: f64, m: f64, n: f64, k: f64, precision: Precision) -> f64 {
    if flops <= 0.0 {
        return 0.0;
    }
    let peak = peak_flops(gpu, precision);
    let e = arch_efficiency(gpu.arch);
    let eff = gemm_efficiency(gpu, flops);
    let t_math = if peak > 0.0 && eff > 0.0 {
        flops / (peak * eff)
    } else {
        f64::INFINITY
    };
    let bytes = (m * k + k * n + m * n).max(0.0) * bytes_per_element(precision);
    let t_mem = if bytes > 0.0 {
        bytes / (gpu.hbm_bw * hbm_efficiency(e, bytes))
    } else {
        0.0
    };
    t_math.max(t_mem)
}

fn hbm_efficiency(e: &ArchEfficiency, bytes: f64) -> f64 {
    e.hbm_eff_max * (1.0 - (-bytes / e.hbm_bytes_half).exp())
}

/// Seconds of a memory-bound kernel that reads and writes `bytes` in total on one GPU.
pub fn memory_bound_time(gpu: &Gpu, bytes: f64) -> f64 {
    if bytes <= 0.0 {
        return 0.0;
    }
    let e = arch_efficiency(gpu.arch);
    bytes / (gpu.hbm_bw * hbm_efficiency(e, bytes))
}

/// Seconds of the attention core (QKᵀ, softmax·V) on one GPU, as one fused kernel: `flops` are
/// the FLOPs actually executed (callers apply the causal factor, ≈½ for causal masks with a
/// fused kernel), `bytes` its HBM traffic (Q, K, V, O), shape efficiency as a GEMM of the same
/// work.
pub fn attention_core_time(gpu: &Gpu, flops: f64, bytes: f64, precision: Precision) -> f64 {
    if flops <= 0.0 {
        return memory_bound_time(gpu, bytes);
    }
    let peak = peak_flops(gpu, precision);
    let eff = gemm_efficiency(gpu, flops);
    let t_math = if peak > 0.0 && eff > 0.0 {
        flops / (peak * eff)
    } else {
        f64::INFINITY
    };
    t_math.max(memory_bound_time(gpu, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::{gpu_a100, gpu_h100};

    #[test]
    fn a100_efficiency_curve_shape() {
        let g = gpu_a100();
        let e = arch_efficiency(GpuArch::A100);
        // 1 − 1/e of the asymptote at `flops_half`, saturated 7 half-widths later.
        let at = |f: f64| gemm_efficiency(&g, f) / e.gemm_eff_max;
        assert!((at(e.gemm_flops_half) - (1.0 - (-1.0f64).exp())).abs() < 1e-9);
        assert!(at(128.0 * e.gemm_flops_half) > 0.999);
    }

    #[test]
    fn big_gemm_hand_computed() {
        // 8192³ BF16 on A100: F = 2·8192³ = 1.0995e12; eff = eff_max (saturated);
        // t = 1.0995e12 / (312e12·eff_max); memory 3·8192²·2 B / 1.835e12 = 0.22 ms.
        let g = gpu_a100();
        let eff = arch_efficiency(GpuArch::A100).gemm_eff_max;
        let d = 8192.0;
        let f = 2.0 * d * d * d;
        let t = gemm_time(&g, f, d, d, d, Precision::Bf16);
        assert!((t - f / (312e12 * eff)).abs() / t < 1e-6, "{t}");
    }

    #[test]
    fn skinny_gemm_is_memory_bound() {
        // m = 1 row: intensity ≈ 2 FLOP/B ≪ 312e12/2.039e12 ≈ 153 FLOP/B.
        let g = gpu_a100();
        let (m, n, k) = (1.0, 8192.0, 8192.0);
        let t = gemm_time(&g, 2.0 * m * n * k, m, n, k, Precision::Bf16);
        let bytes = (m * k + k * n + m * n) * 2.0;
        assert!((t - memory_bound_time(&g, bytes)).abs() / t < 1e-9);
    }

    #[test]
    fn fp8_falls_back_on_a100_and_doubles_on_h100() {
        let a = gpu_a100();
        assert_eq!(peak_flops(&a, Precision::Fp8), 312e12);
        let h = gpu_h100("H100", GpuArch::H100);
        let d = 16384.0;
        let f = 2.0 * d * d * d;
        let p8 = gemm_time(&h, f, d, d, d, Precision::Fp8);
        let p16 = gemm_time(&h, f, d, d, d, Precision::Bf16);
        assert!((p16 / p8 - 1979.0 / 989.0).abs() < 1e-9);
    }

    #[test]
    fn efficiency_rises_with_size() {
        let g = gpu_h100("H100", GpuArch::H100);
        let mut last = 0.0;
        for f in [1e6, 1e8, 1e9, 1e10, 1e11, 1e12] {
            let e = gemm_efficiency(&g, f);
            assert!(e > last);
            last = e;
        }
    }
}
