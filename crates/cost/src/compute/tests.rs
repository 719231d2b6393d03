use super::*;
use crate::calibration::{gpu_a100, gpu_h100};
use autoplan_cluster::Gpu;

#[test]
fn wave_utilisation_hand_computed() {
    let a = arch_efficiency(GpuArch::A100);
    // One expert's 512 tokens × 3072 features on A100: 4 × 12 = 48 tiles, one wave of 108.
    let u = wave_utilisation(a, 512.0, 3072.0);
    assert!((u - 512.0 * 3072.0 / (108.0 * 128.0 * 256.0)).abs() < 1e-12);
    assert!((u - 48.0 / 108.0).abs() < 1e-12);
    // 8192² on A100: 64 × 32 = 2048 tiles in ⌈2048/108⌉ = 19 waves.
    let u = wave_utilisation(a, 8192.0, 8192.0);
    assert!((u - 2048.0 / (19.0 * 108.0)).abs() < 1e-12);
    // A padded tile row costs a whole tile: 129 rows run like 256.
    let padded = 129.0 * 256.0 / (108.0 * 128.0 * 256.0);
    assert!((wave_utilisation(a, 129.0, 256.0) - padded).abs() < 1e-12);
    // Hopper: no wave loss (measured, module docs).
    let h = arch_efficiency(GpuArch::H100);
    assert_eq!(wave_utilisation(h, 512.0, 3072.0), 1.0);
    assert_eq!(wave_utilisation(h, 129.0, 256.0), 1.0);
}

#[test]
fn big_gemm_hand_computed() {
    // 8192³ BF16 on A100: F = 2·8192³ = 1.0995e12 over 19 waves of 108 tiles (u above);
    // t = F / (312e12 · eff_max · u) + latency; memory 3·8192²·2 B ≈ 0.4 GB, far less.
    let g = gpu_a100();
    let e = arch_efficiency(GpuArch::A100);
    let d = 8192.0;
    let f = 2.0 * d * d * d;
    let u = 2048.0 / (19.0 * 108.0);
    let t = gemm_time(&g, f, d, d, d, Precision::Bf16);
    let want = f / (312e12 * e.gemm_eff_max * u) + e.gemm_latency;
    assert!((t - want).abs() / t < 1e-9, "{t} vs {want}");
}

#[test]
fn skinny_gemm_is_memory_bound() {
    // m = 1 row, n = k = 65536: intensity ≈ 2 FLOP/B ≪ 312e12/2.039e12 ≈ 153 FLOP/B, and
    // the 8 GiB of weights take longer to stream than the one-row tiles take to compute.
    let g = gpu_a100();
    let (m, n, k) = (1.0, 65536.0, 65536.0);
    let t = gemm_time(&g, 2.0 * m * n * k, m, n, k, Precision::Bf16);
    let bytes = (m * k + k * n + m * n) * 2.0;
    assert!((t - memory_bound_time(&g, bytes)).abs() / t < 1e-9);
}

#[test]
fn fp8_falls_back_on_a100_and_doubles_on_h100() {
    let a = gpu_a100();
    assert_eq!(peak_flops(&a, Precision::Fp8), 312e12);
    let h = gpu_h100("H100", GpuArch::H100);
    let lat = arch_efficiency(GpuArch::H100).gemm_latency;
    let d = 16384.0;
    let f = 2.0 * d * d * d;
    let p8 = gemm_time(&h, f, d, d, d, Precision::Fp8) - lat;
    let p16 = gemm_time(&h, f, d, d, d, Precision::Bf16) - lat;
    let r = arch_efficiency(GpuArch::H100).fp8_rate;
    assert!((p16 / p8 - r * 1979.0 / 989.0).abs() < 1e-9);
    // A100 has no FP8 peak: its FP8 GEMMs run as BF16 ones, `fp8_rate` does not apply.
    let t = |p| gemm_time(&a, f, d, d, d, p);
    assert_eq!(t(Precision::Fp8), t(Precision::Bf16));
}

