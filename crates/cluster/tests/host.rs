//! The `[host]` tier of cluster files: every bundled cluster has one within its line rates, and
//! unknown or absurd values give errors naming the file and field.

use autoplan_cluster::{bundled_cluster_text, bundled_clusters, Cluster, HostLink};
use autoplan_input::{InputError, Source};

const HOST: &str = "memory_gib = 2048\n";

fn with(from: &str, to: &str) -> Result<Cluster, InputError> {
    let text = bundled_cluster_text("a100x64").unwrap();
    assert_eq!(text.matches(from).count(), 1, "`{from}` must occur once");
    Cluster::from_toml(&Source::new("bad.toml", text.replace(from, to)))
}

#[track_caller]
fn invalid(from: &str, to: &str, field: &str, reason_part: &str) {
    match with(from, to) {
        Err(InputError::Invalid {
            file,
            field: f,
            reason,
            location,
            ..
        }) => {
            assert_eq!(file.to_str(), Some("bad.toml"));
            assert_eq!(f, field);
            assert!(reason.contains(reason_part), "reason `{reason}`");
            assert!(location.is_some(), "{field}: no location");
        }
        other => panic!("expected Invalid for {field}, got {other:?}"),
    }
}

#[test]
fn every_bundled_cluster_has_a_host_tier() {
    for (name, text) in bundled_clusters() {
        let c = Cluster::from_toml(&Source::new(format!("clusters/{name}.toml"), *text)).unwrap();
        let h = c.host.unwrap_or_else(|| panic!("{name}: no [host]"));
        let gpn = c.node.gpus_per_node;
        // At least half the HBM per GPU (a GB300 tray's 2 Graces give 223.5 GiB per 279 GiB
        // GPU; the x86 hosts more than the HBM).
        assert!(
            h.memory_per_gpu(gpn) > 0.5 * c.gpu.hbm_bytes,
            "{name}: host below HBM / 2"
        );
        assert!(h.link_bw <= h.link.line_rate_gbps() * 1e9, "{name}");
        assert!(h.memory_bw_per_gpu(gpn) <= c.gpu.hbm_bw, "{name}");
        // Grace systems reach the host over NVLink-C2C, the others over PCIe.
        let grace = name.starts_with("gb");
        assert_eq!(h.link == HostLink::NvlinkC2c, grace, "{name}");
    }
}

/// a100x64 in SI: 2 TiB per node, PCIe Gen4 at the measured 26.3 GB/s shared by two GPUs.
#[test]
fn units_are_converted_once() {
    let c = with(HOST, HOST).unwrap();
    let h = c.host.unwrap();
    assert_eq!(h.memory_bytes, 2048.0 * 1024.0 * 1024.0 * 1024.0);
    assert_eq!(h.link, HostLink::PcieGen4);
    assert_eq!(h.link_bw_per_gpu(), 26.3e9 / 2.0);
    assert_eq!(h.memory_bw_per_gpu(8), 409.6e9 / 8.0);
}

#[test]
fn bad_host_fields_name_the_field() {
    invalid(HOST, "memory_gib = -1\n", "host.memory_gib", "(0, 65536]");
    invalid(HOST, "memory_gib = 1e9\n", "host.memory_gib", "(0, 65536]");
    invalid(
        "memory_gbps = 409.6",
        "memory_gbps = 0",
        "host.memory_gbps",
        "[1, 100000]",
    );
    invalid(
        "memory_gbps = 409.6",
        "memory_gbps = 90000",
        "host.memory_gbps",
        "exceeds the GPU's HBM",
    );
    invalid(
        "link_gbps = 26.3",
        "link_gbps = 64",
        "host.link_gbps",
        "PCIe Gen4 x16 line rate",
    );
    invalid(
        "link_gbps = 26.3",
        "link_gbps = 0",
        "host.link_gbps",
        "(0, 31.5]",
    );
    invalid(
        "gpus_per_link = 2",
        "gpus_per_link = 16",
        "host.gpus_per_link",
        "at most the node's 8 GPUs",
    );
    invalid(
        "gpus_per_link = 2",
        "gpus_per_link = 0",
        "host.gpus_per_link",
        "[1, 8]",
    );
}

#[test]
fn unknown_link_or_field_is_a_located_error() {
    let e = with("link = \"pcie-gen4\"", "link = \"pcie-gen9\"").unwrap_err();
    assert!(e.to_string().contains("pcie-gen9"), "{e}");
    let e = with(HOST, "memory_gib = 2048\nmemory_tib = 2\n").unwrap_err();
    assert!(e.to_string().contains("memory_tib"), "{e}");
    // No [host] at all is fine: nothing can be offloaded.
    let text = bundled_cluster_text("a100x64").unwrap();
    let cut = &text[..text.find("\n[host]").unwrap()];
    let c = Cluster::from_toml(&Source::new("nohost.toml", cut)).unwrap();
    assert!(c.host.is_none());
}
