//! The bundled cluster files and the cost crate's calibrated reference machines
//! (`autoplan_cost::calibration`) describe the same hardware with the same numbers: the files
//! are what users run, the presets are what `collectives_measured.csv` validated.

use autoplan_cluster::{resolve_cluster, Cluster};
use autoplan_cost::calibration;

/// Equal up to the rounding of a unit conversion.
#[track_caller]
fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()),
        "{what}: {a} vs {b}"
    );
}

fn numbers(c: &Cluster) -> Vec<(&'static str, f64)> {
    vec![
        ("nodes", f64::from(c.nodes)),
        ("gpus_per_node", f64::from(c.node.gpus_per_node)),
        ("intra_bw", c.node.intra_bw),
        ("intra_latency", c.node.intra_latency),
        ("inter_bw", c.network.inter_bw),
        ("nics_per_node", f64::from(c.network.nics_per_node)),
        ("oversubscription", c.network.oversubscription),
        ("link_delay", c.network.link_delay),
        ("bwurate", c.efficiency.bwurate),
        ("start_lat", c.efficiency.start_lat),
        ("sync_lat", c.efficiency.sync_lat),
        ("cpufetch", c.efficiency.cpufetch),
        ("hbm_bw", c.gpu.hbm_bw),
        ("hbm_bytes", c.gpu.hbm_bytes),
    ]
}

#[test]
fn bundled_files_match_the_calibrated_machines() {
    for (file, preset) in [
        ("a100x64", calibration::dgx_a100(8)),
        ("h100x256", calibration::dgx_h100(32)),
        ("h800x2048", calibration::hgx_h800(256)),
    ] {
        let c = resolve_cluster(file).unwrap();
        for ((what, a), (_, b)) in numbers(&c).into_iter().zip(numbers(&preset)) {
            close(a, b, &format!("{file} {what}"));
        }
        assert_eq!(c.node.fabric, preset.node.fabric, "{file}");
        assert_eq!(
            c.node.in_switch_reduction, preset.node.in_switch_reduction,
            "{file}"
        );
        assert_eq!(c.network.topology, preset.network.topology, "{file}");
        assert_eq!(c.gpu.arch, preset.gpu.arch, "{file}");
        for (p, f) in &preset.gpu.peak_flops {
            close(c.gpu.peak(*p).unwrap_or(0.0), *f, &format!("{file} {p:?}"));
        }
    }
}
