//! The memory floor: an admissible lower bound over the knobs that only lower memory.

use autoplan_plan::{
    Dispatcher, PlacementPolicy, Plan, Recompute, RecomputeModules, TpSpTransition, Zero,
};

use crate::{MemoryOptions, ModelMemory};

impl ModelMemory {
    /// An admissible lower bound: `floor(plan) ≤ breakdown(q).total` for every plan `q` that
    /// differs from `plan` only in `zero`, `recompute` (and its modules), `recompute_layers`,
    /// `mbs`, `sp`,
    /// `transition`, `dispatcher`, `placement` (and knobs memory ignores: algorithms, rank
    /// order, overlap, CP exchange). Memory rises with `mbs` and with the replicas of a
    /// balanced placement and falls with every recompute module added (selective of all of them
    /// can undercut full recompute's working set), with SP and with the all-reduce transition,
    /// so the bound takes those at their minimum (contiguous placement: no replicas; the least
    /// of full and all-module recompute) and the least of the ZeRO stages and dispatchers.
    /// Stages 0–3 over the whole data-parallel group bound every sharding mode: an HSDP group
    /// shards over fewer ranks (holds more), and FSDP without resharding holds stage 2's full
    /// parameters plus their shard.
    pub fn floor(&self, plan: &Plan, opts: &MemoryOptions) -> f64 {
        let mut lo = f64::INFINITY;
        // Full recompute keeps the least per block but adds one block's working set; selective
        // recompute of every module can undercut it when few blocks are in flight.
        let least = [
            (Recompute::Full, RecomputeModules::DEFAULT),
            (Recompute::Selective, RecomputeModules::ALL),
        ];
        for zero in 0..=3 {
            for (dispatcher, (recompute, recompute_modules)) in
                [Dispatcher::AllToAll, Dispatcher::AllGather]
                    .into_iter()
                    .flat_map(|d| least.into_iter().map(move |r| (d, r)))
            {
                let q = Plan {
                    zero: Zero::stage(zero),
                    recompute,
                    recompute_modules,
                    recompute_layers: None,
                    mbs: 1,
                    sp: true,
                    tp_sp_transition: TpSpTransition::AllReduceSlice,
                    dispatcher,
                    placement: PlacementPolicy::Contiguous,
                    ..*plan
                };
                lo = lo.min(self.breakdown(&q, opts).total);
            }
        }
        lo
    }
}
