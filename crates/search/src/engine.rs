//! The branch-and-bound driver.
//!
//! 1. enumerate the valid degree tuples (`pp → tp → ep → moe_tp → cp`, dp what is left) and
//!    their micro-batch sizes: these `(degrees, mbs)` pairs are the parallel tasks;
//! 2. each task is a depth-first walk `recompute → schedule/vpp → zero → knobs`, asking the
//!    objective for bounds at every level and cutting a subtree whose memory floor exceeds HBM
//!    or whose step-time bound exceeds the current K-th best (shared by all threads as atomic
//!    f64 bits);
//! 3. the per-thread top-K lists are merged; ranks are by `(step time, plan key)`, a total
//!    order, so the result does not depend on the number of threads or on who found what.
//!
//! The decision order, the plan key's digits and the rule for when a knob matters are the
//! knobs' own (`autoplan_plan::knob`: [`Knob::KEY_ORDER`], [`Knob::LEAVES`], [`Knob::matters`]).
//! Knobs that cannot matter for a plan (SP when tp = 1, the CP exchange when cp = 1, the
//! expert knobs of a dense model...) take `Plan::default()`'s value only, and rank orders that
//! differ only in where size-1 dims sit the first of their class, so the top-K holds no
//! duplicates.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::time::Instant;

use autoplan_plan::knob::Knob;
use autoplan_plan::{Plan, Schedule, Zero};
use rayon::prelude::*;

use crate::degrees::{degree_tuples, Degrees, KeyRadix, DEGREE_KNOBS, NLEAF, PLACE};
use crate::queue::{Item, Queue, COMPUTE, FULL, ORDER, SCREEN};
use crate::{
    Bound, Depth, NoFit, Objective, Observer, Open, Outcome, Partial, Ranked, Reject,
    SearchOptions, Shape, Space, Stats,
};

/// A (degrees, micro-batch size) pair: one parallel task.
#[derive(Debug, Clone, Copy)]
struct Task {
    deg: usize,
    mbs: usize,
}

#[derive(Debug, Clone, Copy)]
struct Entry<M> {
    t: f64,
    key: u128,
    plan: Plan,
    metrics: M,
}

fn cmp<M>(a: &Entry<M>, b: &Entry<M>) -> Ordering {
    a.t.total_cmp(&b.t).then(a.key.cmp(&b.key))
}

/// The per-thread state: a bounded sorted top-K and counters.
struct Local<M> {
    top: Vec<Entry<M>>,
    stats: Stats,
    min_memory: f64,
}

impl<M: Copy> Local<M> {
    fn new(k: usize) -> Self {
        Local {
            // Room for a small K up front; a large K grows with the plans actually found (a
            // caller's `top_k = usize::MAX` must not allocate, let alone overflow).
            top: Vec::with_capacity(k.min(64).saturating_add(1)),
            stats: Stats::default(),
            min_memory: f64::INFINITY,
        }
    }

    /// Insert; returns the new K-th best time when the list is full.
    fn insert(&mut self, e: Entry<M>, k: usize) -> Option<f64> {
        if self.top.len() == k {
            let last = self.top.last()?;
            if cmp(&e, last) != Ordering::Less {
                return None;
            }
        }
        let pos = self
            .top
            .binary_search_by(|x| cmp(x, &e))
            .unwrap_or_else(|p| p);
        self.top.insert(pos, e);
        self.top.truncate(k);
        (self.top.len() == k).then(|| self.top[k - 1].t)
    }

    fn merge(mut self, other: Local<M>, k: usize) -> Local<M> {
        self.top.extend(other.top);
        self.top.sort_by(cmp);
        self.top.truncate(k);
        self.stats.add(&other.stats);
        self.min_memory = self.min_memory.min(other.min_memory);
        self
    }
}

/// The shared K-th best step time: f64 bits of a non-negative number order like the number.
struct Threshold(AtomicU64);

impl Threshold {
    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(AtomicOrdering::Relaxed))
    }
    fn lower(&self, t: f64) {
        if t >= 0.0 {
            self.0.fetch_min(t.to_bits(), AtomicOrdering::Relaxed);
        }
    }
}

struct Ctx<'a, O: Objective, B: Observer + ?Sized> {
    obj: &'a O,
    space: &'a Space,
    shape: Shape,
    opts: SearchOptions,
    radix: KeyRadix,
    degs: Vec<Degrees>,
    threshold: Threshold,
    done: AtomicU64,
    total: u64,
    observer: &'a B,
}

