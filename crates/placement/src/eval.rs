//! Placements, routings, and what they cost: the thesis objective, the synchronous
//! all-to-all time, cross-node bytes and per-GPU expert load.

use crate::instance::{Instance, Objective};

/// Which experts (originals and replicas alike) live on which GPU: seed 004's placement
/// matrix R, stored sparsely. `gpus[g]` lists the distinct experts GPU `g` hosts, ascending.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Placement {
    pub gpus: Vec<Vec<usize>>,
}

/// Why a placement is not valid for an instance.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("placement has {got} GPUs, the instance {expected}")]
    Shape { got: usize, expected: usize },
    #[error("GPU {gpu} hosts {count} experts, more than its {slots} slots")]
    TooMany {
        gpu: usize,
        count: usize,
        slots: usize,
    },
    #[error("GPU {gpu} hosts expert {expert}, which does not exist")]
    Unknown { gpu: usize, expert: usize },
    #[error("GPU {gpu} hosts expert {expert} twice")]
    Duplicate { gpu: usize, expert: usize },
    #[error("expert {expert} is placed nowhere")]
    Missing { expert: usize },
}

impl Placement {
    /// Check the constraints of seed 004 §4.2.1(3): at most L experts per GPU, every expert
    /// somewhere; plus: a GPU holds one copy of an expert at most (a second copy on the same
    /// GPU would add memory and no bandwidth).
    pub fn validate(&self, inst: &Instance) -> Result<(), PlacementError> {
        if self.gpus.len() != inst.gpus() {
            return Err(PlacementError::Shape {
                got: self.gpus.len(),
                expected: inst.gpus(),
            });
        }
        let mut seen = vec![false; inst.experts()];
        for (g, hosted) in self.gpus.iter().enumerate() {
            if hosted.len() > inst.slots() {
                return Err(PlacementError::TooMany {
                    gpu: g,
                    count: hosted.len(),
                    slots: inst.slots(),
                });
            }
            for (k, &e) in hosted.iter().enumerate() {
                if e >= inst.experts() {
                    return Err(PlacementError::Unknown { gpu: g, expert: e });
                }
                if hosted[..k].contains(&e) {
                    return Err(PlacementError::Duplicate { gpu: g, expert: e });
                }
                seen[e] = true;
            }
        }
        match seen.iter().position(|s| !s) {
            Some(expert) => Err(PlacementError::Missing { expert }),
            None => Ok(()),
        }
    }

    /// For every expert, the GPUs that host it, ascending.
    pub fn replicas_of(&self, experts: usize) -> Vec<Vec<usize>> {
        let mut r = vec![Vec::new(); experts];
        for (g, hosted) in self.gpus.iter().enumerate() {
            for &e in hosted {
                r[e].push(g);
            }
        }
        r
    }

    /// Total number of expert copies (E plus the redundant ones).
    pub fn copies(&self) -> usize {
        self.gpus.iter().map(Vec::len).sum()
    }

    pub(crate) fn normalise(&mut self) {
        for h in &mut self.gpus {
            h.sort_unstable();
            h.dedup();
        }
    }
}

/// Seed 004's routing matrix W, sparse: for source GPU `i` and expert `e`,
/// `flows[i * E + e]` lists `(destination GPU, fraction)` with fractions summing to 1.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Routing {
    pub experts: usize,
    pub flows: Vec<Vec<(usize, f64)>>,
}

impl Routing {
    /// The topology-aware rule of seed 004 §4.1.3 ("if the same server holds the expert or a
    /// virtual expert, send there first"), made explicit: tokens for `e` stay on the source GPU
    /// if it hosts `e`; otherwise they are split evenly over the replicas on the source's node;
    /// if there are none, evenly over all replicas.
    pub fn nearest(inst: &Instance, placement: &Placement) -> Routing {
        let e_n = inst.experts();
        let reps = placement.replicas_of(e_n);
        let mut flows = Vec::with_capacity(inst.gpus() * e_n);
        let mut buf = Vec::new();
        for i in 0..inst.gpus() {
            for r in &reps {
                nearest_targets(inst, i, r, &mut buf);
                let f = 1.0 / buf.len().max(1) as f64;
                flows.push(buf.iter().map(|&j| (j, f)).collect());
            }
        }
        Routing {
            experts: e_n,
            flows,
        }
    }
}

