//! How many GPUs of each NVLink domain a job's rank grid uses (scheduler segments).

use crate::{Cluster, GroupPlacement};

impl Cluster {
    /// GPUs per NVLink domain as a job with these rank grids (innermost degree first, as in
    /// [`Cluster::group_placement`]; e.g. the dense and the MoE grid of one plan) is placed.
    ///
    /// [`Cluster::domain_gpus`] when every grid aligns with it (then every group has the same
    /// shape, [`GroupPlacement::aligned`]). Otherwise the largest whole-node multiple of
    /// `gpus_per_node`, at most the domain, with which every grid aligns: the job is
    /// allocated in segments of that many GPUs per domain, the rest of the domain's trays left
    /// to other jobs. That is how NVL72 clusters are scheduled: Slurm's `topology/block`
    /// plugin treats each NVLink rack as a block and `sbatch --segment=N` allocates a job in
    /// segments of N nodes each inside one block (Slurm documentation, "topology.conf" block
    /// topology and `sbatch --segment`, slurm.schedmd.com, Slurm ≥ 23.11). A 256-GPU job with
    /// EP = 64 on GB200 NVL72 racks (18 trays of 4 GPUs, hardware.md §2) runs as 4 segments
    /// of 16 trays: every EP group inside one rack, where consecutive filling of 72-GPU
    /// domains would cut three of its four EP groups across two racks. Falls back to the
    /// domain (the pessimistic bound of [`GroupPlacement::of`]) when no whole-node segment
    /// aligns. Equal to `domain_gpus()` on every cluster whose NVLink ends at the host.
    ///
    /// ```
    /// let nvl = autoplan_cluster::resolve_cluster("gb200-nvl72x4").unwrap();
    /// let c = nvl.with_gpus(256).unwrap();
    /// // tp=1, ep=64, edp=1, pp=4 (the MoE grid of a published Qwen3-235B run).
    /// assert_eq!(c.job_domain_gpus(&[&[1, 64, 1, 4]]), 64);
    /// // TP = 8 with DP = 36 fills 72-GPU racks exactly: the whole rack is used.
    /// assert_eq!(nvl.job_domain_gpus(&[&[8, 36]]), 72);
    /// ```
    pub fn job_domain_gpus(&self, grids: &[&[u32]]) -> u32 {
        let domain = self.domain_gpus();
        let gpn = self.node.gpus_per_node.max(1);
        let fits = |g: u32| grids.iter().all(|d| GroupPlacement::aligned(g, d));
        if fits(domain) || domain <= gpn {
            return domain;
        }
        (1..=domain / gpn)
            .rev()
            .map(|k| k * gpn)
            .find(|&g| fits(g))
            .unwrap_or(domain)
    }
}
