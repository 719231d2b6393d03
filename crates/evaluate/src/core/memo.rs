//! The collectives already costed in one evaluation: a plan repeats the same collective on the
//! same group many times (the SP all-gather and reduce-scatter of attention and MLP, ...).

use autoplan_cluster::GroupPlacement;
use autoplan_cost::{AlgoMode, Collective, CollectiveCost};

use super::Evaluator;

/// Collectives remembered per evaluation (later ones are costed again).
const MEMO: usize = 16;

/// A fixed array on the stack: no allocation.
pub(super) struct Memo {
    n: usize,
    /// (op, group size, ranks per node) packed, and the bytes' bits: two words compared.
    keys: [(u64, u64); MEMO],
    vals: [CollectiveCost; MEMO],
    /// The last unequal all-to-all: (size, ranks per node, max bits, mean bits) → cost.
    a2a: Option<((u32, u32, u64, u64), CollectiveCost)>,
}

impl Default for Memo {
    fn default() -> Memo {
        Memo {
            n: 0,
            keys: [(0, 0); MEMO],
            vals: [CollectiveCost::ZERO; MEMO],
            a2a: None,
        }
    }
}

impl Memo {
    /// The cost of `op` of `bytes` on `g`, priced once per distinct (op, group, bytes).
    #[inline]
    pub(super) fn get(
        &mut self,
        ev: &Evaluator,
        op: Collective,
        g: GroupPlacement,
        bytes: f64,
        algo: AlgoMode,
    ) -> CollectiveCost {
        // The op in the top byte, the size in the next 32 bits, the ranks per node in the low
        // 24: exact while ranks per node < 2^24 (larger ones are priced, not kept).
        let packable = g.ranks_per_node < 1 << 24;
        let key = (
            (op as u64) << 56 | u64::from(g.size) << 24 | u64::from(g.ranks_per_node),
            bytes.to_bits(),
        );
        if packable {
            if let Some(i) = self.keys[..self.n].iter().position(|&k| k == key) {
                return self.vals[i];
            }
        }
        let c = ev.coll(op, g, bytes, algo);
        if packable && self.n < MEMO {
            self.keys[self.n] = key;
            self.vals[self.n] = c;
            self.n += 1;
        }
        c
    }

    /// The cost of an unequal all-to-all on `g` (`max` bytes on the busiest rank, `mean` on
    /// average), priced once per distinct shape in a row.
    #[inline]
    pub(super) fn alltoall_unequal(
        &mut self,
        ev: &Evaluator,
        g: GroupPlacement,
        max: f64,
        mean: f64,
        algo: AlgoMode,
    ) -> CollectiveCost {
        let key = (g.size, g.ranks_per_node, max.to_bits(), mean.to_bits());
        match self.a2a {
            Some((k, c)) if k == key => c,
            _ => {
                let c = ev.cost.alltoall_unequal(g, max, mean, algo);
                self.a2a = Some((key, c));
                c
            }
        }
    }
}
