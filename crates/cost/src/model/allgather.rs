//! All-gather and reduce-scatter: every algorithm as a [`Terms`], one function per algorithm
//! (each inlined into [`CostModel::cheapest`](super::CostModel) with its algorithm known).

use super::{ceil_log2, floor_pow2, CostModel, Pattern, Shape, Terms, IN_SWITCH_LATENCY};
use crate::Algorithm;

impl CostModel {
    /// AllGather (S = full output) and ReduceScatter (S = full input): mirror images with the
    /// same cost (seed §2.4/§2.6: per-rank volume (n−1)/n·S each way).
    #[inline(always)]
    pub(super) fn allgather(&self, a: Algorithm, s: Shape, sz: f64) -> Option<Terms> {
        let t = match a {
            Algorithm::Ring => self.allgather_ring(s, sz),
            Algorithm::Direct => self.allgather_direct(s, sz),
            Algorithm::HalvingDoubling => self.allgather_halving_doubling(s, sz),
            Algorithm::Hierarchical => self.allgather_hierarchical(s, sz)?,
            Algorithm::InSwitch => self.allgather_in_switch(s, sz)?,
            _ => return None,
        };
        Some(t)
    }

    /// Ring: n−1 steps of S/n (seed §6.2, one phase).
    #[inline(always)]
    fn allgather_ring(&self, s: Shape, sz: f64) -> Terms {
        let nf = s.nf();
        let (i, e) = Self::ring_steps(s, nf - 1.0, 1.0);
        Terms {
            intra_steps: i,
            inter_steps: e,
            bw_secs: (nf - 1.0) * s.inv_n * sz * self.spb_flat(s),
            extra: 0.0,
            ll: true,
        }
    }

    /// Direct: each rank sends its S/n shard to all n−1 peers at once (one round).
    #[inline(always)]
    fn allgather_direct(&self, s: Shape, sz: f64) -> Terms {
        let (nf, rf) = (s.nf(), s.rf());
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

    /// Recursive doubling (AG) / halving (RS), far partners with the small blocks first, so
    /// the network carries (N'−1)/n'·S and the node (n'−N')/n'·S. Not a power of two: extra
    /// ranks hand their shard to a partner first and receive the result at the end: +2 steps,
    /// +(1/n + 1)·S.
    #[inline(always)]
    fn allgather_halving_doubling(&self, s: Shape, sz: f64) -> Terms {
        let n = s.n;
        let np = floor_pow2(n);
        let rp = floor_pow2(s.r.min(np));
        let npf = f64::from(np);
        let nodes_p = f64::from(np / rp);
        let li = f64::from(ceil_log2(rp));
        let le = f64::from(ceil_log2(np / rp));
        let intra = sz * (npf - nodes_p) / npf * self.spb_intra(Pattern::OnePeer, s.r);
        let inter = if le > 0.0 {
            sz * (nodes_p - 1.0) / npf * self.spb_inter(true)
        } else {
            0.0
        };
        let mut t = Terms {
            intra_steps: li,
            inter_steps: le,
            bw_secs: intra + inter,
            extra: 0.0,
            ll: true,
        };
        if np != n {
            let (i, e) = Self::one_step(s);
            t.intra_steps += 2.0 * i;
            t.inter_steps += 2.0 * e;
            t.bw_secs += (s.inv_n + 1.0) * sz * self.spb_one_peer(s);
        }
        t
    }

    /// AG: across nodes among same-local-index ranks first (rail-aligned, S/r per rank
    /// gathered from N nodes), then inside the node; RS the reverse. Sequential phases.
    /// `None` within one node or at one rank per node.
    #[inline(always)]
    fn allgather_hierarchical(&self, s: Shape, sz: f64) -> Option<Terms> {
        if !s.multi() || s.r < 2 {
            return None;
        }
        let (rf, nn) = (s.rf(), s.nodes_f());
        Some(Terms {
            intra_steps: rf - 1.0,
            inter_steps: nn - 1.0,
            bw_secs: (nn - 1.0) * s.inv_nodes * (sz * s.inv_r) * self.spb_inter(true)
                + (rf - 1.0) * s.inv_r * sz * self.spb_intra(Pattern::Ring, s.r),
            extra: 0.0,
            ll: true,
        })
    }

    /// NVLS all-gather / reduce-scatter (NCCL, one node): one multicast step, (n−1)/n·S
    /// received per rank at IN_SWITCH_EFFICIENCY. `None` without in-switch reduction or
    /// across nodes.
    #[inline(always)]
    fn allgather_in_switch(&self, s: Shape, sz: f64) -> Option<Terms> {
        if !self.in_switch || s.multi() {
            return None;
        }
        Some(Terms {
            intra_steps: 1.0,
            inter_steps: 0.0,
            bw_secs: (s.nf() - 1.0) * s.inv_n * sz * self.spb_in_switch,
            extra: IN_SWITCH_LATENCY,
            ll: false,
        })
    }
}
