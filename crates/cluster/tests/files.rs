//! Cluster files: every bundled file parses to what its name and comments promise, every
//! impossible input gives a located error, and no mutation of a bundled file panics.

use autoplan_cluster::{
    bundled_cluster_text, bundled_clusters, resolve_cluster, Cluster, GpuArch, IntraFabric,
    Precision, ResolveError,
};
use autoplan_input::{InputError, Source};
use proptest::prelude::*;

fn a100x64() -> &'static str {
    bundled_cluster_text("a100x64").expect("bundled a100x64")
}

/// Parse `a100x64` with `from` replaced by `to` (which must occur exactly once).
fn mutated(from: &str, to: &str) -> Result<Cluster, InputError> {
    let text = a100x64();
    assert_eq!(text.matches(from).count(), 1, "`{from}` must occur once");
    Cluster::from_toml(&Source::new("bad.toml", text.replace(from, to)))
}

/// The line (1-based) of `key` inside the replacement `to` in the mutated text: where the
/// offending value was written.
fn line_of(from: &str, to: &str, key: &str) -> usize {
    let text = a100x64().replace(from, to);
    let start = text.find(to).expect("replacement present");
    let offset = start + to.find(key).expect("key inside the replacement");
    text[..offset].matches('\n').count() + 1
}

#[track_caller]
fn assert_invalid(from: &str, to: &str, field: &str, reason_part: &str) {
    match mutated(from, to) {
        Err(InputError::Invalid {
            file,
            location,
            field: f,
            reason,
            ..
        }) => {
            assert_eq!(file.to_str(), Some("bad.toml"));
            assert_eq!(f, field);
            assert!(reason.contains(reason_part), "reason `{reason}`");
            let key = field.rsplit('.').next().unwrap_or(field);
            let expected = line_of(from, to, key);
            assert_eq!(location.map(|l| l.line), Some(expected), "{field}");
        }
        other => panic!("expected Invalid for {field}, got {other:?}"),
    }
}

#[test]
fn every_bundled_file_parses_and_is_named_after_its_file() {
    assert!(bundled_clusters().len() >= 13);
    for (name, text) in bundled_clusters() {
        let c = Cluster::from_toml(&Source::new(format!("clusters/{name}.toml"), *text))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.name, *name);
        assert!(c.gpus() >= 1);
        // Intra-node links are never slower than the NIC share (all bundled machines).
        assert!(c.node.intra_bw > c.network.inter_bw, "{name}");
    }
}

/// The size in names like `h100x256` is the GPU count; in `gb200-nvl72x4` the rack count.
#[test]
fn sizes_match_names() {
    for (name, _) in bundled_clusters() {
        if let Some((head, n)) = name.rsplit_once('x') {
            if let Ok(n) = n.parse::<u32>() {
                let c = resolve_cluster(name).unwrap();
                let per = if head.ends_with("nvl72") { 72 } else { 1 };
                assert_eq!(c.gpus(), n * per, "{name}");
            }
        }
    }
}

/// Units are converted once, to SI (a100x64: 240 GB/s, 24 GB/s, 2.7 µs, 80 GiB, 312 TFLOP/s).
#[test]
fn units_are_si() {
    let c = resolve_cluster("a100x64").unwrap();
    assert_eq!(c.node.intra_bw, 240e9);
    assert_eq!(c.network.inter_bw, 24e9);
    assert!((c.network.link_delay - 2.7e-6).abs() < 1e-18);
    assert_eq!(c.gpu.hbm_bytes, 80.0 * 1024.0 * 1024.0 * 1024.0);
    assert_eq!(c.gpu.peak(Precision::Bf16), Some(312e12));
    assert_eq!(c.gpu.peak(Precision::Fp8), None);
    assert_eq!(c.gpu.arch, GpuArch::A100);
    assert_eq!(c.node.fabric, IntraFabric::Nvswitch);
}

/// The issue's list: A100 64/1024, H100 256/16384, H800 2048, H200 128, a PCIe cluster, the
/// thesis's 2- and 4-node 10 GbE clusters, and the published runs' machines.
#[test]
fn the_issue_clusters_are_there() {
    let h800 = resolve_cluster("h800x2048").unwrap();
    assert_eq!(h800.node.intra_bw, 164.8e9);
    let l40s = resolve_cluster("l40sx64").unwrap();
    assert_eq!(l40s.node.fabric, IntraFabric::Pcie);
    for (name, nodes, gpn) in [("thesis-2node", 2, 4), ("thesis-4node", 4, 2)] {
        let c = resolve_cluster(name).unwrap();
        assert_eq!((c.nodes, c.node.gpus_per_node), (nodes, gpn));
        // 10 Gb/s per node = 1.25 GB/s, shared by the node's GPUs.
        let per_node = c.network.inter_bw * f64::from(gpn);
        assert!((per_node - 1.25e9).abs() < 1.0, "{name}: {per_node}");
    }
    let dgx2 = resolve_cluster("dgx2-v100").unwrap();
    assert_eq!(dgx2.node.gpus_per_node, 16);
    for name in [
        "selene-a100",
        "dgx-h100",
        "grand-teton-h100",
        "h200x128",
        "h100x16384",
    ] {
        resolve_cluster(name).unwrap();
    }
}

