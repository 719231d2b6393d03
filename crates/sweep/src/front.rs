//! `sweep --front`: each case's best plan priced as time to train and GPU-hours (the spec's
//! `tokens` and `price_usd_per_gpu_hour`), and the Pareto front of time against GPU-hours
//! over the GPU counts × global batches of each (model, cluster, seq_len, space) group: the
//! same axes as `search --gpus LIST --global-batch LIST`, with the same arithmetic
//! (`autoplan_search::train`, `autoplan_search::pareto::pareto_front`).
//!
//! A pure function of a whole sweep CSV, so it is the same for any thread count, shard split
//! or resume.

use std::collections::BTreeMap;

use autoplan_input::{InputError, Source};
use autoplan_search::pareto::pareto_front;
use autoplan_search::train::{Budget, TrainTime};

use crate::SweepTable;

/// The spec's `tokens` and `price_usd_per_gpu_hour`, checked (a price needs tokens).
pub(crate) fn spec_budget(
    source: &Source,
    tokens: &Option<autoplan_graph::tokens::RawTokens>,
    price: Option<f64>,
) -> Result<Option<Budget>, InputError> {
    let usd_per_gpu_hour = match price {
        Some(p) => match autoplan_cluster::price_range(p) {
            Some(why) => return Err(source.invalid_number(&["price_usd_per_gpu_hour"], p, why)),
            None => Some(p),
        },
        None => None,
    };
    match tokens {
        Some(t) => {
            let tokens = t.value().map_err(|why| {
                let shown = match t {
                    autoplan_graph::tokens::RawTokens::Number(v) => format!("{v}"),
                    autoplan_graph::tokens::RawTokens::Text(s) => format!("{s:?}"),
                };
                source.invalid(&["tokens"], shown, why)
            })?;
            Ok(Some(Budget {
                tokens,
                usd_per_gpu_hour,
            }))
        }
        None if usd_per_gpu_hour.is_some() => Err(source.invalid(
            &["price_usd_per_gpu_hour"],
            price.unwrap_or_default(),
            "prices a run of a stated length: give `tokens` too",
        )),
        None => Ok(None),
    }
}

