//! The building blocks of the formulas: seconds per byte on each fabric and step counts.

use autoplan_cluster::IntraFabric;

use super::{ceil_log2, CostModel, Pattern, Shape};

impl CostModel {
    /// Seconds per byte (inverse bandwidth) per rank inside a node for a traffic pattern among
    /// `r` ranks. NVSwitch and PCIe (switched): every pattern gets `B_i`. Full mesh:
    /// `intra_bw` is the GPU's total over `g−1` links, so a pattern reaching `p` peers at once
    /// gets `B_i·p/(g−1)` (rings: edge-disjoint rings over the group's links). Ring fabric:
    /// neighbour traffic gets `B_i`; other patterns cross ≈ r/4 hops on average
    /// (bidirectional ring), dividing the bandwidth.
    #[inline]
    pub(super) fn spb_intra(&self, p: Pattern, r: u32) -> f64 {
        match self.fabric {
            IntraFabric::Nvswitch | IntraFabric::Pcie => self.spb_intra,
            IntraFabric::FullMesh => {
                let g = f64::from(self.gpus_per_node.max(2) - 1);
                match p {
                    Pattern::Ring | Pattern::AllPeers => {
                        self.spb_intra * (g / f64::from(r.max(2) - 1)).max(1.0)
                    }
                    Pattern::OnePeer => self.spb_intra * g,
                }
            }
            IntraFabric::Ring => match p {
                Pattern::Ring => self.spb_intra,
                _ => self.spb_intra * (f64::from(r) * 0.25).max(1.0),
            },
        }
    }

    /// Seconds per byte of a rank's NIC share. `rail_aligned`: every rank talks to ranks of
    /// the same local index on other nodes (rings, trees, hierarchical inter phases), which on
    /// a rail-optimised network stays on its rail switch; other traffic (direct, pairwise,
    /// Bruck) climbs to the upper tiers and is divided by `oversubscription`. On fat-tree,
    /// spine-leaf and torus networks every inter-node transfer is assumed to cross the upper
    /// tiers (no leaf size is known), so all of it pays `oversubscription`.
    #[inline]
    pub(super) fn spb_inter(&self, rail_aligned: bool) -> f64 {
        if rail_aligned {
            self.spb_inter_aligned
        } else {
            self.spb_inter_cross
        }
    }

    /// Seconds per byte of a transfer to one arbitrary peer of the group (pairwise steps, the
    /// fold of a non-power-of-two group): across nodes the rank's NIC share, cross-rail; inside
    /// a node the one-peer intra-node bandwidth.
    #[inline]
    pub(super) fn spb_one_peer(&self, s: Shape) -> f64 {
        if s.multi() {
            self.spb_inter(false)
        } else {
            self.spb_intra(Pattern::OnePeer, s.r)
        }
    }

    /// Seconds per byte of a channelised ring/tree (NCCL: one ring or tree per channel, the
    /// channels of a node use all its NICs, collectives.md §2.3.3): inside a node `B_i`;
    /// across nodes `min(B_i, r·B_e)` — the group's `r` ranks of a node own `r` NIC shares.
    #[inline]
    pub(super) fn spb_flat(&self, s: Shape) -> f64 {
        if !s.multi() {
            self.spb_intra(Pattern::Ring, s.r)
        } else if s.r == 1 {
            self.spb_inter(true)
        } else {
            self.spb_intra(Pattern::Ring, s.r)
                .max(s.inv_r * self.spb_inter(true))
        }
    }

    /// Steps of a flat ring with `total` steps: NCCL counts `per_pass·(N−1)` of them as
    /// network steps (`nInterSteps`, tuning.cc, collectives.md §2.4), the rest intra-node.
    #[inline]
    pub(super) fn ring_steps(s: Shape, total: f64, passes: f64) -> (f64, f64) {
        if s.multi() {
            let inter = (passes * (s.nodes_f() - 1.0)).min(total);
            (total - inter, inter)
        } else {
            (total, 0.0)
        }
    }

    /// Steps of a locality-aware binary tree: ⌈log2 r⌉ levels inside the node, ⌈log2 N⌉ across.
    #[inline]
    pub(super) fn tree_levels(s: Shape) -> (f64, f64) {
        (f64::from(ceil_log2(s.r)), f64::from(ceil_log2(s.nodes)))
    }

    /// One step that is a network step when the group spans nodes.
    #[inline]
    pub(super) fn one_step(s: Shape) -> (f64, f64) {
        if s.multi() {
            (0.0, 1.0)
        } else {
            (1.0, 0.0)
        }
    }

    /// Bandwidth seconds of a "send `intra` bytes to node-mates and `inter` bytes off-node at
    /// once" phase: the two fabrics work in parallel, the slower decides.
    #[inline]
    pub(super) fn split(
        &self,
        s: Shape,
        intra: f64,
        inter: f64,
        p: Pattern,
        rail_aligned: bool,
    ) -> f64 {
        let ti = if intra > 0.0 {
            intra * self.spb_intra(p, s.r)
        } else {
            0.0
        };
        let te = if inter > 0.0 {
            inter * self.spb_inter(rail_aligned)
        } else {
            0.0
        };
        ti.max(te)
    }
}
