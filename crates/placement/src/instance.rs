//! The problem: an EP group's α-β link matrix, the token demand matrix, slots per GPU.

use autoplan_cluster::Cluster;

/// The largest EP group an instance takes: 512 GPUs. The heuristic's local search grows about
/// cubically with the group (1 s at 512 GPUs, 14 s at 1024 on one core); the largest EP groups
/// in use are 64 (training) to 320 (DeepSeek-V3 inference).
pub const MAX_EP: usize = 512;
/// The most experts of one MoE layer: 4096, ten times the largest published routed-expert
/// count (384).
pub const MAX_EXPERTS: usize = 4096;
/// The most expert slots per GPU: [`MAX_EXPERTS`] (a GPU holds at most one copy of each).
pub const MAX_SLOTS: usize = MAX_EXPERTS;
/// The most slots of the whole group, EP × slots per GPU: 8,192, twice the most
/// experts. It bounds the placement the solvers search (a few seconds at the corner, 512 GPUs ×
/// 16 slots, on one core).
pub const MAX_TOTAL_SLOTS: usize = 8_192;

/// Why an instance cannot be built. Every variant names the offending quantity and value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InstanceError {
    #[error("EP group size must be at least 1, got {0}")]
    EmptyGroup(usize),
    #[error("number of experts must be at least 1, got {0}")]
    NoExperts(usize),
    #[error("slots per GPU must be at least 1, got {0}")]
    NoSlots(usize),
    #[error("{experts} experts do not fit in {ep} GPUs x {slots} slots = {} slots", ep * slots)]
    TooFewSlots {
        experts: usize,
        ep: usize,
        slots: usize,
    },
    #[error("EP group of {ep} GPUs does not fit on cluster `{cluster}` with {available} GPUs")]
    GroupTooLarge {
        cluster: String,
        ep: usize,
        available: usize,
    },
    #[error("demand matrix has {got} entries, expected {ep} sources x {experts} experts = {}", ep * experts)]
    DemandShape {
        got: usize,
        ep: usize,
        experts: usize,
    },
    #[error("demand from GPU {source_gpu} to expert {expert} is {value}: must be finite and >= 0")]
    BadDemand {
        source_gpu: usize,
        expert: usize,
        value: f64,
    },
    #[error("link {src}->{dst}: {field} = {value}: {reason}")]
    BadLink {
        src: usize,
        dst: usize,
        field: &'static str,
        value: f64,
        reason: &'static str,
    },
    #[error("{field} = {value}: must be finite and >= 0")]
    BadScalar { field: &'static str, value: f64 },
    #[error("topology has {got} GPUs, expected {expected}")]
    TopologyShape { got: usize, expected: usize },
    #[error("{what} = {value}: expected [1, {max}]")]
    TooLarge {
        what: &'static str,
        value: usize,
        max: usize,
    },
}

/// The α-β link model of seed 004 §4.1.2 for every ordered GPU pair of the EP group:
/// sending `m` bytes from `i` to `j` takes `alpha[i][j] + m * inv_beta[i][j]` seconds.
///
/// Stored as α (seconds) and 1/β (seconds per byte) so that a free link (the thesis's worked
/// example counts only cross-server traffic) is `inv_beta = 0`. The diagonal is unused: tokens
/// that stay on their GPU cost nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    p: usize,
    /// Node index of every GPU (for cross-node bytes and the node-level bounds).
    node_of: Vec<usize>,
    alpha: Vec<f64>,
    inv_beta: Vec<f64>,
}

