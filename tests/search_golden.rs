//! Golden top plans of bundled cases: a change of the cost model that moves the ranking shows
//! up in review as a diff of `tests/golden/search_*.txt`. Regenerate with
//! `UPDATE_GOLDEN=1 cargo test --test search_golden`.

use autoplan::cluster::resolve_cluster;
use autoplan::evaluate::EvalOptions;
use autoplan::graph::resolve_model;
use autoplan::search::{resolve_space, search_case_for, SearchOptions, Target};

fn golden(model: &str, cluster: &str, space: &str) {
    let m = resolve_model(model).expect("bundled model");
    let c = resolve_cluster(cluster).expect("bundled cluster");
    let sp = resolve_space(space).expect("bundled space");
    // `autoplan search`'s defaults: Megatron-Core and its cost profile, 2 GiB of headroom
    // (unfolded here: the golden pins the raw ranking).
    let out = search_case_for(
        &m,
        &c,
        EvalOptions::default()
            .with_profile(&Target::default().framework.profile(), m.training.precision),
        Target::default(),
        &sp,
        &SearchOptions {
            top_k: 5,
            exhaustive: false,
        },
        &(),
    )
    .expect("Megatron-Core runs plans of the space")
    .outcome;
    let mut text = format!(
        "# autoplan search --model {model} --cluster {cluster} --space {space} --top 5 --fold 0\n"
    );
    for (i, r) in out.plans.iter().enumerate() {
        text.push_str(&format!(
            "{} {:.4} s  mfu {:.2}%  mem {:.2} GiB  {}\n",
            i + 1,
            r.metrics.step_time_s,
            100.0 * r.metrics.mfu,
            r.metrics.memory_peak_bytes / (1024.0 * 1024.0 * 1024.0),
            r.plan
        ));
    }
    let path = format!(
        "{}/tests/golden/search_{model}_{cluster}_{space}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (UPDATE_GOLDEN=1 to create it)"));
    assert_eq!(
        text, want,
        "the ranking moved; if intended, UPDATE_GOLDEN=1 and review the diff"
    );
}

#[test]
fn llama3_8b_on_a100x64() {
    golden("llama3-8b", "a100x64", "default");
}

#[test]
fn gpt3_175b_on_a100x1024() {
    golden("gpt3-175b", "a100x1024", "default");
}

#[test]
fn mixtral_8x22b_on_h100x256() {
    golden("mixtral-8x22b", "h100x256", "moe");
}

#[test]
fn deepseek_v3_on_h800x2048() {
    // MLA + MoE: the space's Megatron-Core recompute module sets all apply.
    golden("deepseek-v3", "h800x2048", "default");
}
