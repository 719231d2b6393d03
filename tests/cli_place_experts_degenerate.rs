//! `place-experts` on small instances with uniform loads: their LPs (the LP lower bound, the
//! routing LP) are so degenerate that microlp stalls on them or reports a singular basis.
//! Both LP stages are optional: the command must still answer, falling back to the
//! combinatorial bound and the nearest-copy routing (found by the fuzz harness, tools/fuzz).

mod common;
use common::autoplan;

#[test]
fn uniform_loads_on_small_groups_answer() {
    for (experts, ep, slots) in [("16", "16", "2"), ("32", "8", "5"), ("16", "8", "2")] {
        let args = [
            "place-experts",
            "--cluster",
            "a100x64",
            "--experts",
            experts,
            "--ep",
            ep,
            "--slots",
            slots,
            "--uniform",
            "--format",
            "json",
        ];
        let (rc, out, err) = autoplan(&args);
        assert_eq!(rc, Some(0), "{args:?}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("JSON report");
        let objective = v["objective_s"].as_f64().expect("objective_s");
        let bound = v["lower_bound_s"].as_f64().expect("lower_bound_s");
        assert!(
            objective.is_finite() && objective > 0.0,
            "{args:?}: {objective}"
        );
        assert!(
            bound > 0.0 && bound <= objective * (1.0 + 1e-9),
            "{args:?}: bound {bound} vs objective {objective}"
        );
        let kind = v["bound_kind"].as_str().expect("bound_kind");
        assert!(
            ["lp-relaxation", "combinatorial-lp-unavailable"].contains(&kind),
            "{args:?}: {kind}"
        );
        let p: usize = ep.parse().unwrap();
        assert_eq!(v["placement"].as_array().unwrap().len(), p, "{args:?}");
    }
}
