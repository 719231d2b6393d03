//! Terms → time: the protocol choice (LL vs Simple).

use super::{CostModel, Terms, LL_BANDWIDTH_FRACTION};
use crate::Protocol;

impl CostModel {
    /// Terms → time. Every call pays `start_lat` once (seed §5.5: "通信操作启动的软件开销", the
    /// software cost of starting a communication operation). Every step pays its hop latency
    /// (`intra_latency` inside a node, `link_delay` across the network, seed §5.4); the Simple
    /// protocol also pays `sync_lat` per step (seed §5.5: "Tree等多步算法的固定成本累加", the
    /// per-step synchronisation), which the LL protocol avoids by carrying its flag inline, at
    /// half the bandwidth (NCCL, collectives.md §2.5.5). The cheaper protocol wins, as in
    /// NCCL's tuner. Seed §6.4 charges `start_lat + sync_lat` on every tree step; measured
    /// A100 ring latencies (collectives_measured.csv c15–c17: 10 / 16.9 / 33.7 µs for 2 / 6 /
    /// 14 steps) show one fixed ≈6 µs plus ≈2 µs per step, so start is charged once.
    #[inline(always)]
    pub(super) fn finish(&self, t: Terms) -> (f64, Protocol) {
        let simple = self.start_lat
            + t.intra_steps * (self.hop_intra + self.sync_lat)
            + t.inter_steps * (self.hop_inter + self.sync_lat)
            + t.extra
            + t.bw_secs;
        if t.ll {
            let ll = self.start_lat
                + t.intra_steps * self.hop_intra
                + t.inter_steps * self.hop_inter
                + t.bw_secs / LL_BANDWIDTH_FRACTION;
            if ll < simple {
                return (ll, Protocol::LowLatency);
            }
        }
        (simple, Protocol::Simple)
    }
}