#[test]
fn pricer_shortcut_equals_the_full_roofline() {
    // The skipped exponential never changes the result: compare with max(t_math, t_mem)
    // computed in full, over skinny, square and tiny shapes.
    let g = gpu_h100("H100", GpuArch::H100);
    let e = arch_efficiency(GpuArch::H100);
    let p = GemmPricer::new(&g, e, Precision::Bf16);
    for m in [1.0, 7.0, 64.0, 512.0, 4096.0, 65536.0] {
        for n in [1.0, 256.0, 3072.0, 18432.0] {
            for k in [8.0, 2048.0, 7168.0] {
                let f = 2.0 * m * n * k;
                let t_math =
                    f / (989e12 * e.gemm_eff_max * wave_utilisation(e, m, n)) + e.gemm_latency;
                let bytes = (m * k + k * n + m * n) * 2.0;
                let full = t_math.max(memory_bound_time(&g, bytes));
                assert_eq!(p.time(f, m, n, k), full, "{m}×{n}×{k}");
            }
        }
    }
}

#[test]
fn gemm_time_never_falls_as_the_gemm_grows() {
    let g = gpu_h100("H100", GpuArch::H100);
    let t = |m: f64, n: f64, k: f64| gemm_time(&g, 2.0 * m * n * k, m, n, k, Precision::Bf16);
    let mut last = 0.0;
    for m in (1..=70).map(|i| 37.0 * i as f64) {
        let now = t(m, 3072.0, 4096.0);
        // Within one wave the time is one tile's work whatever `m` (up to rounding).
        assert!(now >= last * (1.0 - 1e-12), "m {m}: {now} < {last}");
        last = now;
    }
    // And never beats full waves at eff_max.
    let e = arch_efficiency(GpuArch::H100);
    for (m, n, k) in [
        (512.0, 3072.0, 4096.0),
        (4096.0, 4096.0, 4096.0),
        (8.0, 8.0, 8.0),
    ] {
        assert!(t(m, n, k) >= 2.0 * m * n * k / (989e12 * e.gemm_eff_max));
    }
}

/// Useful FLOP/s of a forward call.
fn attn_eff(g: &Gpu, c: &AttnCall) -> f64 {
    c.flops() / attention_fwd_time(g, c, 0.0, Precision::Bf16)
}

#[test]
fn attention_rate_never_falls_as_the_sequence_grows() {
    // Longer sequences amortise the kernel's latency, the masked edge tiles and the tail of
    // its last wave: at a fixed head dim and head count the rate never falls (module docs).
    let g = gpu_h100("H100", GpuArch::H100);
    for (dq, dv) in [(64.0, 64.0), (128.0, 128.0), (192.0, 128.0)] {
        for p in [1.0, 8.0, 16.0, 64.0, 512.0] {
            let (mut last_c, mut last_f) = (0.0, 0.0);
            for i in 1..=400 {
                let s = 256.0 * i as f64;
                let c = attn_eff(&g, &AttnCall::causal(p, s, dq, dv));
                let f = attn_eff(&g, &AttnCall::full(p, s, s, dq, dv));
                assert!(c >= last_c * (1.0 - 1e-12), "causal {p} × {s}, d {dq}");
                assert!(f >= last_f * (1.0 - 1e-12), "full {p} × {s}, d {dq}");
                (last_c, last_f) = (c, f);
            }
        }
    }
    // And the asymptote is the table's rate at head dim 128: attn_rate of the GEMM rate.
    let e = arch_efficiency(GpuArch::H100);
    let big = attn_eff(&g, &AttnCall::full(64.0, 131072.0, 131072.0, 128.0, 128.0));
    let want = 989e12 * e.gemm_eff_max * e.attn_rate;
    assert!((big / want - 1.0).abs() < 0.01, "{big} vs {want}");
}

#[test]
fn attention_head_dim_raises_the_rate() {
    let g = gpu_h100("H100", GpuArch::H100);
    let r = |d: f64| attn_eff(&g, &AttnCall::full(64.0, 65536.0, 65536.0, d, d));
    assert!(r(64.0) < r(128.0) && r(128.0) < r(256.0));
    // A100 takes Hopper's constants as a prior: the same head-dim effect, and its long-
    // sequence rate at head dim 128 is `attn_rate` of its own GEMM rate: 0.738 of the A100's
    // peak, where FlashAttention-2 reports 73% as its best (Dao 2023).
    let a = gpu_a100();
    let ra = |d: f64| attn_eff(&a, &AttnCall::full(64.0, 65536.0, 65536.0, d, d));
    assert!((ra(64.0) / ra(128.0) - r(64.0) / r(128.0)).abs() < 1e-3);
    assert!((ra(128.0) / 312e12 - 0.738).abs() < 0.002, "{}", ra(128.0));
    // Not measured and no fused kernel: no head-dim effect on V100.
    let mut v = gpu_a100();
    v.arch = GpuArch::V100;
    let rv = |d: f64| attn_eff(&v, &AttnCall::full(64.0, 65536.0, 65536.0, d, d));
    assert!((rv(64.0) / rv(128.0) - 1.0).abs() < 1e-3);
}

