//! A deterministic synthetic [`Planner`](crate::Planner) for testing the sweep machinery
//! (order, resume, shards, merge) without the real search, and for examples.
//!
//! Its numbers mean nothing: plans and metrics are simple arithmetic on the case keys. It is
//! infeasible when the global batch is smaller than the GPU count (no data-parallel split),
//! and its reasons contain a comma, a quote and a line break, to exercise CSV quoting.

use std::time::Duration;

use autoplan_plan::{Plan, Recompute};

use crate::{Case, Infeasible, Metrics, RankedPlan};

/// See the module docs. `delay_us(case)` microseconds are slept per case, to scramble the
/// completion order under several threads.
#[derive(Debug, Clone, Copy, Default)]
pub struct SyntheticPlanner {
    /// Sleep up to this many microseconds per case (varies by case), 0 for none.
    pub max_delay_us: u64,
}

impl SyntheticPlanner {
    fn delay_us(&self, case: &Case) -> u64 {
        if self.max_delay_us == 0 {
            return 0;
        }
        // Later cases finish first: the reverse of the canonical order.
        let spread = (case.index as u64 * 7919) % 17;
        self.max_delay_us * (16 - spread) / 16
    }
}

impl crate::Planner for SyntheticPlanner {
    fn plan(&self, case: &Case) -> Result<Vec<RankedPlan>, Infeasible> {
        std::thread::sleep(Duration::from_micros(self.delay_us(case)));
        if case.global_batch < case.gpus {
            return Err(Infeasible {
                reason: format!(
                    "global batch {} < {} GPUs, \"no DP split\"\nat any degree",
                    case.global_batch, case.gpus
                ),
            });
        }
        let tokens = case.global_batch as f64 * case.seq_len as f64;
        // Fewer plans than top_k on small clusters, to exercise short blocks.
        let n = (case.gpus.trailing_zeros() as usize)
            .min(case.top_k as usize)
            .max(1);
        Ok((0..n)
            .map(|r| {
                let tp = 1u32 << r.min(3);
                let plan = Plan {
                    tp,
                    dp: case.gpus / tp,
                    mbs: 1 + (case.model.len() as u32 % 2),
                    recompute: if r % 2 == 0 {
                        Recompute::None
                    } else {
                        Recompute::Selective
                    },
                    ..Plan::default()
                };
                let step = tokens / (case.gpus as f64 * 1e4) * (1.0 + 0.1 * r as f64);
                RankedPlan {
                    plan,
                    metrics: Metrics {
                        step_time_s: step,
                        tokens_per_s: tokens / step,
                        tokens_per_s_per_gpu: tokens / step / case.gpus as f64,
                        mfu: 0.5 / (1.0 + 0.1 * r as f64),
                        memory_peak_bytes: 1e9 * (8.0 + r as f64) + case.seq_len as f64,
                        exposed_comm_s: step * 0.02,
                        bubble_s: step * 0.05 * r as f64,
                        dominant_comm: "dp".into(),
                        dominant_comm_exposed_s: step * 0.01,
                        dominant_collective: format!("all-reduce ring inter-node (x{})", r + 1),
                    },
                }
            })
            .collect())
    }
}
