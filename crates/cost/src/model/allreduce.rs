//! All-reduce: every algorithm as a [`Terms`], one function per algorithm (each inlined into
//! [`CostModel::cheapest`](super::CostModel) with its algorithm known).

use super::{ceil_log2, floor_pow2, CostModel, Pattern, Shape, Terms, IN_SWITCH_LATENCY};
use crate::Algorithm;

impl CostModel {
    #[inline(always)]
    pub(super) fn allreduce(&self, a: Algorithm, s: Shape, sz: f64) -> Option<Terms> {
        let t = match a {
            Algorithm::Ring => self.allreduce_ring(s, sz),
            Algorithm::Direct => self.allreduce_direct(s, sz),
            Algorithm::Tree | Algorithm::DoubleBinaryTree => self.allreduce_tree(a, s, sz),
            Algorithm::HalvingDoubling => self.allreduce_halving_doubling(s, sz),
            Algorithm::Hierarchical => self.allreduce_hierarchical(s, sz)?,
            Algorithm::InSwitch => self.allreduce_in_switch(s, sz)?,
            _ => return None,
        };
        Some(t)
    }

    /// Seed §6.2: T = 2(n−1)/n·S/(bw·bwurate) + 2(n−1)·latency.
    #[inline(always)]
    fn allreduce_ring(&self, s: Shape, sz: f64) -> Terms {
        let nf = s.nf();
        let (i, e) = Self::ring_steps(s, 2.0 * (nf - 1.0), 2.0);
        Terms {
            intra_steps: i,
            inter_steps: e,
            bw_secs: 2.0 * (nf - 1.0) * s.inv_n * sz * self.spb_flat(s),
            extra: 0.0,
            ll: true,
        }
    }

    /// Seed §6.3 (full-mesh reduce + broadcast): every rank sends its whole buffer to each of
    /// the n−1 others in one round. The seed writes 2(n−1)·S/bw, counting the received bytes
    /// against the same one-direction bandwidth, while its ring formula (§6.2) counts only
    /// sent bytes; links are full duplex, so we count one direction: (n−1)·S, of which
    /// (r−1)·S stays in the node and (n−r)·S leaves it.
    #[inline(always)]
    fn allreduce_direct(&self, s: Shape, sz: f64) -> Terms {
        let (nf, rf) = (s.nf(), s.rf());
        let (i, e) = Self::one_step(s);
        Terms {
            intra_steps: i,
            inter_steps: e,
            bw_secs: self.split(s, (rf - 1.0) * sz, (nf - rf) * sz, Pattern::AllPeers, false),
            extra: 0.0,
            ll: true,
        }
    }

    /// Seed §6.4 (single tree, `a` = Tree): latency 2⌈log2 n⌉ steps (reduce up, broadcast
    /// down). Bandwidth: the seed writes 2S/bw from a leaf's view; the bottleneck is an inner
    /// rank with two children, which receives 2S in the reduce and sends 2S in the broadcast,
    /// hence 4S/bw. We double the seed's leaf figure for both trees so that its stated
    /// relation (double tree = half the single tree's time, §6.5) holds.
    #[inline(always)]
    fn allreduce_tree(&self, a: Algorithm, s: Shape, sz: f64) -> Terms {
        let (li, le) = Self::tree_levels(s);
        let factor = if a == Algorithm::Tree { 4.0 } else { 2.0 };
        Terms {
            intra_steps: 2.0 * li,
            inter_steps: 2.0 * le,
            // Seed §6.5 (double binary tree): the prose gives S/bw + 2⌈log2 n⌉·latency
            // (the code line's stray sqrt over the latency term is a typo; we follow the
            // prose's latency). S/bw would beat the all-reduce lower bound
            // 2(n−1)/n·S/bw for n > 2 (Patarasuk & Yuan 2009); each rank sends S and
            // receives S in *each* phase, hence 2S/bw — NCCL's own model
            // (tuning.cc: Tree all-reduce algBw = busBw/2).
            bw_secs: factor * sz * self.spb_flat(s),
            extra: 0.0,
            ll: true,
        }
    }