#[test]
fn causal_never_costs_more_than_full_and_backward_more_than_forward() {
    for g in [gpu_h100("H100", GpuArch::H100), gpu_a100()] {
        for p in [1.0, 12.0, 64.0] {
            for s in [512.0, 2048.0, 8192.0, 32768.0, 131072.0] {
                let c = AttnCall::causal(p, s, 128.0, 128.0);
                let f = AttnCall::full(p, s, s, 128.0, 128.0);
                let tc = attention_fwd_time(&g, &c, 0.0, Precision::Bf16);
                let tf = attention_fwd_time(&g, &f, 0.0, Precision::Bf16);
                // Causal skips the upper triangle, but within one wave of CTAs both last as
                // long as their longest CTA, and the causal one runs its diagonal tile
                // masked (½ tile more): measured 7% slower than full at 8 heads × 1–2K
                // tokens, one wave (results/h100/attention_seq.csv); never slower beyond.
                let one_wave = p * s / 128.0 <= 132.0;
                let tol = if one_wave { 1.0 + 64.0 / s } else { 1.0 };
                assert!(tc <= tf * tol, "{p} × {s}: causal {tc} > full {tf}");
                // Long and wide: causal tends to half of full (the skipped upper triangle).
                if s >= 131072.0 && p >= 12.0 {
                    assert!(tc / tf < 0.52, "{p} × {s}: {}", tc / tf);
                }
                for call in [c, f] {
                    let b = attention_bwd_time(&g, &call, 0.0, Precision::Bf16);
                    assert!(b > 2.0 * attention_fwd_time(&g, &call, 0.0, Precision::Bf16));
                }
            }
        }
    }
}

#[test]
fn short_causal_calls_cost_their_longest_cta() {
    // 8 heads × 2K tokens: 128 CTAs on 132 SMs, one wave; the causal kernel lasts as long as
    // its last query tile, 16 key tiles — as long as the full one (measured: 32.5 µs causal,
    // 30.4 µs full, results/h100/attention_seq.csv).
    let g = gpu_h100("H100", GpuArch::H100);
    let c = attention_fwd_time(
        &g,
        &AttnCall::causal(8.0, 2048.0, 128.0, 128.0),
        0.0,
        Precision::Bf16,
    );
    let f = attention_fwd_time(
        &g,
        &AttnCall::full(8.0, 2048.0, 2048.0, 128.0, 128.0),
        0.0,
        Precision::Bf16,
    );
    assert!((c / f - 1.0).abs() < 0.05, "{c} {f}");
}

#[test]
fn windowed_attention_costs_its_window_not_the_sequence() {
    // A window w ≪ s: work ∝ s·w, so doubling s doubles the time (up to the latency).
    let g = gpu_h100("H100", GpuArch::H100);
    let w = 4096.0;
    let call = |s: f64| AttnCall {
        problems: 8.0,
        queries: s,
        keys: w - w * w / (2.0 * s),
        max_keys: w,
        edge: 1.0 - w / (2.0 * s),
        d_qk: 128.0,
        d_v: 128.0,
    };
    let t = |s: f64| attention_fwd_time(&g, &call(s), 0.0, Precision::Bf16);
    let lat = arch_efficiency(GpuArch::H100).gemm_latency;
    let r = (t(262144.0) - lat) / (t(131072.0) - lat);
    assert!((r - 2.0).abs() < 0.02, "{r}");
    // And far below the full causal call of the same sequence.
    let full = attention_fwd_time(
        &g,
        &AttnCall::causal(8.0, 131072.0, 128.0, 128.0),
        0.0,
        Precision::Bf16,
    );
    assert!(t(131072.0) < 0.1 * full);
}
