//! Weak scaling: twice the data-parallel replicas, each with the same micro-batches, is never a
//! shorter step where nothing is sharded over them (`zero=0`: every replica holds and updates
//! the whole model, so its compute, memory and optimizer step are the same, and the gradient
//! all-reduce spans twice the ranks and at least as many nodes). `tools/scale_variants.py`
//! probes the same on the public rows; this pins it over a grid of plans.

use autoplan_cluster::resolve_cluster;
use autoplan_evaluate::{EvalOptions, Evaluator};
use autoplan_graph::{resolve_model, ModelSpec};
use autoplan_plan::{Plan, Recompute, Zero};

#[test]
fn twice_the_replicas_never_shorten_an_unsharded_step() {
    let cluster = resolve_cluster("h100x256").unwrap();
    let step = |m: &ModelSpec, p: &Plan| {
        let c = cluster.clone().with_gpus(p.gpus() as u32).ok()?;
        Evaluator::new(m, &c, EvalOptions::default())
            .evaluate(p)
            .ok()
            .map(|r| r.step_time_s)
    };
    let mut n = 0;
    for model in ["llama3-8b", "mixtral-8x7b", "gpt3-20b"] {
        let mut m = resolve_model(model).unwrap();
        let moe = m.moe.is_some();
        for (tp, pp) in [(1, 1), (2, 1), (4, 2), (8, 2), (2, 4)] {
            for dp in [1, 2, 4, 8] {
                for ep in [1, 2, 8] {
                    for (mbs, micro) in [(1, 1), (1, 8), (2, 4)] {
                        for recompute in [Recompute::None, Recompute::Full] {
                            if ep > 1 && (!moe || (tp * dp) % ep != 0) {
                                continue;
                            }
                            let plan = Plan {
                                tp,
                                sp: tp > 1,
                                pp,
                                dp,
                                ep,
                                mbs,
                                recompute,
                                zero: Zero::stage(0),
                                ..Plan::default()
                            };
                            m.training.global_batch = mbs * dp * micro;
                            let Some(one) = step(&m, &plan) else { continue };
                            m.training.global_batch *= 2;
                            let wide = Plan { dp: 2 * dp, ..plan };
                            // The same replica on twice the GPUs fits as it did.
                            let two = step(&m, &wide).expect("the doubled plan evaluates");
                            assert!(
                                two >= one * (1.0 - 1e-12),
                                "{model} {plan}: {two} s at dp {} < {one} s",
                                2 * dp
                            );
                            n += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(n >= 150, "{n} plans");
}
