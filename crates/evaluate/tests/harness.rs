//! What NeMo's performance scripts set beyond a row's cells (`validate/harness.rs`): the
//! BF16 gradient reduction of the 25.04–25.09 containers' runs, and DeepSeek-V3 on H100 with
//! DeepEP and no TP-communication overlap — each only where the row leaves it unsaid; and the
//! reduction dtype a row names (Composer's `PURE` mixed precision).

mod common;

use autoplan_evaluate::validate::{case_of, Case, PublishedRun};
use autoplan_plan::Dispatcher;
use common::{cluster_for, row};

fn case(r: &PublishedRun) -> Case {
    case_of(r, &|n| autoplan_graph::resolve_model(n).ok(), &cluster_for).expect(&r.id)
}

#[test]
fn deepseek_v3_on_h100_in_a_nemo_container_runs_deepep_and_reduces_in_bf16() {
    let r = row("bridge2509_h100_DeepSeekV3_1024gpu_not");
    let c = case(&r);
    assert_eq!(c.plan.dispatcher, Dispatcher::DeepEp);
    assert!(!c.plan.tp_overlap);
    assert_eq!(c.options.grad_bytes, 2.0);
    // A dispatcher or TP overlap the notes name stands.
    let mut named = r.clone();
    named.notes = Some("Dispatcher alltoall; TP comm overlap on".into());
    let c = case(&named);
    assert_eq!(c.plan.dispatcher, Dispatcher::AllToAll);
    assert!(c.plan.tp_overlap);
    // 25.04's scripts set no dispatcher and reduce BF16 runs in FP32 (FP8 ones in BF16).
    let mut older = r.clone();
    older.source = r.source.replace("25.09", "25.04");
    let c = case(&older);
    assert_eq!(c.plan.dispatcher, Dispatcher::AllToAll);
    assert_eq!(c.options.grad_bytes, 2.0, "read as block-scaled FP8");
    older.precision = Some("bf16".into());
    assert_eq!(case(&older).options.grad_bytes, 4.0);
}

#[test]
fn other_gpus_and_older_tables_keep_their_defaults() {
    // Megatron-Bridge's 25.11 table was not made by NeMo 2.6.0's scripts (its "dropless"
    // DeepSeek-V3 on GB200, where those scripts drop tokens): Megatron's defaults.
    let c = case(&row("bridge2511_gb200_DeepSeekV3_256gpu_bf16"));
    assert_eq!(c.plan.dispatcher, Dispatcher::AllToAll);
    assert_eq!(c.options.grad_bytes, 4.0);
    // In a 25.09 table the same row's gradients would be BF16, its dispatcher the all-to-all
    // (DeepEP is the scripts' choice on H100 only).
    let mut r = row("bridge2511_gb200_DeepSeekV3_256gpu_bf16");
    r.source = r.source.replace("25.11", "25.09");
    let c = case(&r);
    assert_eq!(c.plan.dispatcher, Dispatcher::AllToAll);
    assert_eq!(c.options.grad_bytes, 2.0);
    // NeMo 24.07 ran the launcher's configurations (not read): Megatron's FP32 reduction.
    let c = case(&row("nemo2407_h100_LLAMA3-70B_64gpu"));
    assert_eq!(c.options.grad_bytes, 4.0);
    // A ModelZoo row is not a NeMo table's.
    let c = case(&row("mzoo_h100_Qwen3_235B_a22B_xnode_ep32"));
    assert_eq!(c.options.grad_bytes, 4.0);
}

#[test]
fn composers_pure_mixed_precision_reduces_in_the_training_dtype() {
    // llm-foundry's A100 MPT-70B row names Composer's PURE mode: FSDP reduces in BF16; its
    // H100 rows (amp_bf16, no mode) keep FP32.
    assert_eq!(case(&row("mpt_70b_64xa100")).options.grad_bytes, 2.0);
    assert_eq!(case(&row("mpt_70b_512xh100")).options.grad_bytes, 4.0);
}
