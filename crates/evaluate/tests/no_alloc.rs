//! The crate's Architecture Invariant: `Evaluator::evaluate` allocates nothing (the search calls
//! it millions of times). A counting allocator, per thread, around `evaluate` calls on plans
//! that exercise every path: dense and MoE, TP/SP/CP, all recompute modes and module sets, every
//! dispatcher, DualPipe and interleaving, balanced placement, plans over HBM and invalid ones.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use autoplan_evaluate::{EvalOptions, Evaluator};
use autoplan_plan::Plan;

struct Counting;

thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        COUNT.with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations(f: impl FnOnce()) -> u64 {
    let before = COUNT.with(|c| c.get());
    f();
    COUNT.with(|c| c.get()) - before
}

#[test]
fn evaluate_allocates_nothing() {
    let cases: [(&str, &str, &[&str]); 3] = [
        (
            "deepseek-v3",
            "h800x2048",
            &[
                "tp=1,pp=16,ep=64,schedule=dualpipe,zero=1,ep_overlap=on,dispatcher=deepep,\
                 recompute=selective:layernorm+mla_up_proj+moe_act",
                "tp=2,sp=on,cp=2,pp=4,schedule=interleaved,vpp=4,ep=32,zero=2,recompute=full",
                "tp=1,pp=8,ep=64,moe_tp=2,zero=3,recompute=selective:moe+mlp+shared_experts,\
                 dispatcher=all-gather,placement=balanced:2",
                "tp=1,pp=16,ep=64,schedule=dualpipe,zero=1,recompute=selective",
            ],
        ),
        (
            "gpt3-175b",
            "a100x1024",
            &[
                "tp=8,sp=on,pp=8,schedule=interleaved,vpp=3,recompute=selective,zero=1",
                "tp=4,sp=on,cp=2,pp=8,recompute=selective:layernorm+mlp,cp_comm=a2a,\
                 transition=all-to-all,algo=nccl-like",
                "tp=8,pp=4,recompute=full,recompute_layers=2,tp_overlap=on",
                "tp=3,pp=8,dp=40",
            ],
        ),
        (
            "mixtral-8x7b",
            "h100x256",
            &[
                "tp=2,sp=on,pp=4,ep=8,moe_tp=2,moe_tp_scheme=scatter-gather,recompute=selective:moe_act",
                "tp=1,pp=2,ep=8,dispatcher=deepep,schedule=zero-bubble,recompute=none",
            ],
        ),
    ];
    for (model, cluster, plans) in cases {
        let m = autoplan_graph::resolve_model(model).unwrap();
        let c = autoplan_cluster::resolve_cluster(cluster).unwrap();
        let gpus = c.gpus() as u64;
        let ev = Evaluator::new(&m, &c, EvalOptions::default());
        for s in plans {
            let plan = Plan::parse_for_gpus(s, gpus).unwrap();
            // Warm the once-per-evaluator caches (balanced-placement imbalances).
            let first = ev.evaluate(&plan);
            let n = allocations(|| {
                for _ in 0..3 {
                    let again = ev.evaluate(&plan);
                    assert_eq!(again, first);
                }
            });
            assert_eq!(n, 0, "{model} {s}: {n} allocations ({first:?})");
        }
    }
}
