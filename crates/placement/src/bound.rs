//! A lower bound on the objective that needs no LP, for instances too large for
//! [`crate::exact::lp_lower_bound`] (E=256, P=64 has a million routing variables).
//!
//! Valid for every placement and every routing:
//!
//! * GPU i holds at most L experts, so at least `off_i = D_i − (sum of the L largest C_ie)`
//!   of its `D_i` tokens leave it; its node holds at most `L·G` distinct experts (G GPUs on
//!   the node), so at least `cross_i = D_i − (sum of the L·G largest C_ie)` leave the node.
//! * Each off-GPU token costs at least the cheapest 1/β from i; cross-node ones at least the
//!   cheapest cross-node 1/β. If `off_i > 0` at least one message leaves i and pays the
//!   smallest α. That bounds rank i's dispatch send time, and (reverse links) its combine
//!   receive time.
//! * Every off-GPU token is received somewhere: the slowest receiver takes at least the
//!   mean, `Σ_i off_i · (cheapest 1/β) / P`.
//! * Expert compute: the slowest GPU processes at least the mean load, `Σ_e load_e / P`.
//!
//! The objective is a sum of independent maxima (dispatch, combine, compute), so the sum of
//! their bounds bounds it. For [`Objective::Thesis`] the per-rank send bounds add up instead.

use crate::instance::{Instance, Objective};

/// The combinatorial lower bound (seconds) on the objective of any placement of `inst`.
pub fn combinatorial_bound(inst: &Instance) -> f64 {
    let (p, e_n, l) = (inst.gpus(), inst.experts(), inst.slots());
    let t = inst.topology();
    let bpt = inst.bytes_per_token();
    let mut per_node = vec![0usize; t.nodes()];
    for g in 0..p {
        per_node[t.node_of(g)] += 1;
    }
    let (mut d_max, mut c_max, mut thesis) = (0.0f64, 0.0f64, 0.0f64);
    let (mut recv_total_d, mut recv_total_c) = (0.0, 0.0);
    let mut total_tokens = 0.0;
    let mut row = Vec::with_capacity(e_n);
    for i in 0..p {
        row.clear();
        row.extend((0..e_n).map(|e| inst.demand(i, e)));
        row.sort_by(|a, b| b.total_cmp(a));
        let d: f64 = row.iter().sum();
        total_tokens += d;
        let keep_gpu: f64 = row.iter().take(l).sum();
        let keep_node: f64 = row.iter().take(l * per_node[t.node_of(i)]).sum();
        let off = (d - keep_gpu).max(0.0);
        let cross = (d - keep_node).max(0.0).min(off);
        if off <= 0.0 {
            continue;
        }
        // Cheapest per-byte cost and α from i (dispatch) and back to i (combine).
        let (mut m_d, mut x_d, mut a_d) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
        let (mut m_c, mut x_c, mut a_c) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
        for j in (0..p).filter(|&j| j != i) {
            m_d = m_d.min(t.inv_beta(i, j));
            m_c = m_c.min(t.inv_beta(j, i));
            a_d = a_d.min(t.alpha(i, j));
            a_c = a_c.min(t.alpha(j, i));
            if t.cross_node(i, j) {
                x_d = x_d.min(t.inv_beta(i, j));
                x_c = x_c.min(t.inv_beta(j, i));
            }
        }
        if !m_d.is_finite() {
            continue;
        }
        let cost = |m: f64, x: f64, a: f64| {
            let x = if x.is_finite() { x } else { m };
            a + bpt * (cross * (x - m) + off * m)
        };
        let sd = cost(m_d, x_d, a_d);
        let sc = cost(m_c, x_c, a_c);
        d_max = d_max.max(sd);
        c_max = c_max.max(sc);
        thesis += sd + sc;
        recv_total_d += bpt * off * m_d;
        recv_total_c += bpt * off * m_c;
    }
    let dispatch = d_max.max(recv_total_d / p as f64);
    let combine = c_max.max(recv_total_c / p as f64);
    let compute = inst.compute_s_per_token() * total_tokens / p as f64;
    let comm = match inst.objective() {
        Objective::Thesis => thesis,
        Objective::Synchronous => dispatch + combine,
    };
    comm + compute
}
