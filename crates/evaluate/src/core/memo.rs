//! The collectives already costed in one evaluation: a plan repeats the same collective on the
//! same group many times (the SP all-gather and reduce-scatter of attention and MLP, ...).

use autoplan_cluster::GroupPlacement;
use autoplan_cost::{AlgoMode, Collective, CollectiveCost};

use super::Evaluator;

/// Collectives remembered per evaluation (later ones are costed again).
const MEMO: usize = 16;

/// A fixed array on the stack: no allocation.
#[derive(Default)]
pub(super) struct Memo {
    n: usize,
    keys: [(Option<Collective>, u32, u32, u64); MEMO],
    vals: [Option<CollectiveCost>; MEMO],
    /// The last unequal all-to-all: (size, ranks per node, max bits, mean bits) → cost.
    a2a: Option<((u32, u32, u64, u64), CollectiveCost)>,
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
        let key = (Some(op), g.size, g.ranks_per_node, bytes.to_bits());
        for i in 0..self.n {
            if self.keys[i] == key {
                if let Some(c) = self.vals[i] {
                    return c;
                }
            }
        }
        let c = ev.coll(op, g, bytes, algo);
        if self.n < MEMO {
            self.keys[self.n] = key;
            self.vals[self.n] = Some(c);
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
