//! Time to train and what it costs: a plan's step time times the steps a token budget takes.

/// What a run is to train on, and what a GPU-hour costs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Tokens of the whole run (`--tokens`, `[training] tokens`; checked by
    /// `autoplan_graph::tokens`).
    pub tokens: f64,
    /// US dollars per GPU-hour (`--price`, the cluster file's `price_usd_per_gpu_hour`).
    pub usd_per_gpu_hour: Option<f64>,
}

/// Seconds per hour and per day.
const HOUR_S: f64 = 3600.0;
const DAY_S: f64 = 86_400.0;

/// The time a plan takes to train on a budget, and its GPU-hours (and dollars).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TrainTime {
    pub tokens: f64,
    /// Optimizer steps: ⌈tokens / tokens per step⌉ (a run takes whole steps).
    pub steps: f64,
    /// Wall time, seconds: steps × step time (no restarts, evaluation or checkpoint stalls).
    pub seconds: f64,
    pub days: f64,
    /// GPUs × hours: every GPU of the plan is held for the whole run.
    pub gpu_hours: f64,
    /// GPU-hours × price, when a price is known.
    pub usd: Option<f64>,
}

impl TrainTime {
    /// `budget` trained at `step_time_s` per step of `tokens_per_step` tokens on `gpus` GPUs.
    ///
    /// ```
    /// use autoplan_search::train::{Budget, TrainTime};
    /// let b = Budget { tokens: 1e12, usd_per_gpu_hour: Some(2.0) };
    /// let t = TrainTime::new(&b, 10.0, 4e6, 1024);
    /// assert_eq!(t.steps, 250_000.0);
    /// assert_eq!(t.seconds, 2.5e6);
    /// assert_eq!(t.gpu_hours, 2.5e6 / 3600.0 * 1024.0);
    /// assert_eq!(t.usd, Some(t.gpu_hours * 2.0));
    /// ```
    pub fn new(budget: &Budget, step_time_s: f64, tokens_per_step: f64, gpus: u32) -> TrainTime {
        let steps = (budget.tokens / tokens_per_step).ceil();
        let seconds = steps * step_time_s;
        let gpu_hours = seconds / HOUR_S * f64::from(gpus);
        TrainTime {
            tokens: budget.tokens,
            steps,
            seconds,
            days: seconds / DAY_S,
            gpu_hours,
            usd: budget.usd_per_gpu_hour.map(|p| gpu_hours * p),
        }
    }
}
