//! Offload in the search: the space's `offload_optimizer` list (file, `--fix`, framework
//! restriction) and the DeepSeek-V3-on-64-A100s case, where only offloaded plans fit (the
//! memory floor must take the most offloaded value still open, or it prunes them all).

use autoplan_cluster::resolve_cluster;
use autoplan_evaluate::EvalOptions;
use autoplan_graph::resolve_model;
use autoplan_input::{InputError, Source};
use autoplan_plan::Framework;
use autoplan_search::{
    framework::restrict, resolve_space, search_case_for, SearchOptions, Space, Target,
};

fn default_with(list: &str) -> Result<Space, InputError> {
    default_with_lines(&format!("offload_optimizer = {list}"))
}

#[test]
fn space_lists_sorted_fractions_and_names_bad_ones() {
    let s = default_with("[1, 0, 0.5, \"25%\"]").unwrap();
    assert_eq!(s.offload_optimizer, vec![0, 25, 50, 100]);
    // Absent: no offload.
    assert_eq!(resolve_space("default").unwrap().offload_optimizer, vec![0]);
    let e = default_with("[0, 1.5]").unwrap_err().to_string();
    assert!(
        e.contains("memory.offload_optimizer") && e.contains("1.5"),
        "{e}"
    );
    let mut s = default_with("[0, 0.5, 1]").unwrap();
    s.fix("offload_optimizer=0.5").unwrap();
    assert_eq!(s.offload_optimizer, vec![50]);
    let mut s = resolve_space("default").unwrap();
    let e = s.fix("offload_optimizer=1").unwrap_err().to_string();
    assert!(e.contains("not in the space"), "{e}");
}

#[test]
fn frameworks_restrict_the_offload_list() {
    let s = default_with("[0.5, 1]").unwrap();
    // torchtitan has no optimizer-only offload; Megatron runs it with zero=1 only, so no
    // offload stays a choice for the other plans.
    assert_eq!(
        restrict(&s, Framework::TorchTitan)
            .unwrap()
            .offload_optimizer,
        vec![0]
    );
    assert_eq!(
        restrict(&s, Framework::default())
            .unwrap()
            .offload_optimizer,
        vec![0, 50, 100]
    );
    assert_eq!(
        restrict(&s, Framework::Any).unwrap().offload_optimizer,
        vec![50, 100]
    );
}

#[test]
fn deepseek_v3_on_a100x64_fits_only_with_offload() {
    let model = resolve_model("deepseek-v3").unwrap();
    let cluster = resolve_cluster("a100x64").unwrap();
    let opts = SearchOptions {
        top_k: 3,
        exhaustive: false,
    };
    let run = |space: &Space| {
        search_case_for(
            &model,
            &cluster,
            EvalOptions::default(),
            Target::default(),
            space,
            &opts,
            &(),
        )
        .unwrap()
        .outcome
    };
    let none = run(&resolve_space("default").unwrap());
    assert!(none.plans.is_empty() && none.no_fit.is_some());
    let off = run(&default_with("[0, 0.25, 0.5, 0.75, 1]").unwrap());
    assert!(
        !off.plans.is_empty(),
        "the memory floor pruned every offloaded plan"
    );
    for r in &off.plans {
        assert!(r.plan.offload_optimizer > 0, "{}", r.plan);
        assert_eq!(
            r.plan.zero.stage, 1,
            "Megatron offloads on the distributed optimizer"
        );
    }
}

/// The default space with `[memory]` lines added after its ZeRO list.
fn default_with_lines(lines: &str) -> Result<Space, InputError> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../search_spaces/default.toml"
    ))
    .unwrap()
    .replace(
        "zero = [0, 1, 2, 3]\n",
        &format!("zero = [0, 1, 2, 3]\n{lines}\n"),
    );
    Space::from_source(&Source::new("offload.toml", text))
}

/// `offload_params` and `offload_activations` lists: read from a space file (counts and
/// `all`, sorted), fixed by `--fix`, named when bad, and narrowed per framework: Megatron-Core
/// never offloads parameters nor every layer, DeepSpeed activations only as `all`, torchtitan
/// no activations (an error where nothing else is listed).
#[test]
fn parameter_and_activation_offload_lists() {
    use autoplan_plan::offload_activations::ALL;
    let s = default_with_lines(
        "offload_optimizer = [0, 1]\noffload_params = [true, false]\n\
         offload_activations = [\"all\", 4, 0, 1]",
    )
    .unwrap();
    assert_eq!(s.offload_params, vec![false, true]);
    assert_eq!(s.offload_activations, vec![0, 1, 4, ALL]);
    let d = resolve_space("default").unwrap();
    assert_eq!(
        (d.offload_params.clone(), d.offload_activations),
        (vec![false], vec![0])
    );
    let e = default_with_lines("offload_activations = [0, \"some\"]")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("memory.offload_activations") && e.contains("some"),
        "{e}"
    );
    let mut f = s.clone();
    f.fix("offload_activations=all,offload_params=on").unwrap();
    assert_eq!(
        (f.offload_activations, f.offload_params),
        (vec![ALL], vec![true])
    );

    let m = restrict(&s, Framework::default()).unwrap();
    assert_eq!(m.offload_params, vec![false]);
    assert_eq!(m.offload_activations, vec![0, 1, 4]);
    let ds = restrict(&s, Framework::DeepSpeed).unwrap();
    assert_eq!(ds.offload_params, vec![false, true]);
    assert_eq!(ds.offload_activations, vec![0, ALL]);
    let tt = restrict(&s, Framework::TorchTitan).unwrap();
    assert_eq!(tt.offload_activations, vec![0]);
    // torchtitan's optimizer offload comes with the parameters: kept where they are listed.
    assert_eq!(tt.offload_optimizer, vec![0, 100]);
    let mut only = s.clone();
    only.fix("offload_activations=all").unwrap();
    let e = restrict(&only, Framework::default()).unwrap_err();
    assert!(e.contains("activation offloads (all)"), "{e}");
}