/// The replicas source `i` uses for an expert hosted on `reps` under [`Routing::nearest`].
pub(crate) fn nearest_targets(inst: &Instance, i: usize, reps: &[usize], out: &mut Vec<usize>) {
    out.clear();
    if reps.contains(&i) {
        out.push(i);
        return;
    }
    let t = inst.topology();
    out.extend(reps.iter().copied().filter(|&j| !t.cross_node(i, j)));
    if out.is_empty() {
        out.extend_from_slice(reps);
    }
}

/// Everything reported about one placement + routing.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Metrics {
    /// The value the solvers minimise: the instance's all-to-all objective (dispatch +
    /// combine) plus the slowest GPU's expert compute time. Seconds.
    pub objective_s: f64,
    /// Seed 004 objective Σ_{i≠j}(α_ij·𝟙(V_ij>0) + V_ij/β_ij), dispatch + combine. Seconds.
    pub thesis_s: f64,
    /// Synchronous all-to-all time, dispatch + combine: per phase, max over ranks of
    /// max(send, receive) time. Seconds.
    pub alltoall_time_s: f64,
    /// Dispatch phase of `alltoall_time_s`.
    pub dispatch_s: f64,
    /// Combine phase of `alltoall_time_s` (same volumes, reverse direction).
    pub combine_s: f64,
    /// Slowest GPU's expert compute (forward), seconds: max load × compute_s_per_token.
    pub compute_s: f64,
    /// The busiest GPU's gradient all-reduces of the replicated experts it holds, seconds
    /// ([`replica_sync_s`]); part of `objective_s`. 0 without replicas or sync bytes.
    pub replica_sync_s: f64,
    /// Bytes that leave their node in the dispatch phase (the combine phase sends as many
    /// back).
    pub cross_node_bytes: f64,
    /// Bytes that leave their GPU in the dispatch phase.
    pub off_gpu_bytes: f64,
    /// Tokens each GPU's experts process.
    pub gpu_load: Vec<f64>,
    /// max / mean of `gpu_load` (1 = perfectly balanced).
    pub max_over_mean_load: f64,
    /// Most expert copies on one GPU, and their weight bytes.
    pub max_copies_per_gpu: usize,
    pub max_expert_bytes_per_gpu: f64,
}

/// Traffic and load accumulated over experts: the per-pair token matrix V (in tokens), the
/// number of experts whose flows use each pair (for α), and per-GPU load. Experts can be added
/// and removed, which makes local search moves cheap.
#[derive(Debug, Clone)]
pub(crate) struct Traffic {
    p: usize,
    pub(crate) v: Vec<f64>,
    pub(crate) uses: Vec<u32>,
    pub(crate) load: Vec<f64>,
    scratch: Vec<usize>,
    send: Vec<f64>,
    recv: Vec<f64>,
    csend: Vec<f64>,
    crecv: Vec<f64>,
    thesis: f64,
}

/// Phase times derived from a [`Traffic`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Times {
    pub thesis: f64,
    pub dispatch: f64,
    pub combine: f64,
    pub compute: f64,
}

impl Times {
    pub(crate) fn objective(&self, o: Objective) -> f64 {
        let comm = match o {
            Objective::Thesis => self.thesis,
            Objective::Synchronous => self.dispatch + self.combine,
        };
        comm + self.compute
    }
}

