//! Hardware of 2025–26 (issue 16, item 3): the Blackwell GPUs with their datasheet peaks, NVLink
//! domains larger than a host (NVL72: 18 trays of 4 GPUs), and the training precisions each GPU
//! accepts.

use autoplan_cluster::{
    bundled_cluster_text, resolve_cluster, Cluster, GpuArch, GroupPlacement, Precision,
    TRAINING_PRECISIONS,
};
use autoplan_input::{InputError, Source};

const TF: f64 = 1e12;

/// Dense peaks, HBM and links of the new clusters, as hardware.md §1–§3 give them.
#[test]
fn blackwell_clusters_carry_their_datasheet_figures() {
    // (cluster, arch, fp4, fp8, bf16 dense TFLOP/s, HBM GiB, HBM GB/s, GPUs/host, domain,
    // NIC share GB/s)
    for (name, arch, fp4, fp8, bf16, hbm, bw, gpn, dom, inter) in [
        (
            "b200x256",
            GpuArch::B200,
            9000.0,
            4500.0,
            2250.0,
            180.0,
            7700.0,
            8,
            8,
            48.0,
        ),
        (
            // Derived, not a datasheet row: GB300's Blackwell Ultra at B200/GB200's 0.9
            // (clusters/b300x256.toml says which figures are assumed).
            "b300x256",
            GpuArch::Gb300,
            13500.0,
            4500.0,
            2250.0,
            279.0,
            8000.0,
            8,
            8,
            96.0,
        ),
        (
            "gb200-nvl72x4",
            GpuArch::Gb200,
            10000.0,
            5000.0,
            2500.0,
            186.0,
            8000.0,
            4,
            72,
            48.0,
        ),
        (
            "gb200-nvl72x16",
            GpuArch::Gb200,
            10000.0,
            5000.0,
            2500.0,
            186.0,
            8000.0,
            4,
            72,
            48.0,
        ),
        (
            "gb300-nvl72x4",
            GpuArch::Gb300,
            15000.0,
            5000.0,
            2500.0,
            279.0,
            8000.0,
            4,
            72,
            96.0,
        ),
    ] {
        let c = resolve_cluster(name).unwrap();
        assert_eq!(c.gpu.arch, arch, "{name}");
        assert!(c.gpu.arch.is_blackwell());
        assert_eq!(c.gpu.peak(Precision::Fp4), Some(fp4 * TF), "{name}");
        assert_eq!(c.gpu.peak(Precision::Fp8), Some(fp8 * TF), "{name}");
        assert_eq!(c.gpu.peak(Precision::Bf16), Some(bf16 * TF), "{name}");
        assert_eq!(c.gpu.hbm_bytes, hbm * (1u64 << 30) as f64, "{name}");
        assert_eq!(c.gpu.hbm_bw, bw * 1e9, "{name}");
        assert_eq!(
            (c.node.gpus_per_node, c.domain_gpus()),
            (gpn, dom),
            "{name}"
        );
        // NVLink5 at NCCL's effective 18 x 40.1 GB/s per direction.
        assert!((c.node.intra_bw - 721.8e9).abs() < 1.0, "{name}");
        assert!(c.node.in_switch_reduction, "{name}");
        // One NIC per GPU.
        assert_eq!(c.network.nics_per_node, gpn, "{name}");
        assert_eq!(c.network.inter_bw, inter * 1e9, "{name}");
    }
    assert_eq!(resolve_cluster("gb200-nvl72x16").unwrap().gpus(), 1152);
    // H800 and H200 by name, and every existing cluster's domain is its host.
    for (name, arch) in [("h800x2048", GpuArch::H800), ("h200x128", GpuArch::H200)] {
        let c = resolve_cluster(name).unwrap();
        assert_eq!(c.gpu.arch, arch);
        assert_eq!(c.domain_gpus(), c.node.gpus_per_node);
        assert!(!c.gpu.arch.is_blackwell());
    }
}

fn nvl72() -> Cluster {
    resolve_cluster("gb200-nvl72x4").unwrap()
}

