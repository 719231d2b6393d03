//! Rooted collectives: broadcast/reduce and scatter/gather as [`Terms`].

use super::{CostModel, Pattern, Shape, Terms};
use crate::Algorithm;

impl CostModel {
    /// Broadcast / Reduce, S = the buffer.
    #[inline(always)]
    pub(super) fn broadcast(&self, a: Algorithm, s: Shape, sz: f64) -> Option<Terms> {
        let nf = s.nf();
        let t = match a {
            // Pipelined chain (NCCL ring broadcast): n−1 hops of latency, S/bw.
            Algorithm::Ring => {
                let (i, e) = Self::ring_steps(s, nf - 1.0, 1.0);
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: sz * self.spb_flat(s),
                    extra: 0.0,
                    ll: true,
                }
            }
            // Pipelined binary tree: ⌈log2 n⌉ levels, inner ranks forward to two children: 2S/bw.
            Algorithm::Tree => {
                let (li, le) = Self::tree_levels(s);
                Terms {
                    intra_steps: li,
                    inter_steps: le,
                    bw_secs: 2.0 * sz * self.spb_flat(s),
                    extra: 0.0,
                    ll: true,
                }
            }
            _ => return None,
        };
        Some(t)
    }

    /// Scatter / Gather, S = the root's full buffer; the root's link is the bottleneck.
    #[inline(always)]
    pub(super) fn scatter(&self, a: Algorithm, s: Shape, sz: f64) -> Option<Terms> {
        let (nf, rf) = (s.nf(), s.rf());
        let t = match a {
            // Pipelined chain: (n−1)/n·S leaves the root; n−1 hops.
            Algorithm::Ring => {
                let (i, e) = Self::ring_steps(s, nf - 1.0, 1.0);
                Terms {
                    intra_steps: i,
                    inter_steps: e,
                    bw_secs: (nf - 1.0) * s.inv_n * sz * self.spb_flat(s),
                    extra: 0.0,
                    ll: true,
                }
            }
            // Binomial tree, far halves first: the root sends S(1 − 1/N) through its own NIC
            // share, then S(1/N − 1/n) inside the node; ⌈log2 n⌉ rounds.
            Algorithm::Tree => {
                let (li, le) = Self::tree_levels(s);
                let inter = if s.multi() {
                    sz * (1.0 - s.inv_nodes) * self.spb_inter(true)
                } else {
                    0.0
                };
                let intra = sz * (s.inv_nodes - s.inv_n) * self.spb_intra(Pattern::OnePeer, s.r);
                Terms {
                    intra_steps: li,
                    inter_steps: le,
                    bw_secs: inter + intra,
                    extra: 0.0,
                    ll: true,
                }
            }
            // Direct: the root sends every peer its block at once, one round.
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
            _ => return None,
        };
        Some(t)
    }
}