impl Traffic {
    pub(crate) fn new(p: usize) -> Traffic {
        Traffic {
            p,
            v: vec![0.0; p * p],
            uses: vec![0; p * p],
            load: vec![0.0; p],
            scratch: Vec::new(),
            send: vec![0.0; p],
            recv: vec![0.0; p],
            csend: vec![0.0; p],
            crecv: vec![0.0; p],
            thesis: 0.0,
        }
    }

    /// Add (`sign = 1`) or remove (`sign = -1`) expert `e`'s flows under the nearest rule.
    pub(crate) fn nearest_expert(&mut self, inst: &Instance, e: usize, reps: &[usize], sign: i32) {
        let mut targets = std::mem::take(&mut self.scratch);
        for i in 0..self.p {
            let c = inst.demand(i, e);
            if c == 0.0 {
                continue;
            }
            nearest_targets(inst, i, reps, &mut targets);
            let share = c / targets.len() as f64;
            for &j in &targets {
                self.flow(inst, i, j, share, sign);
            }
        }
        self.scratch = targets;
    }

    /// Add (`sign = 1`) or remove (`sign = -1`) `tokens` from GPU `i` processed on GPU `j`,
    /// keeping the per-rank send/receive times and the thesis sum up to date (α is added
    /// when a pair starts carrying traffic and removed when it stops).
    #[inline]
    pub(crate) fn flow(&mut self, inst: &Instance, i: usize, j: usize, tokens: f64, sign: i32) {
        let s = sign as f64;
        self.load[j] += s * tokens;
        if i == j {
            return;
        }
        let t = inst.topology();
        let k = i * self.p + j;
        self.v[k] += s * tokens;
        let before = self.uses[k];
        self.uses[k] = (before as i64 + sign as i64) as u32;
        let bytes = s * tokens * inst.bytes_per_token();
        let mut d = bytes * t.inv_beta(i, j);
        let mut c = bytes * t.inv_beta(j, i);
        if before == 0 && self.uses[k] > 0 {
            d += t.alpha(i, j);
            c += t.alpha(j, i);
        } else if before > 0 && self.uses[k] == 0 {
            d -= t.alpha(i, j);
            c -= t.alpha(j, i);
        }
        self.send[i] += d;
        self.recv[j] += d;
        self.csend[j] += c;
        self.crecv[i] += c;
        self.thesis += d + c;
    }

    /// Phase times from the incrementally maintained per-rank times: O(P).
    pub(crate) fn fast_times(&self, inst: &Instance) -> Times {
        let phase =
            |a: &[f64], b: &[f64]| a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max(x.max(*y)));
        let max_load = self.load.iter().fold(0.0f64, |m, &x| m.max(x));
        Times {
            thesis: self.thesis,
            dispatch: phase(&self.send, &self.recv),
            combine: phase(&self.csend, &self.crecv),
            compute: max_load * inst.compute_s_per_token(),
        }
    }

    /// The GPU with the largest send/receive + compute time: where a move is most likely to
    /// shorten the step.
    pub(crate) fn critical_rank(&self, inst: &Instance) -> usize {
        let s = inst.compute_s_per_token();
        let score = |g: usize| {
            self.send[g].max(self.recv[g]) + self.csend[g].max(self.crecv[g]) + self.load[g] * s
        };
        (0..self.p)
            .max_by(|&a, &b| score(a).total_cmp(&score(b)).then(b.cmp(&a)))
            .unwrap_or(0)
    }

    /// Phase times (seconds) of the current traffic, recomputed from V in O(P²) (which also
    /// clears the rounding that add/remove cycles leave in the incremental sums).
    pub(crate) fn times(&mut self, inst: &Instance) -> Times {
        let t = inst.topology();
        let bpt = inst.bytes_per_token();
        let p = self.p;
        self.send.iter_mut().for_each(|x| *x = 0.0);
        self.recv.iter_mut().for_each(|x| *x = 0.0);
        self.csend.iter_mut().for_each(|x| *x = 0.0);
        self.crecv.iter_mut().for_each(|x| *x = 0.0);
        let mut thesis = 0.0;
        for i in 0..p {
            for j in 0..p {
                let k = i * p + j;
                if i == j || self.uses[k] == 0 {
                    continue;
                }
                let bytes = self.v[k].max(0.0) * bpt;
                // Dispatch: i -> j over link (i, j).
                let d = t.alpha(i, j) + bytes * t.inv_beta(i, j);
                // Combine: the same bytes come back j -> i over link (j, i).
                let c = t.alpha(j, i) + bytes * t.inv_beta(j, i);
                thesis += d + c;
                self.send[i] += d;
                self.recv[j] += d;
                self.csend[j] += c;
                self.crecv[i] += c;
            }
        }
        self.thesis = thesis;
        self.fast_times(inst)
    }
}