/// Ranks fill 72-GPU domains in order; a group inside one is intra-domain although it spans
/// trays, a group across two is not.
#[test]
fn groups_are_placed_on_nvlink_domains_not_hosts() {
    let c = nvl72();
    // TP = 8 on trays of 4, DP = 36: two trays, one domain.
    let tp = c.group_placement(&[8, 36], &[true, false]);
    assert_eq!((tp.size, tp.ranks_per_node, tp.nodes), (8, 8, 1));
    // EP = 64 of a 64-GPU job on one rack: one domain of 64.
    let rack = c.with_gpus(64).unwrap();
    assert_eq!((rack.nodes, rack.domain_gpus()), (16, 64));
    let ep = rack.group_placement(&[64], &[true]);
    assert!(ep.intra_node());
    // A 144-way group (TP 2 x DP 144 on 288 GPUs) spans 2 domains of 72.
    let dp = c.group_placement(&[2, 144], &[false, true]);
    assert_eq!((dp.size, dp.ranks_per_node, dp.nodes), (144, 36, 4));
    let wide = c.group_placement(&[144, 2], &[true, false]);
    assert_eq!((wide.size, wide.ranks_per_node, wide.nodes), (144, 72, 2));
    // The same grid with the domain cut at the tray (NVLink ending at the host) crosses trays.
    let mut trays = c.clone();
    trays.node.nvlink_domain = 4;
    assert_eq!(trays.group_placement(&[8, 36], &[true, false]).nodes, 2);
}

/// 256 GPUs on NVL72 racks: 64 trays, three full domains and one of 40. Power-of-two groups
/// that divide 72 never straddle a rack (exact); EP = 32 groups may (the worst is reported).
#[test]
fn power_of_two_jobs_on_racks_of_72() {
    let c = nvl72().with_gpus(256).unwrap();
    assert_eq!(
        (c.nodes, c.node.gpus_per_node, c.domain_gpus()),
        (64, 4, 72)
    );
    assert!(!GroupPlacement::aligned(72, &[8, 32]));
    let tp = c.group_placement(&[8, 32], &[true, false]);
    assert_eq!((tp.ranks_per_node, tp.nodes), (8, 1));
    // Ranks 64..95 sit on racks 0 and 1.
    let ep = c.group_placement(&[32, 8], &[true, false]);
    assert_eq!(ep.nodes, 2);
}

#[test]
fn with_gpus_keeps_the_domain() {
    let c = nvl72();
    for (gpus, trays, domain) in [(288, 72, 72), (1152, 288, 72), (72, 18, 72), (8, 2, 8)] {
        let r = c.with_gpus(gpus).unwrap();
        assert_eq!((r.gpus(), r.nodes, r.domain_gpus()), (gpus, trays, domain));
        assert_eq!(r.node.nvlink_domain, 72);
    }
    let two = c.with_gpus(2).unwrap();
    assert_eq!(
        (two.nodes, two.node.gpus_per_node, two.domain_gpus()),
        (1, 2, 2)
    );
    assert!(c.with_gpus(6).is_err()); // 1.5 trays
}

/// Parse gb200-nvl72x4 with `from` replaced by `to`.
fn mutated(from: &str, to: &str) -> Result<Cluster, InputError> {
    let text = bundled_cluster_text("gb200-nvl72x4").unwrap();
    assert_eq!(text.matches(from).count(), 1, "`{from}`");
    Cluster::from_toml(&Source::new("bad.toml", text.replace(from, to)))
}

