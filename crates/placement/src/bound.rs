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
//! * Copy counting ("water-filling"): an expert with c copies has its load processed on c
//!   distinct GPUs, so some copy processes at least load_e / c tokens; and its hosts receive
//!   at least `off_e(c) = load_e − (sum of the c largest C_ie)` tokens from other GPUs, of
//!   which at least `cross_e(c) = load_e − (sum of the min(c, nodes) largest per-node
//!   demands)` from other nodes, so some host receives for e alone at least
//!   `(cross_e·x + (off_e − cross_e)·m)·bytes/c` seconds' worth (x, m: cheapest cross-node and
//!   any-pair 1/β into a GPU). A time T is reachable only if the copies each expert needs to
//!   get under T fit in the P·L slots; the smallest such T (bisection) bounds the slowest
//!   GPU's compute and, the same way, its dispatch receive and combine send time.
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
    let copies = copy_bounds(inst);
    let dispatch = d_max.max(recv_total_d / p as f64).max(copies.recv);
    let combine = c_max.max(recv_total_c / p as f64).max(copies.send);
    let compute = (inst.compute_s_per_token() * total_tokens / p as f64).max(copies.compute);
    let comm = match inst.objective() {
        Objective::Thesis => thesis,
        Objective::Synchronous => dispatch + combine,
    };
    comm + compute
}

struct CopyBounds {
    /// Slowest GPU's dispatch receive time, seconds.
    recv: f64,
    /// Slowest GPU's combine send time, seconds.
    send: f64,
    /// Slowest GPU's expert compute, seconds.
    compute: f64,
}

/// The copy-counting bounds of the module docs.
fn copy_bounds(inst: &Instance) -> CopyBounds {
    let (p, e_n) = (inst.gpus(), inst.experts());
    let t = inst.topology();
    let nodes = t.nodes();
    let bpt = inst.bytes_per_token();
    let slots = p * inst.slots();
    // Cheapest 1/β into a GPU (dispatch) and out of it (combine), any pair and cross-node.
    let (mut m_in, mut x_in, mut m_out, mut x_out) =
        (f64::INFINITY, f64::INFINITY, f64::INFINITY, f64::INFINITY);
    for i in 0..p {
        for j in (0..p).filter(|&j| j != i) {
            m_in = m_in.min(t.inv_beta(i, j));
            m_out = m_out.min(t.inv_beta(j, i));
            if t.cross_node(i, j) {
                x_in = x_in.min(t.inv_beta(i, j));
                x_out = x_out.min(t.inv_beta(j, i));
            }
        }
    }
    if !m_in.is_finite() {
        (m_in, m_out) = (0.0, 0.0);
    }
    if !x_in.is_finite() {
        (x_in, x_out) = (m_in, m_out);
    }
    // Per expert: load, prefix sums of the largest per-GPU and per-node demands.
    let mut load = vec![0.0; e_n];
    let mut gpu_prefix: Vec<Vec<f64>> = Vec::with_capacity(e_n);
    let mut node_prefix: Vec<Vec<f64>> = Vec::with_capacity(e_n);
    for (e, le) in load.iter_mut().enumerate() {
        let mut col: Vec<f64> = (0..p).map(|i| inst.demand(i, e)).collect();
        let mut per_node = vec![0.0; nodes];
        for (i, &c) in col.iter().enumerate() {
            per_node[t.node_of(i)] += c;
        }
        *le = col.iter().sum();
        gpu_prefix.push(prefix_desc(&mut col));
        node_prefix.push(prefix_desc(&mut per_node));
    }
    let received = |e: usize, c: usize, x: f64, m: f64| {
        let off = (load[e] - gpu_prefix[e][c.min(p)]).max(0.0);
        let cross = (load[e] - node_prefix[e][c.min(nodes)]).max(0.0).min(off);
        bpt * (cross * (x - m).max(0.0) + off * m) / c as f64
    };
    let s = inst.compute_s_per_token();
    CopyBounds {
        recv: water_fill(e_n, p, slots, |e, c| received(e, c, x_in, m_in)),
        send: water_fill(e_n, p, slots, |e, c| received(e, c, x_out, m_out)),
        compute: water_fill(e_n, p, slots, |e, c| s * load[e] / c as f64),
    }
}

/// Sort descending and return prefix sums `[0, v0, v0 + v1, ...]`.
fn prefix_desc(v: &mut [f64]) -> Vec<f64> {
    v.sort_by(|a, b| b.total_cmp(a));
    let mut out = Vec::with_capacity(v.len() + 1);
    out.push(0.0);
    let mut acc = 0.0;
    for &x in v.iter() {
        acc += x;
        out.push(acc);
    }
    out
}

/// The smallest T such that giving every expert e the fewest copies c ≤ `max_copies` with
/// `need(e, c) ≤ T` (need is non-increasing in c) uses at most `slots` copies in all.
fn water_fill(
    experts: usize,
    max_copies: usize,
    slots: usize,
    need: impl Fn(usize, usize) -> f64,
) -> f64 {
    let copies_for = |e: usize, t: f64| -> Option<usize> {
        if need(e, max_copies) > t {
            return None;
        }
        let (mut lo, mut hi) = (1usize, max_copies);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if need(e, mid) <= t {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Some(lo)
    };
    let feasible = |t: f64| {
        let mut used = 0usize;
        for e in 0..experts {
            match copies_for(e, t) {
                Some(c) => used += c,
                None => return false,
            }
            if used > slots {
                return false;
            }
        }
        true
    };
    let mut hi = (0..experts).map(|e| need(e, 1)).fold(0.0f64, f64::max);
    let mut lo = (0..experts)
        .map(|e| need(e, max_copies))
        .fold(0.0f64, f64::max);
    if hi <= 0.0 || feasible(lo) {
        return lo.max(0.0);
    }
    if !feasible(hi) {
        // Not even one copy each fits: the instance is invalid; no useful bound.
        return 0.0;
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if feasible(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    // `lo` is infeasible, so every achievable time is above it.
    lo
}
