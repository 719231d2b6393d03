//! `--tokens` and `--price` (evaluate, search): the run's token budget and the price of a
//! GPU-hour, and how a plan's time to train is printed. The token count lives in the model's
//! `training.tokens` and the price in the cluster's `price_usd_per_gpu_hour` (one home each);
//! the flags override them.

use autoplan_search::train::{Budget, TrainTime};

use crate::fmt::si_count;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct BudgetArgs {
    /// Tokens the whole run trains on, as people write them: 15T, 14.8T, 300B (= 300G),
    /// 2e12 (K, M, G/B, T, P: decimal). Adds the time to train, GPU-hours and (with a price)
    /// dollars to the output. Default: the model file's `[training] tokens`, if any.
    #[arg(long, value_name = "TOKENS", value_parser = parse_tokens_flag, allow_hyphen_values = true)]
    pub tokens: Option<f64>,
    /// US dollars per GPU-hour, for the cost of the run (needs a token count). Default: the
    /// cluster file's `price_usd_per_gpu_hour` (no bundled cluster states one).
    #[arg(long, value_name = "USD_PER_GPU_HOUR", value_parser = parse_price, allow_hyphen_values = true)]
    pub price: Option<f64>,
}

/// `--tokens`: `autoplan_graph::tokens::parse_tokens` (clap names the flag in the error).
fn parse_tokens_flag(s: &str) -> Result<f64, String> {
    autoplan_graph::tokens::parse_tokens(s)
}

/// `--price`: a number in the cluster file's range (`autoplan_cluster::price_range`).
fn parse_price(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| "expected US dollars per GPU-hour, e.g. 2.5".to_string())?;
    match autoplan_cluster::price_range(v) {
        Some(why) => Err(why),
        None => Ok(v),
    }
}

impl BudgetArgs {
    /// The model and cluster with the flags applied: `--tokens` as the model's
    /// `training.tokens`, `--price` as the cluster's price. `--price` without any token count
    /// is an error (it would change nothing).
    pub(crate) fn apply(
        &self,
        (mut model, mut cluster): (autoplan_graph::ModelSpec, autoplan_cluster::Cluster),
    ) -> anyhow::Result<(autoplan_graph::ModelSpec, autoplan_cluster::Cluster)> {
        if let Some(t) = self.tokens {
            model.training.tokens = Some(t);
        }
        if let Some(p) = self.price {
            anyhow::ensure!(
                model.training.tokens.is_some(),
                "--price {p}: prices a run of a stated length: give --tokens (e.g. 15T) or \
                 `tokens` in the model file's [training]"
            );
            cluster.price_usd_per_gpu_hour = Some(p);
        }
        Ok((model, cluster))
    }
}

/// The run's budget: the model's token count and the cluster's price (`None` without tokens).
pub(crate) fn budget(
    model: &autoplan_graph::ModelSpec,
    cluster: &autoplan_cluster::Cluster,
) -> Option<Budget> {
    model.training.tokens.map(|tokens| Budget {
        tokens,
        usd_per_gpu_hour: cluster.price_usd_per_gpu_hour,
    })
}

/// The time to train of a plan stepping in `step_time_s` on `model` and `cluster`, when the
/// budget is known.
pub(crate) fn train_time(
    model: &autoplan_graph::ModelSpec,
    cluster: &autoplan_cluster::Cluster,
    step_time_s: f64,
) -> Option<TrainTime> {
    let t = &model.training;
    budget(model, cluster).map(|b| {
        let tokens_per_step = f64::from(t.seq_len) * f64::from(t.global_batch);
        TrainTime::new(&b, step_time_s, tokens_per_step, cluster.gpus())
    })
}

/// [`super::ensure_finite`] for a time to train.
pub(crate) fn ensure_finite(what: &str, t: &TrainTime) -> anyhow::Result<()> {
    super::ensure_finite(
        what,
        &[
            ("steps", t.steps),
            ("time to train", t.seconds),
            ("GPU-hours", t.gpu_hours),
            ("dollars", t.usd.unwrap_or(0.0)),
        ],
    )
}

/// A time to train as JSON (`train` of evaluate, search and scale rows).
pub(crate) fn json(t: &TrainTime) -> serde_json::Value {
    serde_json::json!({
        "tokens": t.tokens,
        "steps": t.steps,
        "seconds": t.seconds,
        "days": t.days,
        "gpu_hours": t.gpu_hours,
        "usd": t.usd,
    })
}

/// One line for the evaluate summary: `15.00T tokens: 3,576,279 steps, 41.2 days, ...`.
pub(crate) fn line(t: &TrainTime) -> String {
    format!(
        "{} tokens in {:.0} steps: {:.2} days, {} GPU-hours{}",
        si_count(t.tokens),
        t.steps,
        t.days,
        si_count(t.gpu_hours),
        t.usd
            .map_or(String::new(), |d| format!(", ${}", si_count(d)))
    )
}
