//! Activations in flight when Megatron's pipeline split counts the embedding and the loss
//! (`pipeline_split=embedding+loss`): stage 0's first model chunk holds the embedding alone.

use autoplan_graph::resolve_model;
use autoplan_memory::{MemoryOptions, ModelMemory};
use autoplan_plan::Plan;

#[test]
fn the_embedding_chunk_holds_no_block_activations_in_flight() {
    // Qwen3-235B-A22B (94 blocks), pp = 32, vpp = 3, 2048 sequences over dp = 4: 512
    // micro-batches. Stage 0's warm-up leaves 2·31 + 2·32 + 1 = 127 forwards in flight, in
    // groups of 32 per chunk: chunk 0 (the embedding) 63, chunks 1 and 2 (a block each) 32.
    // In units of the stage's two blocks: (32 + 32)/2 = 32 micro-batches, not 127/3.
    let mut m = resolve_model("qwen3-235b-a22b").unwrap();
    m.training.global_batch = 2048;
    let mm = ModelMemory::new(&m);
    let o = MemoryOptions::default();
    let p: Plan = "tp=2,sp=on,pp=32,dp=4,ep=8,schedule=interleaved,vpp=3,mbs=1,\
                   pipeline_split=embedding+loss"
        .parse()
        .unwrap();
    assert_eq!(p.check(&m, 256), Ok(()));
    let s0 = mm.stage_breakdown(&p, &o, 0);
    assert!((s0.in_flight - 32.0).abs() < 1e-9, "{}", s0.in_flight);
    // Stage 1: one block per chunk, 2·30 + 2·32 + 1 = 125 forwards, 125/3 stages' worth.
    let s1 = mm.stage_breakdown(&p, &o, 1);
    assert!(
        (s1.in_flight - 125.0 / 3.0).abs() < 1e-9,
        "{}",
        s1.in_flight
    );
    // The last stage: (vpp−1)·pp + 1 = 65 forwards, 32 on each of its two block chunks and one
    // on the loss chunk: 64 block-forwards over 2 blocks.
    let last = mm.stage_breakdown(&p, &o, 31);
    assert!((last.in_flight - 32.0).abs() < 1e-9, "{}", last.in_flight);
    // The busiest GPU is then stage 1's, not stage 0's.
    let b = mm.breakdown(&p, &o);
    assert_eq!(b.stage, 1);
}