/// Seconds the busiest GPU spends all-reducing the gradients of the replicated experts it
/// holds, `reps[e]` the GPUs holding expert `e` (ascending). Each expert with `c ≥ 2` copies
/// runs a ring all-reduce of [`Instance::replica_sync_bytes`] over its GPUs in ascending
/// order (seed 000 §6 ring all-reduce: `2(c − 1)` steps of `M/c` bytes; on the α-β matrix a
/// step takes its slowest ring link, `α_ij + (M/c)/β_ij`); a GPU runs the all-reduces of its
/// experts one after another. 0 when the instance has no sync bytes.
pub fn replica_sync_s(inst: &Instance, reps: &[Vec<usize>]) -> f64 {
    let m = inst.replica_sync_bytes();
    if m <= 0.0 {
        return 0.0;
    }
    let t = inst.topology();
    let mut per_gpu = vec![0.0f64; inst.gpus()];
    for r in reps.iter().filter(|r| r.len() >= 2) {
        let c = r.len();
        let chunk = m / c as f64;
        let step = (0..c)
            .map(|k| {
                let (i, j) = (r[k], r[(k + 1) % c]);
                t.alpha(i, j) + chunk * t.inv_beta(i, j)
            })
            .fold(0.0f64, f64::max);
        let time = 2.0 * (c - 1) as f64 * step;
        for &g in r {
            per_gpu[g] += time;
        }
    }
    per_gpu.into_iter().fold(0.0, f64::max)
}

/// Cost of `placement` routed by `routing` on `inst`.
///
/// Seed 004 §4.2.1(4): V_ij = Σ_e W_ije · C_ie (tokens of GPU i for expert e sent to GPU j),
/// with the thesis's (1 − R_ie) factor realised by routing: a GPU that hosts e keeps its own
/// tokens for e (what [`Routing::nearest`] does; an explicit routing may do otherwise).
pub fn evaluate(inst: &Instance, placement: &Placement, routing: &Routing) -> Metrics {
    let p = inst.gpus();
    let e_n = inst.experts();
    let mut tr = Traffic::new(p);
    for i in 0..p {
        for e in 0..e_n {
            let c = inst.demand(i, e);
            if c == 0.0 {
                continue;
            }
            for &(j, f) in &routing.flows[i * e_n + e] {
                if f > 0.0 {
                    tr.flow(inst, i, j, c * f, 1);
                }
            }
        }
    }
    metrics_of(inst, placement, &mut tr)
}

