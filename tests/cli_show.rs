//! `autoplan clusters` and `autoplan show --cluster` end to end (issue 2, items 5 and 8).

mod common;

/// `common::autoplan` with success as a flag.
fn autoplan(args: &[&str]) -> (bool, String, String) {
    let (code, out, err) = common::autoplan(args);
    (code == Some(0), out, err)
}

#[test]
fn clusters_lists_every_bundled_cluster() {
    let (ok, out, err) = autoplan(&["clusters"]);
    assert!(ok, "{err}");
    for (name, _) in autoplan_cluster::bundled_clusters() {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "{name} missing from:\n{out}"
        );
    }
    let a100 = out.lines().find(|l| l.starts_with("a100x64 ")).unwrap();
    assert!(
        a100.contains(" 64 ") && a100.contains("A100-SXM4-80GB"),
        "{a100}"
    );
}

#[test]
fn show_cluster_json_is_si() {
    let (ok, out, err) = autoplan(&["show", "--cluster", "a100x64", "--format", "json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["gpus"].as_u64(), Some(64));
    assert_eq!(v["nodes"].as_u64(), Some(8));
    // clusters/a100x64.toml: intra_bw_gbps = 240, inter_bw_gbps = 24, link_delay_us = 2.7.
    assert_eq!(v["node"]["intra_bw_bytes_per_s"].as_f64(), Some(240e9));
    assert_eq!(v["network"]["inter_bw_bytes_per_s"].as_f64(), Some(24e9));
    let delay = v["network"]["link_delay_s"].as_f64().unwrap();
    assert!((delay - 2.7e-6).abs() < 1e-15, "{delay}");
    assert_eq!(v["gpu"]["peak_flop_per_s"]["bf16"].as_f64(), Some(312e12));
}

#[test]
fn show_cluster_table_and_path() {
    let (ok, out, err) = autoplan(&["show", "--cluster", "clusters/h800x2048.toml"]);
    assert!(ok, "{err}");
    assert!(out.contains("2048 GPUs"), "{out}");
    assert!(out.contains("164.8 GB/s"), "{out}");
    assert!(out.contains("(h800, compute capability 9.0)"), "{out}");
    // A power limit is shown only where it caps the GPU below its rating.
    let (ok, out, err) = autoplan(&["show", "--cluster", "grand-teton-h100"]);
    assert!(ok, "{err}");
    assert!(out.contains("700 W rated, run at a 500 W limit"), "{out}");
}

#[test]
fn show_unknown_cluster_fails_with_the_bundled_names() {
    let (ok, _, err) = autoplan(&["show", "--cluster", "a100x65"]);
    assert!(!ok);
    assert!(err.contains("a100x65") && err.contains("a100x64"), "{err}");
}

#[test]
fn show_bad_cluster_file_names_file_line_and_field() {
    let dir = std::env::temp_dir().join(format!("autoplan-cli-show-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    let text = autoplan_cluster::bundled_cluster_text("a100x64").unwrap();
    std::fs::write(&path, text.replace("bwurate = 0.96", "bwurate = 1.5")).unwrap();
    let (ok, _, err) = autoplan(&["show", "--cluster", path.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).ok();
    assert!(!ok);
    let line = text.lines().position(|l| l.starts_with("bwurate")).unwrap() + 1;
    assert!(
        err.contains(&format!("bad.toml:{line}:1: efficiency.bwurate = 1.5")),
        "{err}"
    );
}

/// A power limit at the rating caps nothing (`Gpu::power_capped`): shown as the rating alone.
#[test]
fn show_cluster_power_limit_at_the_rating_is_no_cap() {
    let dir = std::env::temp_dir().join(format!("autoplan-cli-show-pw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("uncapped.toml");
    let text = autoplan_cluster::bundled_cluster_text("grand-teton-h100").unwrap();
    std::fs::write(
        &path,
        text.replace("power_limit_w = 500", "power_limit_w = 700"),
    )
    .unwrap();
    let (ok, out, err) = autoplan(&["show", "--cluster", path.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).ok();
    assert!(ok, "{err}");
    assert!(out.contains("power   700 W rated\n"), "{out}");
    assert!(!out.contains("limit"), "{out}");
}