    /// Seed §6.6: T = 2(n−1)/n·S/bw + 2·log2 n·latency, for n a power of two. Steps at
    /// distance 1, 2, 4, … (partners inside the node first, with the biggest halves), so the
    /// network carries only S·(1/r − 1/n) per phase — locality-aware like hierarchical. Not a
    /// power of two: the n − n' extra ranks (n' the largest power of two ≤ n) first fold their
    /// buffer into a partner and get the result back at the end (Thakur, Rabenseifner & Gropp
    /// 2005): +2 steps and +2·S/bw.
    #[inline(always)]
    fn allreduce_halving_doubling(&self, s: Shape, sz: f64) -> Terms {
        let n = s.n;
        let np = floor_pow2(n);
        let rp = floor_pow2(s.r.min(np));
        let npf = f64::from(np);
        let rpf = f64::from(rp);
        let li = f64::from(ceil_log2(rp));
        let le = f64::from(ceil_log2(np / rp));
        let intra = sz * (1.0 - 1.0 / rpf) * self.spb_intra(Pattern::OnePeer, s.r);
        let inter = if le > 0.0 {
            sz * (1.0 / rpf - 1.0 / npf) * self.spb_inter(true)
        } else {
            0.0
        };
        let mut t = Terms {
            intra_steps: 2.0 * li,
            inter_steps: 2.0 * le,
            bw_secs: 2.0 * (intra + inter),
            extra: 0.0,
            ll: true,
        };
        if np != n {
            let (i, e) = Self::one_step(s);
            t.intra_steps += 2.0 * i;
            t.inter_steps += 2.0 * e;
            t.bw_secs += 2.0 * sz * self.spb_one_peer(s);
        }
        t
    }

    /// Reduce-scatter inside the node (ring over r) → all-reduce of S/r across nodes (ring
    /// over N, each rank on its own NIC share, rail-aligned) → all-gather inside the node.
    /// Phases run one after another; one launch. `None` within one node or at one rank per
    /// node.
    #[inline(always)]
    fn allreduce_hierarchical(&self, s: Shape, sz: f64) -> Option<Terms> {
        if !s.multi() || s.r < 2 {
            return None;
        }
        let (rf, nn) = (s.rf(), s.nodes_f());
        let spb_i = self.spb_intra(Pattern::Ring, s.r);
        Some(Terms {
            intra_steps: 2.0 * (rf - 1.0),
            inter_steps: 2.0 * (nn - 1.0),
            bw_secs: 2.0 * (rf - 1.0) * s.inv_r * sz * spb_i
                + 2.0 * (nn - 1.0) * s.inv_nodes * (sz * s.inv_r) * self.spb_inter(true),
            extra: 0.0,
            ll: true,
        })
    }

    /// NVLS: each rank pushes its S into the switch, which reduces and multicasts; a rank
    /// sends S + S/r and receives S/r + S (Calculon's all_reduce [1, 1] coefficient,
    /// calculon.md), at IN_SWITCH_EFFICIENCY of the link. Across nodes (NCCL NVLSTree):
    /// in-switch inside the node + ring all-reduce of S/r between nodes. `None` without
    /// in-switch reduction or at one rank per node.
    #[inline(always)]
    fn allreduce_in_switch(&self, s: Shape, sz: f64) -> Option<Terms> {
        if !self.in_switch || s.r < 2 {
            return None;
        }
        let (rf, nn) = (s.rf(), s.nodes_f());
        let spb_sw = self.spb_in_switch;
        let mut t = Terms {
            intra_steps: 2.0,
            inter_steps: 0.0,
            bw_secs: (rf + 1.0) * s.inv_r * sz * spb_sw,
            extra: IN_SWITCH_LATENCY,
            ll: false,
        };
        if s.multi() {
            t.inter_steps = 2.0 * (nn - 1.0);
            t.bw_secs += 2.0 * (nn - 1.0) * s.inv_nodes * (sz * s.inv_r) * self.spb_inter(true);
        }
        Some(t)
    }
}