impl Topology {
    /// A topology from explicit per-pair matrices (row-major `p x p`, `[src * p + dst]`).
    pub fn from_matrices(
        node_of: Vec<usize>,
        alpha: Vec<f64>,
        inv_beta: Vec<f64>,
    ) -> Result<Topology, InstanceError> {
        let p = node_of.len();
        if p == 0 {
            return Err(InstanceError::EmptyGroup(0));
        }
        if p > MAX_EP {
            return Err(InstanceError::TooLarge {
                what: "EP group size",
                value: p,
                max: MAX_EP,
            });
        }
        for (name, m) in [("alpha", &alpha), ("1/beta", &inv_beta)] {
            if m.len() != p * p {
                return Err(InstanceError::TopologyShape {
                    got: (m.len() as f64).sqrt() as usize,
                    expected: p,
                });
            }
            for i in 0..p {
                for j in 0..p {
                    let v = m[i * p + j];
                    if i != j && !(v.is_finite() && v >= 0.0) {
                        return Err(InstanceError::BadLink {
                            src: i,
                            dst: j,
                            field: name,
                            value: v,
                            reason: "must be finite and >= 0",
                        });
                    }
                }
            }
        }
        Ok(Topology {
            p,
            node_of,
            alpha,
            inv_beta,
        })
    }

    /// Two-level topology: `nodes x gpus_per_node` GPUs, one (α, 1/β) pair inside a node and
    /// one between nodes. GPU `g` sits on node `g / gpus_per_node` (rank order = node order).
    pub fn two_level(
        nodes: usize,
        gpus_per_node: usize,
        intra: (f64, f64),
        inter: (f64, f64),
    ) -> Result<Topology, InstanceError> {
        let p = nodes * gpus_per_node;
        let node_of: Vec<usize> = (0..p).map(|g| g / gpus_per_node.max(1)).collect();
        let mut alpha = vec![0.0; p * p];
        let mut inv_beta = vec![0.0; p * p];
        for i in 0..p {
            for j in 0..p {
                if i == j {
                    continue;
                }
                let (a, ib) = if node_of[i] == node_of[j] {
                    intra
                } else {
                    inter
                };
                alpha[i * p + j] = a;
                inv_beta[i * p + j] = ib;
            }
        }
        Topology::from_matrices(node_of, alpha, inv_beta)
    }

    /// The α-β matrix of the first `ep` GPUs of `cluster` (EP ranks are consecutive, so they
    /// fill whole nodes first).
    ///
    /// * inside a node: α = `node.intra_latency`, β = `intra_bw × bwurate`;
    /// * across nodes: α = `network.link_delay`, β = `inter_bw × bwurate / oversubscription`
    ///   (seed 000 §5 parameter names; all-to-all traffic crosses the upper tiers, so their
    ///   oversubscription divides the per-GPU NIC share).
    pub fn from_cluster(cluster: &Cluster, ep: usize) -> Result<Topology, InstanceError> {
        let available = cluster.gpus() as usize;
        if ep == 0 {
            return Err(InstanceError::EmptyGroup(0));
        }
        if ep > MAX_EP {
            return Err(InstanceError::TooLarge {
                what: "EP group size",
                value: ep,
                max: MAX_EP,
            });
        }
        if ep > available {
            return Err(InstanceError::GroupTooLarge {
                cluster: cluster.name.clone(),
                ep,
                available,
            });
        }
        // The two levels are the NVLink domain (a host, or an NVL72 rack) and the network.
        let g = cluster.domain_gpus() as usize;
        let bwu = cluster.efficiency.bwurate;
        let intra_bw = cluster.node.intra_bw * bwu;
        let inter_bw = cluster.network.inter_bw * bwu / cluster.network.oversubscription.max(1.0);
        for (field, v) in [("intra_bw", intra_bw), ("inter_bw", inter_bw)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(InstanceError::BadLink {
                    src: 0,
                    dst: 0,
                    field,
                    value: v,
                    reason: "effective bandwidth must be > 0",
                });
            }
        }
        let nodes = ep.div_ceil(g);
        let full = Topology::two_level(
            nodes,
            g,
            (cluster.node.intra_latency, 1.0 / intra_bw),
            (cluster.network.link_delay, 1.0 / inter_bw),
        )?;
        Ok(full.truncate(ep))
    }

    fn truncate(self, ep: usize) -> Topology {
        if ep == self.p {
            return self;
        }
        let mut alpha = Vec::with_capacity(ep * ep);
        let mut inv_beta = Vec::with_capacity(ep * ep);
        for i in 0..ep {
            alpha.extend_from_slice(&self.alpha[i * self.p..i * self.p + ep]);
            inv_beta.extend_from_slice(&self.inv_beta[i * self.p..i * self.p + ep]);
        }
        Topology {
            p: ep,
            node_of: self.node_of[..ep].to_vec(),
            alpha,
            inv_beta,
        }
    }

    /// Number of GPUs.
    pub fn gpus(&self) -> usize {
        self.p
    }

    /// Node of GPU `g`.
    pub fn node_of(&self, g: usize) -> usize {
        self.node_of[g]
    }

    /// Number of distinct nodes.
    pub fn nodes(&self) -> usize {
        self.node_of.iter().max().map_or(0, |m| m + 1)
    }

    /// α of the link `i -> j`, seconds.
    #[inline]
    pub fn alpha(&self, i: usize, j: usize) -> f64 {
        self.alpha[i * self.p + j]
    }

    /// 1/β of the link `i -> j`, seconds per byte.
    #[inline]
    pub fn inv_beta(&self, i: usize, j: usize) -> f64 {
        self.inv_beta[i * self.p + j]
    }

    /// True when `i` and `j` are on different nodes.
    #[inline]
    pub fn cross_node(&self, i: usize, j: usize) -> bool {
        self.node_of[i] != self.node_of[j]
    }
}

