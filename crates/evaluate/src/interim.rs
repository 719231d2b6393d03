//! Stand-in for `memory()` (autoplan-memory) while that crate is being written; replaced by a
//! call to it as soon as it lands.

use autoplan_graph::ModelSpec;
use autoplan_plan::{Plan, Recompute, Zero};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MemoryOptions {
    pub reserve_bytes: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct MemoryBreakdown {
    pub weights: f64,
    pub gradients: f64,
    pub optimizer: f64,
    pub activations: f64,
    pub reserve: f64,
    pub peak_bytes: f64,
}

/// Interim estimate: 16-bit weights, fp32 gradients, 12 B/param Adam state sharded per ZeRO,
/// Korthikanti activations (SP splits all of them over tp, without SP 10/34 stay replicated;
/// the `s×s` scores only without flash attention) × the micro-batches in flight on the first
/// stage (1F1B: pp; interleaved: pp·(1 + (pp−1)/(pp·vpp))).
/// Per-model sums the interim memory estimate needs (computed once).
#[derive(Debug, Clone, Copy, Default)]
pub struct MemSums {
    dense: f64,
    expert: f64,
    act_tok: f64,
    score_tok: f64,
    logits_tok: f64,
}

impl MemSums {
    pub fn of(model: &ModelSpec) -> MemSums {
        let mut m = MemSums::default();
        for l in model.layers() {
            m.dense += l.non_expert_params();
            m.expert += l.experts as f64 * l.expert_params;
            if l.kind == autoplan_graph::LayerKind::CrossEntropy {
                m.logits_tok += l.act_bytes_per_token;
            } else {
                m.act_tok += l.act_bytes_per_token;
                m.score_tok += l.attn_score_bytes_per_token;
            }
        }
        m
    }
}

pub fn memory(
    model: &ModelSpec,
    sums: &MemSums,
    plan: &Plan,
    opts: &MemoryOptions,
    flash: bool,
) -> MemoryBreakdown {
    let pp = plan.pp.max(1) as f64;
    let tp = plan.tp.max(1) as f64;
    let dpcp = (plan.dp * plan.cp).max(1) as f64;
    let edp = plan.edp().max(1) as f64;
    let epmt = (plan.ep * plan.moe_tp).max(1) as f64;
    let MemSums {
        dense,
        expert,
        act_tok,
        score_tok,
        logits_tok,
    } = *sums;
    let p_d = dense / tp / pp;
    let p_e = expert / epmt / pp;
    let weights = 2.0 * (p_d + p_e);
    let zg = |z: u8, s: f64| if plan.zero >= Zero(z) { s } else { 1.0 };
    let w = if plan.zero >= Zero(3) {
        weights / dpcp
    } else {
        weights
    };
    let gradients = 4.0 * (p_d / zg(2, dpcp) + p_e / zg(2, edp));
    let optimizer = 12.0 * (p_d / zg(1, dpcp) + p_e / zg(1, edp));
    let tokens = plan.mbs as f64 * model.training.seq_len as f64 / plan.cp.max(1) as f64;
    let split = if plan.sp || plan.tp == 1 {
        1.0 / tp
    } else {
        10.0 / 34.0 + 24.0 / 34.0 / tp
    };
    let blocks = model.layers.max(1) as f64;
    let per_block = match plan.recompute {
        Recompute::Full => 2.0 * model.hidden as f64 * tokens * split,
        Recompute::Selective => act_tok / blocks * tokens * split,
        Recompute::None => {
            (act_tok + if flash { 0.0 } else { score_tok }) / blocks * tokens * split
        }
    };
    let mut in_flight = pp.min((model.training.global_batch / (plan.mbs * plan.dp).max(1)) as f64);
    if plan.vpp > 1 {
        in_flight *= 1.0 + (pp - 1.0) / (pp * plan.vpp as f64);
    }
    let logits = logits_tok * tokens / tp;
    let activations = per_block * blocks / pp * in_flight + logits;
    let reserve = opts.reserve_bytes;
    let peak = w + gradients + optimizer + activations + reserve;
    MemoryBreakdown {
        weights: w,
        gradients,
        optimizer,
        activations,
        reserve,
        peak_bytes: peak,
    }
}
