//! Regression tracking: compare two sweeps case by case (matched by their keys, not their
//! index, so specs may grow between runs).

use std::collections::BTreeMap;
use std::fmt;

use crate::schema::{plan_columns, COLUMNS};
use crate::{Block, CaseKeys, SweepTable};

/// Metrics of the best plan compared by [`diff`], with the relative shift that is reported.
const METRICS: &[&str] = &["tokens_per_s", "step_time_s", "mfu", "memory_peak_bytes"];

/// One difference between two sweeps.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A case only the old sweep has.
    OnlyOld(CaseKeys),
    /// A case only the new sweep has.
    OnlyNew(CaseKeys),
    /// `ok` ↔ `infeasible`, or a different infeasibility reason.
    Status {
        keys: CaseKeys,
        old: String,
        new: String,
    },
    /// The best plan differs: the plan columns that changed, `(column, old, new)`.
    BestPlan {
        keys: CaseKeys,
        columns: Vec<(&'static str, String, String)>,
    },
    /// A metric of the best plan moved by more than the threshold (relative).
    Metric {
        keys: CaseKeys,
        metric: &'static str,
        old: f64,
        new: f64,
    },
}

/// What [`diff`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffReport {
    /// Cases present in both sweeps.
    pub compared: usize,
    /// Relative threshold for metric shifts (0.02 = 2 %).
    pub threshold: f64,
    /// The differences: old file's case order, then the cases only the new file has.
    pub changes: Vec<Change>,
}

impl DiffReport {
    /// No difference at all.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    fn count(&self, f: impl Fn(&Change) -> bool) -> usize {
        self.changes.iter().filter(|c| f(c)).count()
    }
}

/// Compare two sweeps: cases only in one, status changes, best-plan changes, and shifts of the
/// best plan's metrics larger than `threshold` (relative, e.g. 0.02).
pub fn diff(old: &SweepTable, new: &SweepTable, threshold: f64) -> DiffReport {
    let new_by_keys: BTreeMap<&CaseKeys, &Block> =
        new.blocks.iter().map(|b| (&b.keys, b)).collect();
    let old_keys: BTreeMap<&CaseKeys, ()> = old.blocks.iter().map(|b| (&b.keys, ())).collect();
    let mut changes = Vec::new();
    let mut compared = 0;
    for o in &old.blocks {
        let Some(n) = new_by_keys.get(&o.keys) else {
            changes.push(Change::OnlyOld(o.keys.clone()));
            continue;
        };
        compared += 1;
        compare(o, n, threshold, &mut changes);
    }
    for n in &new.blocks {
        if !old_keys.contains_key(&n.keys) {
            changes.push(Change::OnlyNew(n.keys.clone()));
        }
    }
    DiffReport {
        compared,
        threshold,
        changes,
    }
}

fn compare(o: &Block, n: &Block, threshold: f64, out: &mut Vec<Change>) {
    let status = |b: &Block| match b.ok() {
        true => "ok".to_string(),
        false => format!("infeasible ({})", b.field(0, "reason")),
    };
    if o.ok() != n.ok() || (!o.ok() && o.field(0, "reason") != n.field(0, "reason")) {
        out.push(Change::Status {
            keys: o.keys.clone(),
            old: status(o),
            new: status(n),
        });
    }
    if !(o.ok() && n.ok()) {
        return;
    }
    let columns: Vec<_> = plan_columns()
        .filter(|&c| o.rows[0][c] != n.rows[0][c])
        .map(|c| (COLUMNS[c], o.rows[0][c].clone(), n.rows[0][c].clone()))
        .collect();
    if !columns.is_empty() {
        out.push(Change::BestPlan {
            keys: o.keys.clone(),
            columns,
        });
    }
    for &metric in METRICS {
        let (Ok(a), Ok(b)) = (
            o.field(0, metric).parse::<f64>(),
            n.field(0, metric).parse::<f64>(),
        ) else {
            continue;
        };
        if relative_shift(a, b) > threshold {
            out.push(Change::Metric {
                keys: o.keys.clone(),
                metric,
                old: a,
                new: b,
            });
        }
    }
}

/// |b − a| / |a|; infinite when a = 0 ≠ b.
fn relative_shift(a: f64, b: f64) -> f64 {
    if a == b {
        0.0
    } else if a == 0.0 {
        f64::INFINITY
    } else {
        ((b - a) / a).abs()
    }
}

impl fmt::Display for DiffReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} case(s) compared (metric threshold {:.1}%): {} best plan(s) changed, {} metric shift(s), {} status change(s), {} only in old, {} only in new",
            self.compared,
            self.threshold * 100.0,
            self.count(|c| matches!(c, Change::BestPlan { .. })),
            self.count(|c| matches!(c, Change::Metric { .. })),
            self.count(|c| matches!(c, Change::Status { .. })),
            self.count(|c| matches!(c, Change::OnlyOld(_))),
            self.count(|c| matches!(c, Change::OnlyNew(_))),
        )?;
        for c in &self.changes {
            match c {
                Change::OnlyOld(k) => writeln!(f, "only in old   {k}")?,
                Change::OnlyNew(k) => writeln!(f, "only in new   {k}")?,
                Change::Status { keys, old, new } => {
                    writeln!(f, "status        {keys}: {old} → {new}")?
                }
                Change::BestPlan { keys, columns } => {
                    let cols: Vec<String> = columns
                        .iter()
                        .map(|(c, a, b)| format!("{c} {a}→{b}"))
                        .collect();
                    writeln!(f, "best plan     {keys}: {}", cols.join(", "))?
                }
                Change::Metric {
                    keys,
                    metric,
                    old,
                    new,
                } => {
                    let pct = if *old == 0.0 {
                        "new".to_string()
                    } else {
                        format!("{:+.1}%", (new - old) / old * 100.0)
                    };
                    writeln!(f, "metric        {keys}: {metric} {old} → {new} ({pct})")?
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn relative_shift_is_symmetric_in_sign() {
        assert_eq!(super::relative_shift(100.0, 103.0), 0.03);
        assert_eq!(super::relative_shift(100.0, 97.0), 0.03);
        assert_eq!(super::relative_shift(0.0, 0.0), 0.0);
        assert!(super::relative_shift(0.0, 1.0).is_infinite());
    }
}