/// One MoE layer's expert-placement problem (seed 004 §4.2.1 inputs): `E` experts, `P` GPUs
/// with `L` slots each, the α-β matrix, and `C[i][e]`, the tokens GPU `i` routes to expert `e`.
///
/// Built only through [`Instance::new`], which validates every field ("parse, don't
/// validate"): solvers accept only this type.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub(crate) topo: Topology,
    pub(crate) experts: usize,
    pub(crate) slots: usize,
    /// Row-major `P x E`.
    pub(crate) demand: Vec<f64>,
    pub(crate) bytes_per_token: f64,
    pub(crate) expert_bytes: f64,
    pub(crate) compute_s_per_token: f64,
    pub(crate) replica_sync_bytes: f64,
    pub(crate) objective: Objective,
}

/// Which all-to-all time the solvers minimise. Both are always reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Objective {
    /// Seed 004 §4.2.1(4): Σ_{i≠j} (α_ij·𝟙(V_ij>0) + V_ij/β_ij), dispatch plus combine — the
    /// total link-time over all pairs.
    Thesis,
    /// The synchronous all-to-all a training step waits for: the slowest rank's
    /// max(send, receive) time (pairwise exchange, one message after another; seed 000
    /// §6 pairwise all-to-all), dispatch plus combine.
    #[default]
    Synchronous,
}

/// Optional knobs of an [`Instance`] beyond the required shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceOptions {
    /// Bytes one token occupies on the wire (hidden × 2 for bf16).
    pub bytes_per_token: f64,
    /// Weight bytes of one expert replica (reported as the HBM cost of replicas).
    pub expert_bytes: f64,
    /// Seconds of expert compute per routed token; adds the slowest GPU's expert compute
    /// (forward) to the objective so replicas are also used to balance compute. 0 = pure
    /// communication, as in the thesis.
    pub compute_s_per_token: f64,
    /// Gradient bytes of one expert that its copies all-reduce per all-to-all round (the
    /// caller amortises the once-per-step reduction over the rounds of a step). Every copy
    /// beyond the first is trained too, so a placement that replicates pays a ring
    /// all-reduce over each replicated expert's GPUs ([`crate::eval::replica_sync_s`]).
    /// 0 = the thesis's objective, replicas free.
    pub replica_sync_bytes: f64,
    pub objective: Objective,
}

