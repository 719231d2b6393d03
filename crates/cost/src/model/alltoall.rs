//! All-to-all: every algorithm as a [`Terms`] (unequal volumes included).

use super::{ceil_log2, CostModel, Pattern, Shape, Terms};
use crate::Algorithm;

impl CostModel {
    /// All-to-all, S = each rank's send buffer (S/n per peer); `mean` = mean rank's buffer
    /// (equal to S unless called through `alltoall_unequal`).
    #[inline(always)]
    pub(super) fn alltoall(&self, a: Algorithm, s: Shape, sz: f64, mean: f64) -> Option<Terms> {
        let (nf, rf, nn) = (s.nf(), s.rf(), s.nodes_f());
        let t = match a {
            // Seed §6.7a pairwise: T = (n−1)/n·S/bw + latency, one round; (r−1)/n·S to node-mates
            // and (n−r)/n·S through the rank's own NIC share (NCCL: all-to-all cannot aggregate
            // NICs, collectives.md §1), cross-rail.
            Algorithm::Direct => {
                let (i, e) = Self::one_step(s);
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: self.split(
                        s,
                        (rf - 1.0) * s.inv_n * sz,
                        (nf - rf) * s.inv_n * sz,
                        Pattern::AllPeers,
                        false,
                    ),
                    extra: 0.0,
                    ll: true,
                }
            }
            // Seed §6.7b ring: n−1 rounds, each rank sends one S/n block per round:
            // T = (n−1)·(S/n/bw + latency). Round k sends to rank i+k (one connection per rank,
            // "N 条连接"); across nodes every round has ranks whose partner is off-node.
            Algorithm::Ring => {
                let spb = self.spb_one_peer(s);
                let (i, e) = if s.multi() {
                    (0.0, nf - 1.0)
                } else {
                    (nf - 1.0, 0.0)
                };
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: (nf - 1.0) * (sz * s.inv_n) * spb,
                    extra: 0.0,
                    ll: true,
                }
            }
            // Seed §6.7c Bruck: ⌈log2 n⌉ rounds of ≈S/2: T = log2 n·(S/2/bw + latency).
            Algorithm::Bruck => {
                let k = f64::from(ceil_log2(s.n));
                let spb = self.spb_one_peer(s);
                let (i, e) = if s.multi() { (0.0, k) } else { (k, 0.0) };
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: k * (sz / 2.0) * spb,
                    extra: 0.0,
                    ll: true,
                }
            }
            // Two-level (Tutel 2DH, DeepEP): inside the node, regroup by destination local index
            // ((r−1)/r·S per rank over NVLink); then each rank exchanges with the same local
            // index on the other N−1 nodes ((N−1)/N of the node's aggregate per NIC share,
            // rail-aligned). With imbalance the node aggregate is max + (r−1)·mean.
            Algorithm::Hierarchical => {
                if !s.multi() || s.r < 2 {
                    return None;
                }
                let node_share = (sz + (rf - 1.0) * mean) * s.inv_r;
                Terms {
                    intra_steps: 1.0,
                    inter_steps: 1.0,
                    bw_secs: (rf - 1.0) * s.inv_r * sz * self.spb_intra(Pattern::AllPeers, s.r)
                        + (nn - 1.0) * s.inv_nodes * node_share * self.spb_inter(true),
                    extra: 0.0,
                    ll: true,
                }
            }
            _ => return None,
        };
        Some(t)
    }
}
