//! Issue 16, item 2: the model families end to end — `show`, `evaluate` and `search` on a
//! family with parallel attention + MLP blocks (GPT-NeoX-20B) and one with ALiBi and an
//! embedding norm (BLOOM-176B).

mod common;
use common::autoplan;

#[test]
fn show_names_the_family_and_its_blocks() {
    let (code, out, err) = autoplan(&["show", "--model", "gpt-neox-20b"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("model gpt-neox-20b (gpt-neox)"), "{out}");
    assert!(out.contains("parallel attention+MLP blocks"), "{out}");
    assert!(out.contains("20.55B"), "{out}");
    let (code, out, err) = autoplan(&["show", "--model", "bloom-176b"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("alibi positions") && out.contains("embedding norm"),
        "{out}"
    );
    assert!(out.contains("176.25B"), "{out}");
}

#[test]
fn evaluate_prices_one_reduction_per_parallel_block() {
    let (code, out, err) = autoplan(&[
        "evaluate",
        "--model",
        "gpt-neox-20b",
        "--cluster",
        "selene-a100",
        "--gpus",
        "16",
        "--global-batch",
        "64",
        "--plan",
        "tp=2,pp=4,mbs=1,recompute=full,zero=1",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("attention out all-reduce (g)"), "{out}");
    assert!(out.contains("mlp input-grad all-reduce (f)"), "{out}");
    assert!(!out.contains("mlp out all-reduce (g)"), "{out}");
}

#[test]
fn search_plans_a_parallel_block_model() {
    let (code, out, err) = autoplan(&[
        "search",
        "--model",
        "gpt-neox-20b",
        "--cluster",
        "a100x64",
        "--space",
        "quick",
        "--top",
        "1",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("gpt-neox-20b on a100x64"), "{out}");
}