/// Search `space` for the `opts.top_k` plans of smallest step time under `objective`, on the
/// current rayon thread pool (install a pool to choose the thread count). The result is the
/// same for any number of threads.
///
/// The steps: drop the recompute entries the model cannot take (`admitted`), enumerate the
/// (degrees, mbs) tasks (`tasks`), bound every task and order the survivors best first
/// (`Ctx::best_first`), walk them on the worker threads (`Ctx::walk`), and rank the merged
/// top-K (`outcome`).
pub fn search<O: Objective, B: Observer + ?Sized>(
    objective: &O,
    space: &Space,
    opts: &SearchOptions,
    observer: &B,
) -> Outcome<O::Metrics> {
    let start = Instant::now();
    let shape = objective.shape();
    let admitted = admitted(objective, space);
    let space = admitted.as_ref().unwrap_or(space);
    let opts = SearchOptions {
        top_k: opts.top_k.max(1),
        exhaustive: opts.exhaustive,
    };
    let degs = degree_tuples(space, &shape);
    let tasks = tasks(space, &shape, &degs);
    let ctx = Ctx {
        obj: objective,
        space,
        shape,
        opts,
        radix: KeyRadix::new(space),
        degs,
        threshold: Threshold(AtomicU64::new(f64::INFINITY.to_bits())),
        done: AtomicU64::new(0),
        total: tasks.len() as u64,
        observer,
    };
    let space_plans: u64 = tasks
        .iter()
        .map(|t| ctx.below(&ctx.degs[t.deg], Depth::MicroBatch))
        .sum();
    let (first, order) = ctx.best_first(&tasks);
    let local = ctx.walk(&tasks, &order).merge(first, opts.top_k);
    let stats = Stats {
        space_plans,
        tasks: tasks.len() as u64,
        threads: rayon::current_num_threads(),
        wall_s: start.elapsed().as_secs_f64(),
        ..local.stats
    };
    outcome(local, stats, shape.hbm_bytes)
}

/// The space without the recompute entries the model cannot take (a space is written for
/// every model); `None` where it takes them all.
fn admitted<O: Objective>(objective: &O, space: &Space) -> Option<Space> {
    if space.recompute.iter().all(|&r| objective.admits(r)) {
        return None;
    }
    Some(Space {
        recompute: space
            .recompute
            .iter()
            .copied()
            .filter(|&r| objective.admits(r))
            .collect(),
        ..space.clone()
    })
}

/// The parallel tasks: every degree tuple with every micro-batch size that divides the global
/// batch into enough micro-batches per stage. None if no recompute entry applies.
fn tasks(space: &Space, shape: &Shape, degs: &[Degrees]) -> Vec<Task> {
    let mut tasks = Vec::new();
    if space.recompute.is_empty() {
        // No recompute entry applies to the model: no plan.
        return tasks;
    }
    let min_micro = space.constraints.min_microbatches_per_stage.unwrap_or(0);
    for (d, deg) in degs.iter().enumerate() {
        for (m, &mbs) in space.mbs.iter().enumerate() {
            // A product past u32 is larger than any global batch: no whole micro-batches.
            let Some(per_step) = mbs.checked_mul(deg.dp) else {
                continue;
            };
            if !shape.global_batch.is_multiple_of(per_step) {
                continue;
            }
            let micro = shape.global_batch / per_step;
            if (micro as u64) < min_micro as u64 * deg.pp as u64 {
                continue;
            }
            tasks.push(Task { deg: d, mbs: m });
        }
    }
    tasks
}

/// The ranked outcome of the merged top-K, with the no-fit diagnosis where nothing fits.
fn outcome<M>(local: Local<M>, stats: Stats, hbm_bytes: f64) -> Outcome<M> {
    let no_fit = (local.top.is_empty() && local.min_memory.is_finite()).then_some(NoFit {
        min_memory_bytes: local.min_memory,
        hbm_bytes,
    });
    Outcome {
        plans: local
            .top
            .into_iter()
            .map(|e| Ranked {
                plan: e.plan,
                key: e.key,
                metrics: e.metrics,
                step_time_s: e.t,
            })
            .collect(),
        stats,
        no_fit,
    }
}

