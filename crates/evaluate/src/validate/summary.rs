//! The figures over the scored rows: MAPE, the worst row, and MAPE per GPU architecture, per
//! framework profile and per source family (issue 17 item 6).

use super::*;

impl Validation {
    /// `self` with its MAPE, worst row and per-GPU, per-framework and per-source summaries
    /// computed from its `rows` (the rows of several files merged, or of one).
    pub fn summarised(mut self) -> Validation {
        let rows = &self.rows;
        self.mape = if rows.is_empty() {
            0.0
        } else {
            rows.iter().map(|r| r.error.abs()).sum::<f64>() / rows.len() as f64
        };
        let worst = rows
            .iter()
            .max_by(|a, b| a.error.abs().total_cmp(&b.error.abs()));
        self.worst = worst.map(|w| w.id.clone());
        self.worst_error = worst.map_or(0.0, |w| w.error);
        let mut by_gpu: Vec<ArchSummary> = Vec::new();
        for r in rows {
            match by_gpu.iter_mut().find(|a| a.arch == r.gpu_arch) {
                Some(a) => {
                    a.rows += 1;
                    a.mape += r.error.abs();
                }
                None => by_gpu.push(ArchSummary {
                    arch: r.gpu_arch,
                    rows: 1,
                    mape: r.error.abs(),
                }),
            }
        }
        for a in &mut by_gpu {
            a.mape /= a.rows as f64;
        }
        self.by_framework = group_mape(rows, |r| r.framework.to_string());
        self.by_source = group_mape(rows, |r| r.source.clone());
        self.by_gpu = by_gpu;
        self
    }
}

/// MAPE of `rows` grouped by `key`, groups in the order they first appear.
pub fn group_mape(rows: &[RowResult], key: impl Fn(&RowResult) -> String) -> Vec<GroupSummary> {
    let mut out: Vec<GroupSummary> = Vec::new();
    for r in rows {
        let k = key(r);
        match out.iter_mut().find(|g| g.name == k) {
            Some(g) => {
                g.rows += 1;
                g.mape += r.error.abs();
            }
            None => out.push(GroupSummary {
                name: k,
                rows: 1,
                mape: r.error.abs(),
            }),
        }
    }
    for g in &mut out {
        g.mape /= g.rows as f64;
    }
    out
}