pub(crate) fn metrics_of(inst: &Instance, placement: &Placement, tr: &mut Traffic) -> Metrics {
    let p = inst.gpus();
    let times = tr.times(inst);
    let t = inst.topology();
    let bpt = inst.bytes_per_token();
    let mut cross = 0.0;
    let mut off = 0.0;
    for i in 0..p {
        for j in 0..p {
            if i == j {
                continue;
            }
            let b = tr.v[i * p + j].max(0.0) * bpt;
            off += b;
            if t.cross_node(i, j) {
                cross += b;
            }
        }
    }
    let total: f64 = tr.load.iter().sum();
    let max_load = tr.load.iter().fold(0.0f64, |m, &x| m.max(x));
    let mean = total / p as f64;
    let max_copies = placement.gpus.iter().map(Vec::len).max().unwrap_or(0);
    let sync = replica_sync_s(inst, &placement.replicas_of(inst.experts()));
    Metrics {
        objective_s: times.objective(inst.objective()) + sync,
        replica_sync_s: sync,
        thesis_s: times.thesis,
        alltoall_time_s: times.dispatch + times.combine,
        dispatch_s: times.dispatch,
        combine_s: times.combine,
        compute_s: times.compute,
        cross_node_bytes: cross,
        off_gpu_bytes: off,
        gpu_load: tr.load.clone(),
        max_over_mean_load: if mean > 0.0 { max_load / mean } else { 1.0 },
        max_copies_per_gpu: max_copies,
        max_expert_bytes_per_gpu: max_copies as f64 * inst.expert_bytes(),
    }
}

/// [`evaluate`] with [`Routing::nearest`], without materialising the routing.
pub fn evaluate_nearest(inst: &Instance, placement: &Placement) -> Metrics {
    let mut tr = Traffic::new(inst.gpus());
    let reps = placement.replicas_of(inst.experts());
    for (e, r) in reps.iter().enumerate() {
        tr.nearest_expert(inst, e, r, 1);
    }
    metrics_of(inst, placement, &mut tr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::{InstanceOptions, Topology};

    #[test]
    fn two_gpus_by_hand() {
        // GPU 0 sends 100 tokens to expert 1 (on GPU 1); GPU 1 sends 50 to expert 0 (on
        // GPU 0). α = 1 µs, 1/β = 1 ns/B, 1000 B per token, different nodes.
        let topo = Topology::two_level(2, 1, (0.0, 0.0), (1e-6, 1e-9)).unwrap();
        let opts = InstanceOptions {
            bytes_per_token: 1000.0,
            ..InstanceOptions::default()
        };
        let inst = Instance::new(topo, 2, 1, vec![0.0, 100.0, 50.0, 0.0], opts).unwrap();
        let pl = Placement {
            gpus: vec![vec![0], vec![1]],
        };
        let m = evaluate_nearest(&inst, &pl);
        // Dispatch: rank 0 sends 1e-6 + 1e5·1e-9 = 101 µs, rank 1 sends 51 µs; receives
        // mirror them. Combine sends the same bytes back: 101 µs again.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-15;
        assert!(
            close(m.dispatch_s, 101e-6) && close(m.combine_s, 101e-6),
            "{m:?}"
        );
        assert!(close(m.alltoall_time_s, 202e-6));
        assert!(close(m.thesis_s, 2.0 * (101e-6 + 51e-6)));
        assert_eq!(m.cross_node_bytes, 150_000.0);
        assert_eq!(m.gpu_load, vec![50.0, 100.0]);
        assert!((m.max_over_mean_load - 100.0 / 75.0).abs() < 1e-12);
        assert_eq!(evaluate(&inst, &pl, &Routing::nearest(&inst, &pl)), m);
    }

    #[test]
    fn validate_names_the_problem() {
        let topo = Topology::two_level(1, 2, (0.0, 0.0), (0.0, 0.0)).unwrap();
        let inst = Instance::new(topo, 3, 2, vec![1.0; 6], InstanceOptions::default()).unwrap();
        let bad = |gpus: Vec<Vec<usize>>| Placement { gpus }.validate(&inst).unwrap_err();
        assert_eq!(
            bad(vec![vec![0, 1], vec![1]]),
            PlacementError::Missing { expert: 2 }
        );
        assert_eq!(
            bad(vec![vec![0, 0], vec![1, 2]]),
            PlacementError::Duplicate { gpu: 0, expert: 0 }
        );
        assert_eq!(
            bad(vec![vec![0, 1, 2], vec![]]),
            PlacementError::TooMany {
                gpu: 0,
                count: 3,
                slots: 2
            }
        );
    }
}