impl<O: Objective, B: Observer + ?Sized> Ctx<'_, O, B> {
    /// Plans below a node of `deg` at `depth` (one recompute, zero, schedule... level each).
    fn below(&self, deg: &Degrees, depth: Depth) -> u64 {
        let mut n = deg.knob_product;
        if depth < Depth::Schedule {
            n *= deg.schedules.len() as u64;
        }
        if depth < Depth::Zero {
            n *= deg.zeros.len() as u64;
        }
        if depth < Depth::Recompute {
            n *= self.space.recompute.len() as u64;
        }
        n
    }

    /// Best first: bound every task's step time cheaply (`Objective::order_bound`, in
    /// parallel), the keys of the walk's queue ([`crate::queue`]: the tighter bounds and the
    /// memory floor are asked for there, only of the tasks that reach its front uncut).
    /// Returns the counters of the bounding and the `(bound, task index)` pairs, sorted.
    fn best_first(&self, tasks: &[Task]) -> (Local<O::Metrics>, Vec<(f64, usize)>) {
        // Bounded in the order of the degrees other than pp, then mbs: neighbours share their
        // compute costs (which no pipeline depth changes), so the evaluator's per-thread
        // cache of them answers most; the bounds are the same in any order.
        let mut by_compute: Vec<usize> = (0..tasks.len()).collect();
        // Unique keys (the index last): an unstable sort orders them alike.
        by_compute.sort_unstable_by_key(|&i| {
            let d = &self.degs[tasks[i].deg];
            (d.tp, d.ep, d.moe_tp, d.cp, tasks[i].mbs, d.pp, i)
        });
        let sorted: Vec<f64> = by_compute
            .par_iter()
            .map(|&i| self.task_bound(&tasks[i]))
            .collect();
        let mut bounded = vec![0.0; tasks.len()];
        for (&i, b) in by_compute.iter().zip(sorted) {
            bounded[i] = b;
        }
        let mut first = Local::new(self.opts.top_k);
        if !self.opts.exhaustive {
            first.stats.nodes += tasks.len() as u64;
        }
        let mut order: Vec<(f64, usize)> = bounded.into_iter().zip(0..).collect();
        order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        (first, order)
    }

    /// Walk the tasks on the worker threads from the queue of `order`'s bounds
    /// ([`crate::queue`]), each worker taking the task of least bound when it is done with
    /// one, and merge their top-K lists.
    fn walk(&self, tasks: &[Task], order: &[(f64, usize)]) -> Local<O::Metrics> {
        let k = self.opts.top_k;
        let queue = Queue::new(order.iter().map(|&(key, task)| Item {
            key,
            level: ORDER,
            task,
            fits: false,
        }));
        let workers = rayon::current_num_threads().max(1);
        (0..workers)
            .into_par_iter()
            .with_max_len(1)
            .map(|_| {
                let mut l = Local::new(k);
                while let Some(item) = queue.pop() {
                    if self.step(&tasks[item.task], item, &queue, &mut l) {
                        continue;
                    }
                    let done = self.done.fetch_add(1, AtomicOrdering::Relaxed) + 1;
                    self.observer.progress(done, self.total);
                }
                l
            })
            .reduce(|| Local::new(k), |a, b| a.merge(b, k))
    }

    /// One popped task: cut it (by its bound against the current K-th best, or by its memory
    /// floor, counted and kept for the no-fit diagnosis), push it back with a tighter bound
    /// (true), or walk it. The memory floor is asked for once the full step-time bound is the
    /// least in the queue (a task cut by time costs none), or, while no K-th best is known (no
    /// step-time bound can cut then), before the screening bound, which costs more.
    fn step(&self, t: &Task, item: Item, queue: &Queue, l: &mut Local<O::Metrics>) -> bool {
        if !self.opts.exhaustive {
            let below = self.below(&self.degs[t.deg], Depth::MicroBatch);
            let cut_by_time = |l: &mut Local<O::Metrics>| {
                l.stats.pruned_by_time += 1;
                l.stats.pruned_plans += below;
                false
            };
            if item.key > self.threshold.get() {
                return cut_by_time(l);
            }
            let partial = Partial {
                plan: self.root(t),
                depth: Depth::MicroBatch,
                space: self.space,
                threshold: self.threshold.get(),
            };
            let mut fits = item.fits;
            if !fits
                && (item.level == FULL || partial.threshold.is_infinite() && item.level >= COMPUTE)
            {
                let memory = self.obj.memory_bound(&partial);
                if memory > self.shape.hbm_bytes {
                    l.stats.pruned_by_memory += 1;
                    l.stats.pruned_plans += below;
                    l.min_memory = l.min_memory.min(memory);
                    return false;
                }
                fits = true;
            }
            if item.level < FULL {
                l.stats.nodes += 1;
                let b = match item.level {
                    ORDER => self.obj.compute_bound(&partial),
                    COMPUTE => self.obj.screen_bound(&partial),
                    _ => {
                        debug_assert_eq!(item.level, SCREEN);
                        self.obj.time_bound(&partial)
                    }
                };
                let key = item.key.max(b);
                if key > self.threshold.get() {
                    return cut_by_time(l);
                }
                queue.push(Item {
                    key,
                    level: item.level + 1,
                    fits,
                    ..item
                });
                return true;
            }
        }
        self.task(t, l);
        false
    }

    /// The cheap step-time bound of a task's root (degrees and mbs fixed), before any plan is
    /// known.
    fn task_bound(&self, t: &Task) -> f64 {
        if self.opts.exhaustive {
            return Bound::NONE.step_time_s;
        }
        self.obj.order_bound(&Partial {
            plan: self.root(t),
            depth: Depth::MicroBatch,
            space: self.space,
            threshold: f64::INFINITY,
        })
    }

    /// The plan at a task's root: its degrees and mbs, every other field at its first value.
    fn root(&self, t: &Task) -> Plan {
        let s = self.space;
        let deg = &self.degs[t.deg];
        let mut plan = Plan {
            pp: deg.pp,
            tp: deg.tp,
            ep: deg.ep,
            moe_tp: deg.moe_tp,
            cp: deg.cp,
            dp: deg.dp,
            mbs: s.mbs[t.mbs],
            zero: s.zero[deg.zeros[0]],
            schedule: s.schedule[0],
            vpp: 1,
            ..Plan::default()
        };
        s.set(Knob::Recompute, 0, &mut plan);
        for k in Knob::LEAVES {
            s.set(k, 0, &mut plan);
        }
        // The first placement has the fewest replicas: the least memory of the subtree.
        if !deg.relevant[PLACE] {
            Knob::Placement.copy(&Plan::default(), &mut plan);
        }
        plan
    }

    /// Bound a node; true if its subtree is cut. With `floor` (the least entry of the node's
    /// block of the task's floor table) the step-time bound is that, and only the memory floor
    /// is asked of the objective, where the time does not cut.
    fn cut(
        &self,
        plan: &Plan,
        depth: Depth,
        deg: &Degrees,
        l: &mut Local<O::Metrics>,
        floor: Option<f64>,
    ) -> bool {
        if self.opts.exhaustive {
            return false;
        }
        l.stats.nodes += 1;
        let partial = Partial {
            plan: *plan,
            depth,
            space: self.space,
            threshold: self.threshold.get(),
        };
        let b: Bound = match floor {
            Some(t) if t > partial.threshold => Bound {
                step_time_s: t,
                memory_bytes: 0.0,
            },
            Some(t) => Bound {
                step_time_s: t,
                memory_bytes: self.obj.memory_bound(&partial),
            },
            None => self.obj.bound(&partial),
        };
        if b.memory_bytes > self.shape.hbm_bytes {
            l.stats.pruned_by_memory += 1;
            l.stats.pruned_plans += self.below(deg, depth);
            l.min_memory = l.min_memory.min(b.memory_bytes);
            return true;
        }
        if b.step_time_s > self.threshold.get() {
            l.stats.pruned_by_time += 1;
            l.stats.pruned_plans += self.below(deg, depth);
            return true;
        }
        false
    }

    /// The task's floor table ([`Objective::floor_table`]) over its open recompute entries,
    /// (schedule, vpp) pairs and sharding modes, in the walk's order; empty where the
    /// objective has none (or the search is exhaustive).
    fn table(&self, t: &Task, deg: &Degrees) -> Vec<f64> {
        let mut table = Vec::new();
        if self.opts.exhaustive {
            return table;
        }
        let s = self.space;
        let schedules: Vec<(Schedule, u32)> = deg
            .schedules
            .iter()
            .map(|&(is, iv)| (s.schedule[is], iv.map_or(1, |v| s.vpp[v])))
            .collect();
        let zeros: Vec<Zero> = deg.zeros.iter().map(|&iz| s.zero[iz]).collect();
        let open = Open {
            recomputes: &s.recompute,
            schedules: &schedules,
            zeros: &zeros,
        };
        let root = Partial {
            plan: self.root(t),
            depth: Depth::MicroBatch,
            space: s,
            threshold: self.threshold.get(),
        };
        if !self.obj.floor_table(&root, &open, &mut table) || table.len() != open.len() {
            table.clear();
        }
        table
    }

    /// One task's depth-first walk: recompute → schedule/vpp → ZeRO, bounding each node, then
    /// the leaf knobs of every surviving ZeRO node.
    fn task(&self, t: &Task, l: &mut Local<O::Metrics>) {
        let s = self.space;
        let deg = &self.degs[t.deg];
        let r = &self.radix;
        let mut plan = self.root(t);
        let base: u128 = DEGREE_KNOBS
            .iter()
            .zip(deg.idx)
            .map(|(&k, i)| r.digit(k, i))
            .sum::<u128>()
            + r.digit(Knob::Mbs, t.mbs);
        let table = self.table(t, deg);
        let (ns, nz) = (deg.schedules.len(), deg.zeros.len());
        // A node's floor: the least entry of its block of the table (entries run recompute,
        // then schedule, then sharding mode, so every node's block is contiguous); 0 where
        // every entry is ∞ (no valid triple: no information, as `Objective::bound` gives).
        let floor = |from: usize, len: usize| {
            (!table.is_empty()).then(|| {
                let m = table[from..from + len]
                    .iter()
                    .fold(f64::INFINITY, |a, &b| a.min(b));
                if m.is_finite() {
                    m
                } else {
                    0.0
                }
            })
        };
        for (ir, &rc) in s.recompute.iter().enumerate() {
            (plan.recompute, plan.recompute_modules) = rc;
            plan.zero = s.zero[deg.zeros[0]];
            plan.schedule = s.schedule[0];
            plan.vpp = 1;
            let f = floor(ir * ns * nz, ns * nz);
            if self.cut(&plan, Depth::Recompute, deg, l, f) {
                continue;
            }
            let k_rc = base + r.digit(Knob::Recompute, ir);
            for (ip, &(is, iv)) in deg.schedules.iter().enumerate() {
                plan.schedule = s.schedule[is];
                plan.vpp = iv.map_or(1, |v| s.vpp[v]);
                plan.zero = s.zero[deg.zeros[0]];
                let f = floor((ir * ns + ip) * nz, nz);
                if self.cut(&plan, Depth::Schedule, deg, l, f) {
                    continue;
                }
                let k_s = k_rc + r.digit(Knob::Schedule, is) + r.vpp_digit(iv);
                for (iz_pos, &iz) in deg.zeros.iter().enumerate() {
                    plan.zero = s.zero[iz];
                    let f = floor((ir * ns + ip) * nz + iz_pos, 1);
                    if self.cut(&plan, Depth::Zero, deg, l, f) {
                        continue;
                    }
                    self.leaves(&plan, k_s + r.digit(Knob::Zero, iz), deg, l);
                }
            }
        }
    }

    /// Every leaf-knob combination of one ZeRO node (an odometer over [`Knob::LEAVES`], no
    /// allocation), on a copy of its plan: the next nodes' partial plans keep the space's
    /// first knob values.
    fn leaves(&self, node: &Plan, key: u128, deg: &Degrees, l: &mut Local<O::Metrics>) {
        let mut plan = *node;
        let s = self.space;
        let mut pos = [0usize; NLEAF];
        let dflt = Plan::default();
        loop {
            let mut leaf_key = key;
            for (d, &k) in Knob::LEAVES.iter().enumerate() {
                let i = deg.knobs[d][pos[d]];
                // A knob that cannot change this plan keeps `Plan::default()`'s value
                // (canonical plans, see `Degrees::relevant`).
                if deg.relevant[d] {
                    s.set(k, i, &mut plan);
                } else {
                    k.copy(&dflt, &mut plan);
                }
                leaf_key += self.radix.digit(k, i);
            }
            self.score(&plan, leaf_key, l);
            // Advance the odometer.
            let mut d = 0;
            loop {
                if d == NLEAF {
                    return;
                }
                pos[d] += 1;
                if pos[d] < deg.knobs[d].len() {
                    break;
                }
                pos[d] = 0;
                d += 1;
            }
        }
    }

    /// Evaluate one complete plan, count it, and offer it to the top-K.
    fn score(&self, plan: &Plan, key: u128, l: &mut Local<O::Metrics>) {
        l.stats.evaluated += 1;
        match self.obj.evaluate(plan) {
            Ok(m) => {
                let t = O::step_time(&m);
                if !t.is_finite() || t < 0.0 {
                    l.stats.invalid += 1;
                } else {
                    l.stats.feasible += 1;
                    if t <= self.threshold.get() {
                        let e = Entry {
                            t,
                            key,
                            plan: *plan,
                            metrics: m,
                        };
                        if let Some(kth) = l.insert(e, self.opts.top_k) {
                            self.threshold.lower(kth);
                        }
                    }
                }
            }
            Err(Reject::Invalid) => l.stats.invalid += 1,
            Err(Reject::OutOfMemory { peak_bytes, .. }) => {
                l.stats.out_of_memory += 1;
                l.min_memory = l.min_memory.min(peak_bytes);
            }
        }
    }
}
