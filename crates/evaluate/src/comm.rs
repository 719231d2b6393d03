//! The communication inventory's vocabulary: what kind of parallelism a collective serves, one
//! row of the per-layer table, and the sink that collects rows (a no-op on the search's path).

use autoplan_cluster::GroupPlacement;
use autoplan_cost::{Algorithm, Collective, Protocol};
use autoplan_graph::LayerKind;
use serde::Serialize;

/// The parallelism a collective serves; the step-time breakdown sums exposed time per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommKind {
    /// Tensor parallelism: all-reduces, or SP all-gathers/reduce-scatters, the TP→SP all-to-all.
    Tp,
    /// Context parallelism: the K/V exchange of attention.
    Cp,
    /// Expert parallelism: dispatch/combine, and the `moe_tp` scatter/gather or AG/RS.
    Ep,
    /// Pipeline send/recv of activations and gradients.
    Pp,
    /// Data-parallel gradient reduction and ZeRO parameter gathers (dense and expert).
    Dp,
    /// No communication at all (a one-GPU plan).
    None,
}

impl CommKind {
    pub const ALL: [CommKind; 5] = [
        CommKind::Tp,
        CommKind::Cp,
        CommKind::Ep,
        CommKind::Pp,
        CommKind::Dp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CommKind::Tp => "tp",
            CommKind::Cp => "cp",
            CommKind::Ep => "ep",
            CommKind::Pp => "pp",
            CommKind::Dp => "dp",
            CommKind::None => "none",
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            CommKind::Tp => 0,
            CommKind::Cp => 1,
            CommKind::Ep => 2,
            CommKind::Pp => 3,
            CommKind::Dp | CommKind::None => 4,
        }
    }
}

/// A group's shape (serializable mirror of `GroupPlacement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Group {
    pub size: u32,
    pub ranks_per_node: u32,
    pub nodes: u32,
}

impl Group {
    pub fn intra_node(&self) -> bool {
        self.nodes <= 1
    }
}

impl From<GroupPlacement> for Group {
    fn from(g: GroupPlacement) -> Group {
        Group {
            size: g.size,
            ranks_per_node: g.ranks_per_node,
            nodes: g.nodes,
        }
    }
}

/// Forward or backward pass (or the optimizer step, for once-per-step collectives).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pass {
    Forward,
    Backward,
    /// Forward recomputation under full recompute.
    Recompute,
    /// Once per step, after the last backward (gradient reduction, parameter gather).
    Step,
}

/// One line of the per-layer communication table: a collective of one layer kind.
#[derive(Debug, Clone, Serialize)]
pub struct CommRow {
    /// Layer kind the collective belongs to (`None` for pipeline and step-level collectives).
    pub layer: Option<LayerKind>,
    /// What it does, e.g. "attention out all-reduce (g)".
    pub what: &'static str,
    pub kind: CommKind,
    pub pass: Pass,
    pub collective: Collective,
    pub algorithm: Algorithm,
    /// The protocol the price assumed (NCCL's LL, LL128 or Simple).
    pub protocol: Protocol,
    /// Group size and where its members sit.
    pub group: Group,
    /// Bytes per call, nccl-tests size convention (see `CostModel::collective`).
    pub bytes: f64,
    /// Calls per training step on the busiest pipeline stage.
    pub calls_per_step: f64,
    /// Seconds per call.
    pub time_per_call: f64,
    /// Seconds per step on the link (`calls × time`).
    pub time: f64,
    /// Seconds per step on the critical path after overlap.
    pub exposed: f64,
}

/// Receives the inventory's rows. `()` ignores them: the search's fast path.
pub(crate) trait Sink {
    const ENABLED: bool;
    fn push(&mut self, row: CommRow);
}

impl Sink for () {
    const ENABLED: bool = false;
    #[inline]
    fn push(&mut self, _row: CommRow) {}
}

impl Sink for Vec<CommRow> {
    const ENABLED: bool = true;
    fn push(&mut self, row: CommRow) {
        Vec::push(self, row);
    }
}
