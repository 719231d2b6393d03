//! Issue 22 item 2: every bundled MoE model declares its expected routing imbalance
//! (`load_imbalance`, max/mean tokens per expert) with where the figure comes from, or states
//! that it assumes balance and why (`load_imbalance_source`).

use autoplan_graph::{bundled_models, resolve_model, RawModelFile};
use autoplan_input::Source;

#[test]
fn every_bundled_moe_model_states_its_imbalance_and_source() {
    let mut moe_models = 0;
    for (name, text) in bundled_models() {
        let raw: RawModelFile = Source::new(format!("{name}.toml"), *text)
            .parse()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let Some(moe) = raw.moe else { continue };
        moe_models += 1;
        let v = moe
            .load_imbalance
            .unwrap_or_else(|| panic!("{name}: no moe.load_imbalance"));
        let src = moe
            .load_imbalance_source
            .unwrap_or_else(|| panic!("{name}: no moe.load_imbalance_source"));
        assert!(src.trim().len() >= 20, "{name}: source too short: {src:?}");
        // "Assumes balance" goes with 1.0; a measured figure above 1 names its source
        // (a section, table or figure).
        if src.starts_with("assumes balance") {
            assert_eq!(v, 1.0, "{name}: assumes balance but load_imbalance = {v}");
        } else {
            assert!(v > 1.0, "{name}: a measured figure of {v}");
            assert!(src.contains('§') || src.contains("Table") || src.contains("Figure"));
        }
        assert_eq!(resolve_model(name).unwrap().moe.unwrap().load_imbalance, v);
    }
    assert!(moe_models >= 7, "{moe_models}");
}