impl Default for InstanceOptions {
    fn default() -> Self {
        InstanceOptions {
            bytes_per_token: 1.0,
            expert_bytes: 0.0,
            compute_s_per_token: 0.0,
            replica_sync_bytes: 0.0,
            objective: Objective::Synchronous,
        }
    }
}

impl Instance {
    /// Validate and build. `demand` is row-major `P x E` tokens (`P = topo.gpus()`).
    pub fn new(
        topo: Topology,
        experts: usize,
        slots: usize,
        demand: Vec<f64>,
        opts: InstanceOptions,
    ) -> Result<Instance, InstanceError> {
        let ep = topo.gpus();
        if experts == 0 {
            return Err(InstanceError::NoExperts(experts));
        }
        if slots == 0 {
            return Err(InstanceError::NoSlots(slots));
        }
        for (what, value, max) in [
            ("number of experts", experts, MAX_EXPERTS),
            ("slots per GPU", slots, MAX_SLOTS),
        ] {
            if value > max {
                return Err(InstanceError::TooLarge { what, value, max });
            }
        }
        if ep * slots > MAX_TOTAL_SLOTS {
            return Err(InstanceError::TooLarge {
                what: "EP × slots per GPU",
                value: ep * slots,
                max: MAX_TOTAL_SLOTS,
            });
        }
        if ep * slots < experts {
            return Err(InstanceError::TooFewSlots { experts, ep, slots });
        }
        if demand.len() != ep * experts {
            return Err(InstanceError::DemandShape {
                got: demand.len(),
                ep,
                experts,
            });
        }
        for (k, &v) in demand.iter().enumerate() {
            if !(v.is_finite() && v >= 0.0) {
                return Err(InstanceError::BadDemand {
                    source_gpu: k / experts,
                    expert: k % experts,
                    value: v,
                });
            }
        }
        for (field, value) in [
            ("bytes_per_token", opts.bytes_per_token),
            ("expert_bytes", opts.expert_bytes),
            ("compute_s_per_token", opts.compute_s_per_token),
            ("replica_sync_bytes", opts.replica_sync_bytes),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(InstanceError::BadScalar { field, value });
            }
        }
        Ok(Instance {
            topo,
            experts,
            slots,
            demand,
            bytes_per_token: opts.bytes_per_token,
            expert_bytes: opts.expert_bytes,
            compute_s_per_token: opts.compute_s_per_token,
            replica_sync_bytes: opts.replica_sync_bytes,
            objective: opts.objective,
        })
    }

    /// Number of GPUs in the EP group (P).
    pub fn gpus(&self) -> usize {
        self.topo.gpus()
    }
    /// Number of logical experts (E).
    pub fn experts(&self) -> usize {
        self.experts
    }
    /// Expert slots per GPU (L).
    pub fn slots(&self) -> usize {
        self.slots
    }
    pub fn topology(&self) -> &Topology {
        &self.topo
    }
    /// Tokens GPU `i` routes to expert `e` (C_{i,e}).
    #[inline]
    pub fn demand(&self, i: usize, e: usize) -> f64 {
        self.demand[i * self.experts + e]
    }
    /// Total tokens routed to expert `e` from all GPUs.
    pub fn expert_load(&self, e: usize) -> f64 {
        (0..self.gpus()).map(|i| self.demand(i, e)).sum()
    }
    pub fn bytes_per_token(&self) -> f64 {
        self.bytes_per_token
    }
    pub fn expert_bytes(&self) -> f64 {
        self.expert_bytes
    }
    pub fn compute_s_per_token(&self) -> f64 {
        self.compute_s_per_token
    }
    /// Gradient bytes one replicated expert all-reduces over its copies per round.
    pub fn replica_sync_bytes(&self) -> f64 {
        self.replica_sync_bytes
    }
    pub fn objective(&self) -> Objective {
        self.objective
    }
    /// The same instance minimising another objective.
    pub fn with_objective(mut self, objective: Objective) -> Instance {
        self.objective = objective;
        self
    }
}
