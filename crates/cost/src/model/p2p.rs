//! Send/recv between two ranks and the barrier as [`Terms`].

use super::{CostModel, Pattern, Shape, Terms};
use crate::Algorithm;

impl CostModel {
    /// Send/Recv between two ranks (seed §2.9): one step, S over the link between them.
    #[inline(always)]
    pub(super) fn sendrecv(&self, a: Algorithm, s: Shape, sz: f64) -> Option<Terms> {
        if a != Algorithm::PointToPoint {
            return None;
        }
        let (i, e) = Self::one_step(s);
        let spb = if s.multi() {
            self.spb_inter(true)
        } else {
            self.spb_intra(Pattern::OnePeer, s.r)
        };
        Some(Terms {
            intra_steps: i,
            inter_steps: e,
            bw_secs: sz * spb,
            extra: 0.0,
            ll: true,
        })
    }

    /// Barrier (seed §1.1): no payload. Tree = dissemination barrier, ⌈log2 n⌉ rounds
    /// (Hensgen, Finkel & Manber 1988); Direct = one round of n−1 zero-byte messages.
    #[inline(always)]
    pub(super) fn barrier(&self, a: Algorithm, s: Shape) -> Option<Terms> {
        let (i, e) = match a {
            Algorithm::Tree => Self::tree_levels(s),
            Algorithm::Direct => Self::one_step(s),
            _ => return None,
        };
        Some(Terms {
            intra_steps: i,
            inter_steps: e,
            bw_secs: 0.0,
            extra: 0.0,
            ll: true,
        })
    }
}
