//! Where a search spends its time, on one thread: calls and seconds of the bounds per depth and
//! of the leaf evaluations, and how many evaluated plans were slower than the final K-th best
//! (work a tighter bound would save). `cargo run --release -p autoplan-search --example profile
//! -- MODEL CLUSTER [SPACE]` (bundled names).
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use autoplan_plan::Plan;
use autoplan_search::{
    resolve_space, search, Bound, Objective, Partial, Reject, Scorer, SearchOptions, Shape,
};

/// The scorer, counting calls and time per depth (index 4: leaf evaluations).
struct Counted {
    inner: Scorer,
    calls: [AtomicU64; 5],
    nanos: [AtomicU64; 5],
    /// Step times of the feasible evaluated plans (one thread: no contention).
    times: std::sync::Mutex<Vec<f64>>,
}

impl Counted {
    fn count<T>(&self, i: usize, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let r = f();
        self.calls[i].fetch_add(1, Ordering::Relaxed);
        self.nanos[i].fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        r
    }
}

impl Objective for Counted {
    type Metrics = autoplan_evaluate::Metrics;
    fn shape(&self) -> Shape {
        self.inner.shape()
    }
    fn evaluate(&self, plan: &Plan) -> Result<Self::Metrics, Reject> {
        let r = self.count(4, || self.inner.evaluate(plan));
        if let (Ok(m), Ok(mut v)) = (&r, self.times.lock()) {
            v.push(m.step_time_s);
        }
        r
    }
    fn step_time(m: &Self::Metrics) -> f64 {
        m.step_time_s
    }
    fn bound(&self, p: &Partial<'_>) -> Bound {
        self.count(p.depth as usize, || self.inner.bound(p))
    }
    fn time_bound(&self, p: &Partial<'_>) -> f64 {
        self.count(p.depth as usize, || self.inner.time_bound(p))
    }
    fn order_bound(&self, p: &Partial<'_>) -> f64 {
        self.count(p.depth as usize, || self.inner.order_bound(p))
    }
    fn compute_bound(&self, p: &Partial<'_>) -> f64 {
        self.count(p.depth as usize, || self.inner.compute_bound(p))
    }
    fn screen_bound(&self, p: &Partial<'_>) -> f64 {
        self.count(p.depth as usize, || self.inner.screen_bound(p))
    }
    fn memory_bound(&self, p: &Partial<'_>) -> f64 {
        self.count(p.depth as usize, || self.inner.memory_bound(p))
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 3 {
        eprintln!("usage: profile MODEL CLUSTER [SPACE]");
        std::process::exit(2);
    }
    let model = autoplan_graph::resolve_model(&a[1]).expect("bundled model");
    let cluster = autoplan_cluster::resolve_cluster(&a[2]).expect("bundled cluster");
    let space = resolve_space(a.get(3).map_or("default", |s| s.as_str())).expect("space");
    let c = Counted {
        inner: Scorer::new(&model, &cluster, Default::default()),
        calls: Default::default(),
        nanos: Default::default(),
        times: Default::default(),
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("thread pool");
    let opts = SearchOptions {
        top_k: 5,
        exhaustive: false,
    };
    let out = pool.install(|| search(&c, &space, &opts, &()));
    println!("{:#?}", out.stats);
    let names = ["MicroBatch", "Recompute", "Schedule", "Zero", "leaf"];
    for (i, n) in names.iter().enumerate() {
        let calls = c.calls[i].load(Ordering::Relaxed);
        let s = c.nanos[i].load(Ordering::Relaxed) as f64 * 1e-9;
        println!(
            "{n:>10}: {calls:>9} calls {s:>8.3} s {:>7.0} ns/call",
            s * 1e9 / calls.max(1) as f64
        );
    }
    if let Some(kth) = out.plans.last().map(|r| r.step_time_s) {
        let times = c.times.lock().expect("one thread");
        let slower = times.iter().filter(|&&t| t > kth).count();
        println!(
            "{slower} of {} feasible evaluated plans slower than the final K-th best",
            times.len()
        );
    }
    for r in &out.plans {
        println!("{:.6} s {}", r.step_time_s, r.plan);
    }
}