#[test]
fn nvlink_domain_must_be_whole_hosts() {
    for bad in [
        "nvlink_domain = 70",
        "nvlink_domain = 2",
        "nvlink_domain = 0",
    ] {
        match mutated("nvlink_domain = 72", bad) {
            Err(InputError::Invalid { field, reason, .. }) => {
                assert_eq!(field, "node.nvlink_domain");
                assert!(
                    reason.contains("multiple of node.gpus_per_node = 4"),
                    "{reason}"
                );
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    // Without the key, the domain is the host.
    let c = mutated("nvlink_domain = 72\n", "").unwrap();
    assert_eq!(c.domain_gpus(), 4);
}

#[test]
fn precisions_by_name() {
    for p in TRAINING_PRECISIONS {
        assert_eq!(p.name().parse::<Precision>(), Ok(p));
        assert!(p.is_training());
    }
    for (alias, p) in [
        ("fp8-delayed", Precision::Fp8),
        ("FP8-CS", Precision::Fp8Current),
        ("fp8-tensorwise", Precision::Fp8Current),
        ("fp8-blockwise", Precision::Fp8Block),
    ] {
        assert_eq!(alias.parse::<Precision>(), Ok(p));
    }
    assert!("int8".parse::<Precision>().unwrap_err().contains("mxfp8"));
    assert!(!Precision::Fp4.is_training());
    assert_eq!(Precision::Mxfp8.gemm_format(), Precision::Fp8);
    assert_eq!(Precision::Nvfp4.gemm_format(), Precision::Fp4);
    assert!(Precision::Fp8Block.is_low_precision() && !Precision::Bf16.is_low_precision());
}

/// MXFP8 and NVFP4 only on Blackwell, with a reason naming the GPU; FP8 recipes where the GPU
/// has FP8 tensor cores.
#[test]
fn block_scaled_formats_need_blackwell() {
    let h100 = resolve_cluster("dgx-h100").unwrap().gpu;
    let a100 = resolve_cluster("selene-a100").unwrap().gpu;
    for p in [Precision::Mxfp8, Precision::Nvfp4] {
        let e = h100.check_training_precision(p).unwrap_err();
        assert!(
            e.contains("Blackwell") && e.contains("H100-SXM5-80GB"),
            "{e}"
        );
        assert!(a100.check_training_precision(p).is_err());
        for name in ["b200x256", "b300x256", "gb200-nvl72x4", "gb300-nvl72x4"] {
            let g = resolve_cluster(name).unwrap().gpu;
            assert_eq!(g.check_training_precision(p), Ok(()), "{name} {p}");
        }
    }
    for p in [
        Precision::Bf16,
        Precision::Fp8,
        Precision::Fp8Current,
        Precision::Fp8Block,
    ] {
        assert_eq!(h100.check_training_precision(p), Ok(()));
    }
    // FP8 recipes need FP8 tensor cores: not on A100 or V100 (no `fp8` peak in their files),
    // on L40S (Ada, SM89) yes; 16-bit training everywhere.
    let v100 = resolve_cluster("dgx2-v100").unwrap().gpu;
    let l40s = resolve_cluster("l40sx64").unwrap().gpu;
    for p in [Precision::Fp8, Precision::Fp8Current, Precision::Fp8Block] {
        for g in [&a100, &v100] {
            let e = g.check_training_precision(p).unwrap_err();
            assert!(e.contains("FP8 tensor cores") && e.contains(&g.name), "{e}");
        }
        // Ada (SM89) runs per-tensor FP8, not the block-scaled GEMMs (compute capability 9.0).
        if p == Precision::Fp8Block {
            let e = l40s.check_training_precision(p).unwrap_err();
            assert!(
                e.contains("compute capability 9.0") && e.contains(&l40s.name),
                "{e}"
            );
            assert_eq!(l40s.training_precision_for(p).0, Precision::Bf16);
        } else {
            assert_eq!(l40s.check_training_precision(p), Ok(()));
        }
    }
    for name in ["b200x256", "gb300-nvl72x4", "h800x2048"] {
        let g = resolve_cluster(name).unwrap().gpu;
        assert_eq!(
            g.check_training_precision(Precision::Fp8Block),
            Ok(()),
            "{name}"
        );
    }
    // 16-bit training everywhere, BF16 only with BF16 tensor cores (no `bf16` peak in the
    // V100's file): a BF16 or FP8 model file trains there in FP16.
    for g in [&a100, &v100, &l40s] {
        assert_eq!(g.check_training_precision(Precision::Fp16), Ok(()));
    }
    for g in [&a100, &l40s] {
        assert_eq!(g.check_training_precision(Precision::Bf16), Ok(()));
    }
    let e = v100.check_training_precision(Precision::Bf16).unwrap_err();
    assert!(
        e.contains("BF16 tensor cores") && e.contains(&v100.name),
        "{e}"
    );
    for p in [Precision::Bf16, Precision::Fp8Block] {
        let (q, why) = v100.training_precision_for(p);
        assert_eq!(q, Precision::Fp16, "{p}");
        assert!(why.is_some(), "{p}");
    }
    assert_eq!(
        a100.training_precision_for(Precision::Fp8).0,
        Precision::Bf16
    );
    assert!(h100.check_training_precision(Precision::Fp4).is_err());
    // A Blackwell GPU whose file omits its FP4 peak cannot price NVFP4.
    let mut b = resolve_cluster("b200x256").unwrap().gpu;
    b.peak_flops.retain(|(p, _)| *p != Precision::Fp4);
    assert!(b
        .check_training_precision(Precision::Nvfp4)
        .unwrap_err()
        .contains("fp4"));
}
