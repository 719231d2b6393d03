//! Issue 21, item 5: `--fix` narrows the space and says so when it cannot; `evaluate` refuses
//! knobs the model has no use for or that exceed its shape, and `--emit megatron` never exports
//! them.

mod common;
use common::autoplan;

/// A failed run: a non-zero exit that is not a panic, and the stderr.
fn refused(args: &[&str]) -> String {
    let (code, out, err) = autoplan(args);
    assert!(
        code.is_some_and(|c| c != 0 && c != 101),
        "{args:?}: exit {code:?}\n{out}{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.is_empty(), "{args:?}: {out}");
    err
}

const SEARCH: &[&str] = &[
    "search",
    "--model",
    "llama3-8b",
    "--cluster",
    "a100x64",
    "--space",
    "quick",
    "--top",
    "1",
    "--fix",
];

#[test]
fn fix_rejects_a_knob_given_twice() {
    let err = refused(&[SEARCH, &["tp=1,tp=8"]].concat());
    assert!(
        err.contains("--fix `tp=8`: `tp` is fixed twice (first `tp=1`)"),
        "{err}"
    );
}

#[test]
fn fix_rejects_values_outside_the_space() {
    let err = refused(&[SEARCH, &["schedule=dualpipe"]].concat());
    assert!(
        err.contains("--fix `schedule=dualpipe`: schedule=dualpipe is not in the space")
            && err.contains("schedule=1f1b|interleaved"),
        "{err}"
    );
    // A listed value, and what plans show where the knob does not apply, are fine.
    for fix in ["schedule=interleaved", "sp=off,tp=1"] {
        let (code, _, err) = autoplan(&[SEARCH, &[fix]].concat());
        assert_eq!(code, Some(0), "{fix}: {err}");
    }
}

const EVALUATE: &[&str] = &[
    "evaluate",
    "--model",
    "llama3-8b",
    "--cluster",
    "a100x64",
    "--gpus",
    "8",
    "--plan",
];

#[test]
fn evaluate_and_emit_refuse_moe_knobs_on_a_dense_model() {
    for (plan, says) in [
        ("tp=8,ep=2", "ep=2 and moe_tp=1 need an MoE model"),
        ("tp=4,moe_tp=2", "ep=1 and moe_tp=2 need an MoE model"),
        (
            "tp=8,dispatcher=deepep",
            "dispatcher=deepep does not apply to llama3-8b",
        ),
        (
            "tp=8,placement=balanced:2",
            "placement=balanced:2 does not apply to llama3-8b",
        ),
        (
            "tp=8,ep_overlap=on",
            "ep_overlap=on does not apply to llama3-8b",
        ),
        (
            "tp=8,moe_tp_scheme=scatter-gather",
            "moe_tp_scheme=scatter-gather does not apply to llama3-8b",
        ),
        (
            "tp=8,recompute=full,recompute_layers=999",
            "recompute_layers=999 is more than the 32 blocks",
        ),
    ] {
        for extra in [&[][..], &["--format", "json"], &["--emit", "megatron"]] {
            let args = [EVALUATE, &[plan], extra].concat();
            let (code, out, err) = autoplan(&args);
            assert!(
                code.is_some_and(|c| c != 0 && c != 101),
                "{args:?}: exit {code:?}\n{out}{err}"
            );
            assert!(
                err.contains(says) || out.contains(says),
                "{args:?}: {out}{err}"
            );
            assert!(!out.contains("--"), "{args:?} exported: {out}");
        }
    }
    // The same knobs at their defaults, and a valid recompute_layers, are exported.
    let (code, out, err) = autoplan(
        &[
            EVALUATE,
            &[
                "tp=8,dispatcher=all-to-all,recompute=full,recompute_layers=4",
                "--emit",
                "megatron",
            ],
        ]
        .concat(),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("--recompute-num-layers 4"), "{out}");
    assert!(!out.contains("dispatcher"), "{out}");
}