#[test]
fn with_gpus_rescales() {
    let selene = resolve_cluster("selene-a100").unwrap();
    for gpus in [8, 32, 1536, 3072] {
        let c = selene.with_gpus(gpus).unwrap();
        assert_eq!(c.gpus(), gpus);
        assert_eq!(c.node, selene.node);
    }
    assert!(selene.with_gpus(0).is_err());
    assert!(selene.with_gpus(12).is_err());
    let one = selene.with_gpus(2).unwrap();
    assert_eq!((one.nodes, one.node.gpus_per_node), (1, 2));
}

#[test]
fn resolve_unknown_lists_bundled() {
    match resolve_cluster("a100x65") {
        Err(e @ ResolveError::Unknown { .. }) => {
            assert!(e.to_string().contains("a100x64"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn resolve_reads_a_path() {
    let dir = std::env::temp_dir().join(format!("autoplan-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mine.toml");
    std::fs::write(&path, a100x64().replace("nodes = 8", "nodes = 2")).unwrap();
    let c = resolve_cluster(path.to_str().unwrap()).unwrap();
    assert_eq!(c.gpus(), 16);
    std::fs::remove_dir_all(&dir).ok();
}

// ------------------------------------------------------------------ bad input, one test each

#[test]
fn malformed_toml_gives_line_and_column() {
    let err = mutated("nodes = 8", "nodes = = 8").unwrap_err();
    match &err {
        InputError::Syntax { location, .. } => {
            let line = line_of("nodes = 8", "nodes = = 8", "nodes");
            assert_eq!(location.map(|l| l.line), Some(line));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().starts_with("bad.toml:"), "{err}");
}

#[test]
fn unknown_field_is_named_with_the_allowed_ones() {
    let err = mutated("nics_per_node = 8", "nics_per_node = 8\nnic_count = 8")
        .unwrap_err()
        .to_string();
    assert!(err.contains("nic_count"), "{err}");
    assert!(err.contains("inter_bw_gbps"), "{err}");
}

#[test]
fn missing_field_is_named() {
    let err = mutated("hbm_gbps = 2039\n", "").unwrap_err().to_string();
    assert!(err.contains("hbm_gbps"), "{err}");
}

#[test]
fn unknown_arch_lists_the_known_ones() {
    let err = mutated("arch = \"a100\"", "arch = \"b300\"")
        .unwrap_err()
        .to_string();
    assert!(err.contains("b200") && err.contains("h100"), "{err}");
}

#[test]
fn unknown_fabric_and_topology() {
    let err = mutated("fabric = \"nvswitch\"", "fabric = \"nvlink\"").unwrap_err();
    assert!(err.to_string().contains("full-mesh"), "{err}");
    let err = mutated("topology = \"fat-tree\"", "topology = \"dragonfly\"").unwrap_err();
    assert!(err.to_string().contains("rail-optimized"), "{err}");
}

#[test]
fn zero_bandwidth() {
    assert_invalid(
        "intra_bw_gbps = 240",
        "intra_bw_gbps = 0",
        "node.intra_bw_gbps",
        "positive",
    );
    assert_invalid(
        "inter_bw_gbps = 24",
        "inter_bw_gbps = 0.0",
        "network.inter_bw_gbps",
        "positive",
    );
    assert_invalid(
        "hbm_gbps = 2039",
        "hbm_gbps = 0",
        "gpu.hbm_gbps",
        "positive",
    );
}

#[test]
fn negative_bandwidth_and_latency() {
    assert_invalid(
        "inter_bw_gbps = 24",
        "inter_bw_gbps = -24",
        "network.inter_bw_gbps",
        "positive",
    );
    assert_invalid(
        "link_delay_us = 2.7",
        "link_delay_us = -1",
        "network.link_delay_us",
        "negative",
    );
    assert_invalid(
        "sync_lat_us = 8.0",
        "sync_lat_us = -8.0",
        "efficiency.sync_lat_us",
        "negative",
    );
}

#[test]
fn non_finite_values() {
    assert_invalid(
        "intra_bw_gbps = 240",
        "intra_bw_gbps = inf",
        "node.intra_bw_gbps",
        "finite",
    );
    assert_invalid(
        "bwurate = 0.96",
        "bwurate = nan",
        "efficiency.bwurate",
        "[0.01, 1]",
    );
}

#[test]
fn bwurate_outside_unit_interval() {
    assert_invalid(
        "bwurate = 0.96",
        "bwurate = 1.5",
        "efficiency.bwurate",
        "[0.01, 1]",
    );
    assert_invalid(
        "bwurate = 0.96",
        "bwurate = 0",
        "efficiency.bwurate",
        "[0.01, 1]",
    );
}

#[test]
fn zero_gpus() {
    assert_invalid(
        "gpus_per_node = 8",
        "gpus_per_node = 0",
        "node.gpus_per_node",
        "at least one GPU",
    );
    assert_invalid(
        "nodes = 8",
        "nodes = 0",
        "network.nodes",
        "at least one node",
    );
    assert_invalid("nodes = 8", "gpus = 0", "network.gpus", "at least one GPU");
}

#[test]
fn gpus_not_a_multiple_of_the_node() {
    assert_invalid("nodes = 8", "gpus = 60", "network.gpus", "multiple");
    let c = mutated("nodes = 8", "gpus = 64").unwrap();
    assert_eq!(c.nodes, 8);
}

#[test]
fn both_or_neither_size() {
    assert_invalid(
        "nodes = 8",
        "nodes = 8\ngpus = 64",
        "network.gpus",
        "not both",
    );
    let err = mutated("nodes = 8\n", "").unwrap_err().to_string();
    assert!(err.contains("network.nodes or network.gpus"), "{err}");
}

#[test]
fn negative_count_is_a_type_error() {
    let err = mutated("nodes = 8", "nodes = -8").unwrap_err();
    assert!(
        matches!(
            err,
            InputError::Syntax {
                location: Some(_),
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn oversubscription_below_one() {
    assert_invalid(
        "oversubscription = 1.0",
        "oversubscription = 0.5",
        "network.oversubscription",
        "at least 1",
    );
}

#[test]
fn inter_bw_above_the_nic_line_rate() {
    // 8 × 200 Gb/s / 8 / 8 GPUs = 25 GB/s per GPU at most.
    assert_invalid(
        "inter_bw_gbps = 24",
        "inter_bw_gbps = 26",
        "network.inter_bw_gbps",
        "25 GB/s",
    );
}

#[test]
fn no_precision_and_bad_peak() {
    assert_invalid(
        "tflops = { bf16 = 312, fp16 = 312, tf32 = 156, fp32 = 19.5 }",
        "tflops = {}",
        "gpu.tflops",
        "at least one precision",
    );
    assert_invalid(
        "tflops = { bf16 = 312, fp16 = 312, tf32 = 156, fp32 = 19.5 }",
        "tflops = { bf16 = -312 }",
        "gpu.tflops.bf16",
        "positive",
    );
    let err = mutated(
        "tflops = { bf16 = 312, fp16 = 312, tf32 = 156, fp32 = 19.5 }",
        "tflops = { int8 = 624 }",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("int8") && err.contains("bf16"), "{err}");
}

#[test]
fn empty_name() {
    assert_invalid("name = \"a100x64\"", "name = \"\"", "name", "empty");
}

#[test]
fn nodes_without_nics() {
    assert_invalid(
        "nics_per_node = 8",
        "nics_per_node = 0",
        "network.nics_per_node",
        "NIC",
    );
}

// ------------------------------------------------------------------ robustness

/// Small edits of a bundled file's text: delete a span, duplicate a line, replace a number or
/// a character. Parsing must return (Ok or a located error), never panic.
fn mutate(text: &str, kind: u8, at: usize, len: usize, num: i64) -> String {
    let chars: Vec<char> = text.chars().collect();
    let at = at % chars.len().max(1);
    let end = (at + len % 16).min(chars.len());
    match kind % 5 {
        0 => chars[..at].iter().chain(&chars[end..]).collect(),
        1 => {
            let lines: Vec<&str> = text.lines().collect();
            let i = at % lines.len().max(1);
            let mut out = lines.clone();
            out.insert(i, lines[i]);
            out.join("\n")
        }
        2 => {
            // Replace the first number at or after `at` by `num` (can be 0, negative, huge).
            let s: String = chars[at..].iter().collect();
            match s.find(|c: char| c.is_ascii_digit()) {
                Some(i) => {
                    let rest = &s[i..];
                    let n = rest
                        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                        .unwrap_or(rest.len());
                    let head: String = chars[..at].iter().collect();
                    format!("{head}{}{num}{}", &s[..i], &rest[n..])
                }
                None => text.to_string(),
            }
        }
        3 => {
            let mut c = chars.clone();
            if !c.is_empty() {
                c[at] = ['=', '"', '[', ']', '0', '-', '\n', '{', '.', 'x'][len % 10];
            }
            c.into_iter().collect()
        }
        _ => chars[..at].iter().collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn mutations_never_panic(
        which in 0usize..64,
        kind in 0u8..5,
        at in 0usize..10_000,
        len in 0usize..64,
        num in prop_oneof![Just(0i64), Just(-1), Just(1), Just(u32::MAX as i64 + 1), -100_000i64..100_000],
    ) {
        let (name, text) = bundled_clusters()[which % bundled_clusters().len()];
        let src = Source::new(format!("{name}.toml"), mutate(text, kind, at, len, num));
        if let Ok(c) = Cluster::from_toml(&src) {
            // Whatever parses is physically possible.
            prop_assert!(c.gpus() >= 1);
            prop_assert!(c.node.intra_bw > 0.0 && c.network.inter_bw > 0.0);
            prop_assert!(c.efficiency.bwurate > 0.0 && c.efficiency.bwurate <= 1.0);
            prop_assert!(c.network.oversubscription >= 1.0);
        }
    }
}

/// Issue 21: every number has a plausible finite range. A subnormal peak passed validation and
/// made `evaluate` print a NaN step time; an HBM of 1e308 GiB printed an infinite headroom.
#[test]
fn implausible_values_name_the_range() {
    let peak = "tflops = { bf16 = 312, fp16 = 312, tf32 = 156, fp32 = 19.5 }";
    assert_invalid(
        peak,
        "tflops = { bf16 = 5e-324 }",
        "gpu.tflops.bf16",
        "[0.1, 1000000]",
    );
    assert_invalid(
        peak,
        "tflops = { bf16 = 1e300 }",
        "gpu.tflops.bf16",
        "too large",
    );
    assert_invalid(
        "hbm_gib = 80",
        "hbm_gib = 1e308",
        "gpu.hbm_gib",
        "(0, 16384]",
    );
    assert_invalid(
        "intra_latency_us = 2.0",
        "intra_latency_us = 1e300",
        "node.intra_latency_us",
        "[0, 1000000]",
    );
    assert_invalid(
        "oversubscription = 1.0",
        "oversubscription = 1e9",
        "network.oversubscription",
        "at most 1024",
    );
    assert_invalid(
        "bwurate = 0.96",
        "bwurate = 5e-324",
        "efficiency.bwurate",
        "[0.01, 1]",
    );
    assert_invalid(
        "nodes = 8",
        "nodes = 4000000",
        "network.nodes",
        "at most 1048576 GPUs",
    );
    assert_invalid(
        "gpus_per_node = 8",
        "gpus_per_node = 4096",
        "node.gpus_per_node",
        "[1, 1024]",
    );
}

#[test]
fn resize_is_bounded() {
    let c = autoplan_cluster::resolve_cluster("a100x64").unwrap();
    let err = c.with_gpus(u32::MAX).unwrap_err().to_string();
    assert!(err.contains("at most 1048576"), "{err}");
}

/// A GPU's power: its rating and a limit below it are read in watts; a limit without the rating,
/// above it, or outside [1, 10000] W is an error naming the field and its line.
#[test]
fn power_limit_and_rating() {
    let capped = mutated(
        "hbm_gbps = 2039\n",
        "hbm_gbps = 2039\nrated_power_w = 400\npower_limit_w = 300\n",
    )
    .unwrap();
    assert_eq!(capped.gpu.power_capped(), Some((300.0, 400.0)));
    let at_rating = mutated(
        "hbm_gbps = 2039\n",
        "hbm_gbps = 2039\nrated_power_w = 400\n",
    )
    .unwrap();
    assert_eq!(at_rating.gpu.power_capped(), None);
    assert_eq!(a100x64_gpu_power(), (None, None));
    assert_invalid(
        "hbm_gbps = 2039\n",
        "hbm_gbps = 2039\npower_limit_w = 300\n",
        "gpu.power_limit_w",
        "needs the part's rating",
    );
    assert_invalid(
        "hbm_gbps = 2039\n",
        "hbm_gbps = 2039\nrated_power_w = 400\npower_limit_w = 500\n",
        "gpu.power_limit_w",
        "above the part's rating",
    );
    for bad in ["0", "-400", "1e308", "nan"] {
        assert_invalid(
            "hbm_gbps = 2039\n",
            &format!("hbm_gbps = 2039\nrated_power_w = {bad}\n"),
            "gpu.rated_power_w",
            "",
        );
    }
}

fn a100x64_gpu_power() -> (Option<f64>, Option<f64>) {
    let g = Cluster::from_toml(&Source::new("a.toml", a100x64()))
        .unwrap()
        .gpu;
    (g.rated_power_w, g.power_limit_w)
}
