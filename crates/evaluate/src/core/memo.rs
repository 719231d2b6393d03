//! The collectives already costed in one evaluation: a plan repeats the same collective on the
//! same group many times (the SP all-gather and reduce-scatter of attention and MLP, ...).

use autoplan_cluster::GroupPlacement;
use autoplan_cost::{AlgoMode, Collective, CollectiveCost};

use super::Evaluator;

/// Slots of the table (a power of two); at most [`MEMO`] are filled, so a probe always meets
/// an empty slot.
const SLOTS: usize = 32;
/// Collectives remembered per evaluation (later ones are costed again).
const MEMO: usize = 24;
/// An empty slot's first key word: no packed key has every bit of the op byte set.
const EMPTY: u64 = u64::MAX;

/// A fixed table on the stack, open-addressed by a hash of the key: no allocation, and a hit
/// costs about one comparison (a plan's parts ask for the same few collectives again and
/// again, the floors once per open knob value).
pub(super) struct Memo {
    n: usize,
    /// (op, group size, ranks per node) packed, and the bytes' bits: two words compared;
    /// [`EMPTY`] first words mark free slots.
    keys: [(u64, u64); SLOTS],
    vals: [CollectiveCost; SLOTS],
    /// The last unequal all-to-all: (size, ranks per node, max bits, mean bits) → cost.
    a2a: Option<((u32, u32, u64, u64), CollectiveCost)>,
}

impl Default for Memo {
    fn default() -> Memo {
        Memo {
            n: 0,
            keys: [(EMPTY, 0); SLOTS],
            vals: [CollectiveCost::ZERO; SLOTS],
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
        if g.ranks_per_node >= 1 << 24 {
            return ev.coll(op, g, bytes, algo);
        }
        let key = (
            (op as u64) << 56 | u64::from(g.size) << 24 | u64::from(g.ranks_per_node),
            bytes.to_bits(),
        );
        // Linear probing from the key's hash (Fibonacci hashing of the two words).
        let h = (key.0 ^ key.1.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut i = (h >> (64 - SLOTS.trailing_zeros())) as usize;
        loop {
            let k = self.keys[i];
            if k == key {
                return self.vals[i];
            }
            if k.0 == EMPTY {
                break;
            }
            i = (i + 1) & (SLOTS - 1);
        }
        let c = ev.coll(op, g, bytes, algo);
        if self.n < MEMO {
            self.keys[i] = key;
            self.vals[i] = c;
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