/// The columns of a front CSV.
pub const FRONT_COLUMNS: &[&str] = &[
    "case",
    "model",
    "cluster",
    "gpus",
    "seq_len",
    "global_batch",
    "space",
    "status",
    "step_time_s",
    "tokens_per_s",
    "headroom_gib",
    "train_steps",
    "train_days",
    "gpu_hours",
    "usd",
    "pareto",
];

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// One row per case of `table` (in its order): the best plan's time to train on `budget` and
/// whether it is on its group's Pareto front. `hbm_bytes(cluster)` gives the HBM per GPU of a
/// cluster of the spec (the headroom column; empty when unknown).
pub fn front_csv(
    table: &SweepTable,
    budget: &Budget,
    hbm_bytes: impl Fn(&str) -> Option<f64>,
) -> Result<String, String> {
    let num = |b: &crate::Block, c: &str| -> Result<f64, String> {
        b.field(0, c)
            .parse::<f64>()
            .map_err(|_| format!("case {}: column `{c}` is not a number", b.case))
    };
    let mut trains: Vec<Option<TrainTime>> = Vec::with_capacity(table.blocks.len());
    for b in &table.blocks {
        trains.push(if b.ok() {
            let tokens_per_step = f64::from(b.keys.seq_len) * f64::from(b.keys.global_batch);
            Some(TrainTime::new(
                budget,
                num(b, "step_time_s")?,
                tokens_per_step,
                b.keys.gpus,
            ))
        } else {
            None
        });
    }
    // The front of each group, over its GPU counts and batches.
    let mut groups: BTreeMap<_, Vec<usize>> = BTreeMap::new();
    for (i, b) in table.blocks.iter().enumerate() {
        let k = &b.keys;
        groups
            .entry((&k.model, &k.cluster, k.seq_len, &k.space))
            .or_default()
            .push(i);
    }
    let mut on_front = vec![false; table.blocks.len()];
    for members in groups.values() {
        let costs: Vec<_> = members
            .iter()
            .map(|&i| trains[i].map(|t| (t.seconds, t.gpu_hours)))
            .collect();
        for (&i, f) in members.iter().zip(pareto_front(&costs)) {
            on_front[i] = f;
        }
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    let e = |e: csv::Error| e.to_string();
    w.write_record(FRONT_COLUMNS).map_err(e)?;
    for (i, b) in table.blocks.iter().enumerate() {
        let k = &b.keys;
        let mut row = vec![
            b.case.to_string(),
            k.model.clone(),
            k.cluster.clone(),
            k.gpus.to_string(),
            k.seq_len.to_string(),
            k.global_batch.to_string(),
            k.space.clone(),
            b.field(0, "status").to_string(),
        ];
        match trains[i] {
            Some(t) => {
                let peak = num(b, "memory_peak_bytes")?;
                let headroom = hbm_bytes(&k.cluster).map(|h| (h - peak) / GIB);
                row.extend([
                    b.field(0, "step_time_s").to_string(),
                    b.field(0, "tokens_per_s").to_string(),
                    headroom.map_or(String::new(), |h| format!("{h:.3}")),
                    format!("{}", t.steps),
                    format!("{}", t.days),
                    format!("{}", t.gpu_hours),
                    t.usd.map_or(String::new(), |d| format!("{d}")),
                    on_front[i].to_string(),
                ]);
            }
            None => row.extend(std::iter::repeat_n(String::new(), 7).chain(["false".into()])),
        }
        w.write_record(row).map_err(e)?;
    }
    let bytes = w.into_inner().map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::SyntheticPlanner;
    use crate::{header, render_case, SweepSpec};

    const SPEC: &str = r#"top_k = 1
models = ["m"]
seq_lens = [4096]
global_batches = [256, 512]
spaces = ["s"]
tokens = "1T"
price_usd_per_gpu_hour = 2.0

[[clusters]]
name = "c"
gpus = [64, 128, 256]
"#;

    #[test]
    fn front_rows_are_priced_and_non_dominated() {
        let spec = SweepSpec::parse(Source::new("s.toml", SPEC)).unwrap();
        let budget = spec.budget.unwrap();
        assert_eq!(budget.tokens, 1e12);
        let cases = spec.cases(|_| Ok(64)).unwrap();
        let mut text = header();
        for c in &cases {
            text.push_str(&render_case(
                c,
                &crate::Planner::plan(&SyntheticPlanner::default(), c),
            ));
        }
        let table = SweepTable::parse("s.csv", &text).unwrap();
        let out = front_csv(&table, &budget, |_| Some(80.0 * GIB)).unwrap();
        let rows: Vec<Vec<&str>> = out
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect())
            .collect();
        assert_eq!(rows.len(), cases.len());
        let col = |n: &str| FRONT_COLUMNS.iter().position(|c| *c == n).unwrap();
        let pts: Vec<Option<(f64, f64)>> = rows
            .iter()
            .map(|r| {
                (r[col("status")] == "ok").then(|| {
                    let days: f64 = r[col("train_days")].parse().unwrap();
                    let gh: f64 = r[col("gpu_hours")].parse().unwrap();
                    let gpus: f64 = r[col("gpus")].parse().unwrap();
                    // GPU-hours = days × 24 × GPUs, dollars = GPU-hours × price.
                    assert!((days * 24.0 * gpus - gh).abs() <= 1e-9 * gh);
                    let usd: f64 = r[col("usd")].parse().unwrap();
                    assert!((usd - 2.0 * gh).abs() <= 1e-9 * usd);
                    (days, gh)
                })
            })
            .collect();
        assert!(pts.iter().any(Option::is_some));
        for (r, p) in rows.iter().zip(&pts) {
            let dominated = p.is_some_and(|a| {
                pts.iter()
                    .flatten()
                    .any(|&b| autoplan_search::pareto::dominates(b, a))
            });
            assert_eq!(
                r[col("pareto")] == "true",
                p.is_some() && !dominated,
                "{r:?}"
            );
        }
    }

    #[test]
    fn spec_budget_errors_are_located() {
        for (from, to, part) in [
            (
                "tokens = \"1T\"",
                "tokens = -5",
                "tokens = -5: must be positive",
            ),
            ("tokens = \"1T\"", "tokens = \"1Q\"", "unknown suffix"),
            (
                "= 2.0",
                "= -1.0",
                "price_usd_per_gpu_hour = -1: must be positive",
            ),
            ("= 2.0", "= 1e308", "too large"),
            ("tokens = \"1T\"\n", "", "give `tokens` too"),
        ] {
            let e = SweepSpec::parse(Source::new("s.toml", SPEC.replace(from, to)))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("s.toml:") && e.contains(part), "{e}");
        }
    }
}
