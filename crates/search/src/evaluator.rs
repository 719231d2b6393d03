//! [`Objective`] for the real cost model, `autoplan_evaluate::Evaluator`.
//!
//! Bounds (all admissible, checked against `evaluate` on random plans by `tests/evaluator.rs`
//! and `tests/floor.rs`):
//! - step time, cheap: `Evaluator::lower_bound` — the model FLOPs (plus the fixed recompute) at
//!   the highest GEMM efficiency over all GPUs — stretched by the pipeline bubble that every
//!   completion pays: with the stage times `t_i`, `t_max ≥ Σt_i / pp`, the evaluator's step is at
//!   least `m·t_max + f·(Σt_i − t_max) ≥ Σt_i·(m + f·(pp−1)) / pp` for the schedule's bubble
//!   fraction `f` (1F1B 1, interleaved 1/vpp, ZB-H1 1/3, DualPipe (p−2)/(3(p−1)), evaluate's
//!   `run`), `m` micro-batches, and `Σt_i ≥ compute bound · pp / m`; the smallest `f` of the
//!   schedules still open is used;
//! - step time, with communication ([`Scorer`], where the two others do not cut):
//!   `Evaluator::step_floor`, the evaluator's own step time with every class's exposed TP, CP
//!   and EP communication at its least over the TP→SP transition, the CP exchange, the
//!   dispatcher and the `moe_tp` scheme still open, minimised over the canonical rank orders and
//!   the open recompute modes, schedules and ZeRO stages (admissibility argued in
//!   `crates/evaluate/src/core/floor.rs`), and here over SP, placement and algorithm mode with
//!   the overlaps on where open (`Scorer::comm_floor`);
//! - step time at a task's root, cheaper and looser first (the engine's queue, `queue.rs`):
//!   `order_bound` with `Evaluator::step_floor_compute` (compute and pipeline only),
//!   `screen_bound` with `Evaluator::step_floor_quick` (no recompute, no DP rest), `time_bound`
//!   with `Evaluator::step_floor` (as `bound`, without the memory floor);
//! - memory: the peak of the completion with every undecided memory knob at its most saving
//!   value in the space (full recompute, the highest ZeRO stage — and the highest below 3, as
//!   ZeRO 3's gather buffer can outweigh its sharding —, SP on, the all-reduce TP→SP
//!   transition, the first placement), minimised over the open schedules, at the open
//!   dispatcher with the smallest buffer (`Evaluator::least_memory_dispatcher`: the memory
//!   model reads the dispatcher only through that buffer) — the memory model grows with none
//!   of the others.

use autoplan_evaluate::{Evaluator, Infeasible, Metrics, OpenLists, Partial as EvalPartial};
use autoplan_plan::knob::{Context, Knob};
use autoplan_plan::{
    CpComm, Dispatcher, Framework, MoeTpScheme, Plan, RankOrder, Recompute, RecomputeModules,
    Schedule, TpSpTransition, Zero,
};

use crate::{Bound, Depth, Objective, Open, Partial, Reject, Shape, Space};

/// The peak memory of `plan`, however the evaluator judges it (None: invalid, no information).
fn peak(ev: &Evaluator, plan: &Plan) -> Option<f64> {
    // Memory only (`Evaluator::memory_peak_bytes`): the same number as `evaluate`'s, without
    // the step time.
    ev.memory_peak_bytes(plan).ok()
}

impl Objective for Evaluator {
    type Metrics = Metrics;

    fn shape(&self) -> Shape {
        let m = self.model();
        let c = self.cluster();
        Shape {
            gpus: c.gpus(),
            gpus_per_node: c.domain_gpus(),
            heads: m.heads,
            layers: m.layers,
            experts: m.moe.as_ref().map_or(0, |x| x.experts),
            global_batch: m.training.global_batch,
            hbm_bytes: c.gpu.hbm_bytes,
        }
    }

    fn evaluate(&self, plan: &Plan) -> Result<Metrics, Reject> {
        Evaluator::evaluate(self, plan).map_err(|e| match e {
            Infeasible::Invalid(_) => Reject::Invalid,
            Infeasible::OutOfMemory {
                peak_bytes,
                hbm_bytes,
            } => Reject::OutOfMemory {
                peak_bytes,
                hbm_bytes,
            },
            // Fits in HBM, not in the host's memory: a plan that cannot run, whose HBM peak
            // says nothing about its neighbours'.
            Infeasible::OutOfHostMemory { .. } => Reject::Invalid,
        })
    }

    fn step_time(m: &Metrics) -> f64 {
        m.step_time_s
    }

    fn admits(&self, (recompute, recompute_modules): (Recompute, RecomputeModules)) -> bool {
        let plan = Plan {
            recompute,
            recompute_modules,
            ..Plan::default()
        };
        plan.check_recompute(self.model()).is_ok()
    }

    fn bound(&self, partial: &Partial<'_>) -> Bound {
        Bound {
            memory_bytes: memory_floor(self, partial, self.cluster().gpu.hbm_bytes),
            ..time_bound(self, partial)
        }
    }

    fn time_bound(&self, partial: &Partial<'_>) -> f64 {
        time_bound(self, partial).step_time_s
    }

    fn memory_bound(&self, partial: &Partial<'_>) -> f64 {
        memory_floor(self, partial, self.cluster().gpu.hbm_bytes)
    }
}

/// The memory floor of the module docs: the peak of the completion with every undecided memory
/// knob at its most saving value, minimised over the open schedules, dispatchers and sharding
/// modes; 0 if the plan is invalid (no information), and 0 as soon as one of those peaks fits
/// `budget` (a search asks only whether the floor exceeds its budget, and keeps the floors of
/// the subtrees it cuts, which are computed in full; 0 bounds every completion).
fn memory_floor(ev: &Evaluator, partial: &Partial<'_>, budget: f64) -> f64 {
    let p = partial.plan;
    let s = partial.space;
    let ctx = context(ev, &p);
    let mut q = p;
    // Selective recompute of the union of the open module sets stores the least of the
    // selective entries (more modules never store more); it can undercut full recompute, whose
    // one-block working set it avoids, unless it is Megatron's default set (`core_attn`).
    let mut union = None;
    if partial.depth < Depth::Recompute {
        (q.recompute, q.recompute_modules) = s
            .recompute
            .iter()
            .copied()
            .max_by_key(|r| r.0)
            .unwrap_or((Recompute::Full, RecomputeModules::DEFAULT));
        let set = s
            .recompute
            .iter()
            .filter(|r| r.0 == Recompute::Selective)
            .fold(0, |acc, r| acc | r.1 .0);
        if set & !RecomputeModules::CORE_ATTN != 0 {
            union = Some(RecomputeModules(set));
        }
    }
    // The sharding modes still open, each bounded by its ZeRO stage over the whole group with
    // resharding (an HSDP group shards over fewer ranks; `3-noreshard` holds ZeRO 2's and
    // ZeRO 3's weights and more): of stages 0–2 the highest stores the least, and ZeRO 3 can
    // store more than it (its gathered block), so the floor tries the highest open stage below
    // 3 and stage 3 (`autoplan-memory`'s tests pin each of these inequalities).
    let open_zeros = if partial.depth < Depth::Zero {
        &s.zero[..]
    } else {
        std::slice::from_ref(&p.zero)
    };
    let below_3 = open_zeros
        .iter()
        .map(|z| z.stage)
        .filter(|&st| st < 3)
        .max();
    let has_3 = open_zeros.iter().any(|z| z.stage >= 3);
    let candidates = [below_3.map(Zero::stage), has_3.then_some(Zero::stage(3))];
    // Every leaf knob the memory model reads at its least memory: the engine's partial plans
    // hold whatever leaf values were tried last below an earlier sibling. The first placement
    // has the fewest replicas (`Space::placement` is sorted so); where it does not matter
    // (no EP) the engine fixes `Plan::default()`'s.
    q.sp = true;
    q.tp_sp_transition = TpSpTransition::AllReduceSlice;
    // The most offloaded optimizer state the space lists: offload only lowers HBM (the
    // space's list is sorted, the largest fraction last).
    q.offload_optimizer = s.offload_optimizer.last().copied().unwrap_or(0);
    // Activation offload only lowers HBM (memory crate, `offloaded_acts`) and `all` offloads
    // at least any count the space lists, on every stage: the floor offloads every layer when
    // the space lists any.
    q.offload_activations = match s.offload_activations.last() {
        Some(&n) if n > 0 => autoplan_plan::offload_activations::ALL,
        _ => 0,
    };
    // Parameter offload moves the shard out but brings a second gathered block in: either can
    // hold less, so the floor tries both where the space lists both (below).
    q.offload_params = false;
    let params_open = s.offload_params.contains(&true);
    q.placement = match s.placement.first() {
        Some(&first) if Knob::Placement.matters(&ctx) => first,
        _ => Plan::default().placement,
    };
    // Of the open dispatchers, the one with the smallest buffer holds the least (memory
    // crate, `least_memory_dispatcher`: the buffer reads none of the knobs the loops below
    // vary).
    let least = ev.least_memory_dispatcher(&q, dispatchers(partial, &ctx));
    // The least peak over the open schedules (None: an invalid plan).
    let floor = |q: &mut Plan| {
        let mut mem = Some(f64::INFINITY);
        open_schedules(partial, &ctx, &mut |sch, v| {
            if mem.is_some_and(|m| m <= budget) {
                // One completion fits: the floor is 0 (below), the rest need no pricing.
                return;
            }
            q.schedule = sch;
            q.vpp = v;
            if let Some(d) = least {
                q.dispatcher = d;
                mem = mem.zip(peak(ev, q)).map(|(a, b)| a.min(b));
                // Parameter offload, where the plan can take it (`Plan::check`: a ZeRO-3
                // shard, the whole optimizer on the host).
                if params_open && q.zero.shards_params() && q.offload_optimizer == 100 {
                    let r = Plan {
                        offload_params: true,
                        ..*q
                    };
                    mem = mem.zip(peak(ev, &r)).map(|(a, b)| a.min(b));
                }
            }
        });
        mem
    };
    let mut mem = Some(f64::INFINITY);
    for z in candidates.into_iter().flatten() {
        if mem.is_some_and(|m| m <= budget) {
            break;
        }
        q.zero = z;
        mem = mem.zip(floor(&mut q)).map(|(a, b)| a.min(b));
        if let Some(m) = union {
            // The same mode again with the union of the selective sets.
            let mut r = Plan {
                recompute: Recompute::Selective,
                recompute_modules: m,
                ..q
            };
            mem = mem.zip(floor(&mut r)).map(|(a, b)| a.min(b));
        }
    }
    mem.filter(|m| m.is_finite() && *m > budget).unwrap_or(0.0)
}

/// The relevance context of `plan` for the evaluator's model ([`Knob::matters`]).
fn context(ev: &Evaluator, plan: &Plan) -> Context {
    Context::new(plan, ev.model().moe.is_some())
}

/// The values of leaf `knob` the completions of a plan may take: the space's `list` where the
/// knob matters in `ctx`, else `default` (the engine fixes `Plan::default()`'s there).
fn open<'a, T>(knob: Knob, ctx: &Context, list: &'a [T], default: &'a T) -> &'a [T] {
    if knob.matters(ctx) {
        list
    } else {
        std::slice::from_ref(default)
    }
}

/// The dispatchers the completions of `partial` may use: either one's buffer can be the
/// smaller (the engine fixes it to `Plan::default()`'s where there is no dispatch).
fn dispatchers<'a>(partial: &Partial<'a>, ctx: &Context) -> &'a [Dispatcher] {
    const DEFAULT: &Dispatcher = &Dispatcher::AllToAll;
    open(Knob::Dispatcher, ctx, &partial.space.dispatcher, DEFAULT)
}

/// Call `f` with every (schedule, vpp) still open below `partial`.
fn open_schedules(partial: &Partial<'_>, ctx: &Context, f: &mut dyn FnMut(Schedule, u32)) {
    let p = partial.plan;
    let s = partial.space;
    if partial.depth >= Depth::Schedule || !Knob::Schedule.matters(ctx) {
        f(p.schedule, p.vpp);
    } else {
        for &schedule in &s.schedule {
            let sch = schedule;
            if Knob::Vpp.matters(&Context { schedule, ..*ctx }) {
                for &v in &s.vpp {
                    f(sch, v);
                }
            } else {
                f(sch, 1);
            }
        }
    }
}

/// The compute-and-bubble time bound of the module docs (memory left at 0).
fn time_bound(ev: &Evaluator, partial: &Partial<'_>) -> Bound {
    let p = partial.plan;
    let rc_fixed = partial.depth >= Depth::Recompute;
    let compute = ev.lower_bound(&EvalPartial {
        tp: Some(p.tp),
        pp: Some(p.pp),
        recompute: rc_fixed.then_some(p.recompute),
    });
    let micro = (ev.model().training.global_batch / (p.mbs * p.dp).max(1)).max(1) as f64;
    let mut frac = f64::INFINITY;
    open_schedules(partial, &context(ev, &p), &mut |sch, v| {
        frac = frac.min(sch.bubble(1.0, v, p.pp))
    });
    let bubble = if p.pp > 1 && frac.is_finite() {
        (micro + frac * (p.pp - 1) as f64) / micro
    } else {
        1.0
    };
    Bound {
        step_time_s: compute * bubble,
        memory_bytes: 0.0,
    }
}

/// The real cost model with the communication floor: at every node, the compute-and-bubble
/// bound first (cheap: a node it cuts costs nothing more), then the memory floor, then — where
/// neither cuts — `Evaluator::step_floor` (`Scorer::comm_floor`), a floor of every
/// completion's whole step: compute, recompute, bubble, exposed communication, DP reduction and
/// optimizer step.
#[derive(Debug, Clone)]
pub struct Scorer {
    pub exact: Evaluator,
    /// The framework the plans must run in: a plan it refuses on this cluster is rejected as
    /// invalid (`Framework::check_on`). `Framework::Any` (the default of [`Scorer::new`]) refuses none.
    pub framework: Framework,
    /// Bytes each GPU keeps free beyond the plan's peak (`--min-headroom`): a plan with less
    /// headroom is rejected as out of memory. 0 by default.
    pub min_headroom_bytes: f64,
}

impl Scorer {
    pub fn new(
        model: &autoplan_graph::ModelSpec,
        cluster: &autoplan_cluster::Cluster,
        opts: autoplan_evaluate::EvalOptions,
    ) -> Scorer {
        Scorer {
            exact: Evaluator::new(model, cluster, opts),
            framework: Framework::Any,
            min_headroom_bytes: 0.0,
        }
    }

    /// The scorer for plans that `framework` runs, with `min_headroom_bytes` kept free.
    pub fn with_target(mut self, framework: Framework, min_headroom_bytes: f64) -> Scorer {
        self.framework = framework;
        self.min_headroom_bytes = min_headroom_bytes.max(0.0);
        self
    }

    /// The memory a plan may use per GPU: the HBM less the required headroom.
    pub fn memory_budget(&self) -> f64 {
        self.exact.cluster().gpu.hbm_bytes - self.min_headroom_bytes
    }

    /// `Evaluator::step_floor` of `partial`: real communication, each kind at its least over
    /// the communication knobs still open, minimised over the open rank orders, recompute
    /// modes, schedules and ZeRO stages, and here over the leaf knobs that also change compute
    /// (SP, the placement) or the collectives' algorithms (the algorithm mode), each value
    /// tried; the overlaps are taken on where open (overlap only hides time: `tp_comm`,
    /// `ep_comm`). The open lists mirror the engine's enumeration (`engine::degrees`): a knob
    /// that cannot matter for the plan takes `Plan::default()`'s value.
    /// `detail` picks the evaluator's floor: `step_floor`, or the looser and cheaper
    /// `step_floor_quick` (no recompute, no DP rest) or `step_floor_compute` (no
    /// communication either).
    fn comm_floor(&self, partial: &Partial<'_>, detail: Detail) -> f64 {
        let s = partial.space;
        let p = partial.plan;
        let ctx = context(&self.exact, &p);
        // The ZeRO stages and (schedule, vpp) pairs still open, as the engine enumerates them
        // (`engine::degrees`: one stage where ZeRO does not matter, interleaving with
        // `pp·vpp ≤ layers`).
        let zeros = if partial.depth >= Depth::Zero {
            std::slice::from_ref(&p.zero)
        } else if !Knob::Zero.matters(&ctx) {
            &s.zero[..1]
        } else {
            &s.zero[..]
        };
        let mut pairs = [(p.schedule, p.vpp); MAX_SCHEDULES];
        let mut n_pairs = 1;
        if partial.depth < Depth::Schedule && Knob::Schedule.matters(&ctx) {
            n_pairs = 0;
            let layers = self.exact.model().layers;
            let mut push = |pair| {
                if n_pairs < MAX_SCHEDULES {
                    pairs[n_pairs] = pair;
                }
                n_pairs += 1;
            };
            for &schedule in &s.schedule {
                if Knob::Vpp.matters(&Context { schedule, ..ctx }) {
                    for &v in s.vpp.iter().filter(|&&v| p.pp * v <= layers) {
                        push((schedule, v));
                    }
                } else {
                    push((schedule, 1));
                }
            }
            if n_pairs > MAX_SCHEDULES {
                // More pairs than the array holds: no floor.
                return 0.0;
            }
        }
        let schedules = &pairs[..n_pairs];
        let fixed = [(p.recompute, p.recompute_modules)];
        let recomputes = if partial.depth >= Depth::Recompute {
            &fixed[..]
        } else {
            &s.recompute[..]
        };
        let k = self.leaf_knobs(partial);
        let mut best = f64::INFINITY;
        k.each(&p, &mut |q| {
            let f = match detail {
                Detail::Compute => {
                    // The knobs at a value they can take (the partial plan's may be
                    // placeholders, `Evaluator::step_floor`).
                    let r = Plan {
                        tp_sp_transition: k.tpsp()[0],
                        cp_comm: k.cpc()[0],
                        dispatcher: k.disp()[0],
                        moe_tp_scheme: k.mts()[0],
                        ..*q
                    };
                    self.exact.step_floor_compute(&r, recomputes, schedules)
                }
                Detail::Quick => self
                    .exact
                    .step_floor_quick(q, &k.lists(recomputes, schedules, zeros)),
                Detail::Full => self
                    .exact
                    .step_floor(q, &k.lists(recomputes, schedules, zeros)),
            };
            best = best.min(f);
        });
        if best.is_finite() {
            best
        } else {
            0.0
        }
    }
}

impl Scorer {
    /// The compute-and-bubble bound of `partial`, then `floor` of it where that does not cut
    /// (the search's bounds at a task root, cheapest first).
    fn root_bound(&self, partial: &Partial<'_>, floor: impl Fn(&Partial<'_>) -> f64) -> f64 {
        let t = time_bound(&self.exact, partial).step_time_s;
        if t > partial.threshold {
            return t;
        }
        t.max(floor(partial))
    }

    /// `Evaluator::step_floor_work` of `partial` under every open SP, placement and algorithm
    /// mode (it reads none of `comm_floor`'s other open lists).
    fn work_floor(&self, partial: &Partial<'_>) -> f64 {
        let mut best = f64::INFINITY;
        self.leaf_knobs(partial).each(&partial.plan, &mut |q| {
            best = best.min(self.exact.step_floor_work(q))
        });
        if best.is_finite() {
            best
        } else {
            0.0
        }
    }

    /// The leaf knobs open below `partial`, each as the engine enumerates it
    /// (`Knob::matters`); the overlaps only hide time, so on wherever the space has it on
    /// (`ep_comm` hides the `moe_tp` collectives with the EP overlap too).
    fn leaf_knobs<'a>(&self, partial: &Partial<'a>) -> LeafKnobs<'a> {
        let space = partial.space;
        let dflt = Plan::default();
        let ctx = context(&self.exact, &partial.plan);
        let on = |k: Knob, list: &[bool], default: bool| {
            if k.matters(&ctx) {
                list.contains(&true)
            } else {
                default
            }
        };
        LeafKnobs {
            tpo: on(Knob::TpOverlap, &space.tp_overlap, dflt.tp_overlap),
            epo: on(Knob::EpOverlap, &space.ep_overlap, dflt.ep_overlap),
            space,
            ctx,
            dflt,
            orders: std::cell::OnceCell::new(),
        }
    }
}

/// The open leaf-knob values of a partial plan ([`Scorer::leaf_knobs`]): the space's list
/// where the knob matters, else `Plan::default()`'s value (`open`).
struct LeafKnobs<'a> {
    space: &'a Space,
    ctx: Context,
    dflt: Plan,
    tpo: bool,
    epo: bool,
    /// The canonical rank orders, worked out where a floor reads them (the work and compute
    /// floors read none).
    orders: std::cell::OnceCell<([RankOrder; MAX_ORDERS], usize)>,
}

impl LeafKnobs<'_> {
    /// The canonical rank orders.
    fn orders(&self) -> &[RankOrder] {
        let (orders, n) = self
            .orders
            .get_or_init(|| canonical_orders(self.space, &self.ctx));
        &orders[..*n]
    }

    fn tpsp(&self) -> &[TpSpTransition] {
        let (s, d) = (self.space, &self.dflt);
        open(
            Knob::Transition,
            &self.ctx,
            &s.tp_sp_transition,
            &d.tp_sp_transition,
        )
    }

    fn cpc(&self) -> &[CpComm] {
        open(
            Knob::CpComm,
            &self.ctx,
            &self.space.cp_comm,
            &self.dflt.cp_comm,
        )
    }

    fn mts(&self) -> &[MoeTpScheme] {
        let (s, d) = (self.space, &self.dflt);
        open(
            Knob::MoeTpScheme,
            &self.ctx,
            &s.moe_tp_scheme,
            &d.moe_tp_scheme,
        )
    }

    fn disp(&self) -> &[Dispatcher] {
        open(
            Knob::Dispatcher,
            &self.ctx,
            &self.space.dispatcher,
            &self.dflt.dispatcher,
        )
    }

    /// The floors' open lists: these knobs' and the given recompute, schedule and sharding
    /// lists.
    fn lists<'b>(
        &'b self,
        recomputes: &'b [(Recompute, RecomputeModules)],
        schedules: &'b [(Schedule, u32)],
        zeros: &'b [Zero],
    ) -> OpenLists<'b> {
        OpenLists {
            orders: self.orders(),
            recomputes,
            schedules,
            zeros,
            tp_sp: self.tpsp(),
            cp_comm: self.cpc(),
            dispatchers: self.disp(),
            schemes: self.mts(),
        }
    }

    /// Call `f` with `p` under every open (SP, placement, algorithm mode), the overlaps on
    /// where open (the knobs a floor tries value by value).
    fn each(&self, p: &Plan, f: &mut dyn FnMut(&Plan)) {
        let (s, d) = (self.space, &self.dflt);
        let mut q = *p;
        q.tp_overlap = self.tpo;
        q.ep_overlap = self.epo;
        for &sp in open(Knob::Sp, &self.ctx, &s.sp, &d.sp) {
            for &pl in open(Knob::Placement, &self.ctx, &s.placement, &d.placement) {
                for &algo in &s.algo {
                    q.sp = sp;
                    q.placement = pl;
                    q.algo = algo;
                    f(&q);
                }
            }
        }
    }
}

/// The space's rank orders that differ for the plan of `ctx` (the engine's `orders_for`: orders
/// of one `Context::order_class` give the same groups), in a fixed array (no allocation); a
/// superset would only cost time.
fn canonical_orders(s: &Space, ctx: &Context) -> ([RankOrder; MAX_ORDERS], usize) {
    let key = |o: &RankOrder| ctx.order_class(o);
    let mut out = [RankOrder::default(); MAX_ORDERS];
    let mut keys = [[None; 4]; MAX_ORDERS];
    let mut n = 0;
    for o in &s.order {
        let k = key(o);
        if n == MAX_ORDERS {
            // More orders than the array holds: fall back to none (no floor).
            return (out, 0);
        }
        if !keys[..n].contains(&k) {
            keys[n] = k;
            out[n] = *o;
            n += 1;
        }
    }
    (out, n)
}

/// Which of the evaluator's step floors [`Scorer::comm_floor`] asks for, tightest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detail {
    /// `Evaluator::step_floor`.
    Full,
    /// `Evaluator::step_floor_quick`.
    Quick,
    /// `Evaluator::step_floor_compute`.
    Compute,
}

/// (schedule, vpp) pairs [`Scorer::comm_floor`] opens at most.
const MAX_SCHEDULES: usize = 32;

/// Rank orders [`canonical_orders`] holds (4! = 24: every order of the four dims).
const MAX_ORDERS: usize = 24;

impl Objective for Scorer {
    type Metrics = Metrics;

    fn shape(&self) -> Shape {
        Shape {
            hbm_bytes: self.memory_budget(),
            ..self.exact.shape()
        }
    }

    fn evaluate(&self, plan: &Plan) -> Result<Metrics, Reject> {
        if self
            .framework
            .check_on(
                plan,
                self.exact.model(),
                self.exact.cluster().multi_node_nvlink(),
            )
            .is_err()
        {
            return Err(Reject::Invalid);
        }
        let m = Objective::evaluate(&self.exact, plan)?;
        let budget = self.memory_budget();
        if m.memory_peak_bytes > budget {
            return Err(Reject::OutOfMemory {
                peak_bytes: m.memory_peak_bytes,
                hbm_bytes: budget,
            });
        }
        Ok(m)
    }

    fn admits(&self, recompute: (Recompute, RecomputeModules)) -> bool {
        self.exact.admits(recompute)
    }

    fn step_time(m: &Metrics) -> f64 {
        m.step_time_s
    }

    fn bound(&self, partial: &Partial<'_>) -> Bound {
        let mut b = time_bound(&self.exact, partial);
        if b.step_time_s > partial.threshold {
            // Cut already: spare the floors.
            return b;
        }
        b.memory_bytes = memory_floor(&self.exact, partial, self.memory_budget());
        if b.memory_bytes <= self.memory_budget() {
            b.step_time_s = b.step_time_s.max(self.comm_floor(partial, Detail::Full));
        }
        b
    }

    /// `bound`'s step time without the memory floor: the compute-and-bubble bound, then the
    /// communication floor where that does not cut.
    fn time_bound(&self, partial: &Partial<'_>) -> f64 {
        self.root_bound(partial, |p| self.comm_floor(p, Detail::Full))
    }

    /// The compute-and-bubble bound, then the work floor (`Evaluator::step_floor_work`) where
    /// that does not cut.
    fn order_bound(&self, partial: &Partial<'_>) -> f64 {
        self.root_bound(partial, |p| self.work_floor(p))
    }

    /// The compute-and-bubble bound, then the compute floor (`Evaluator::step_floor_compute`)
    /// where that does not cut.
    fn compute_bound(&self, partial: &Partial<'_>) -> f64 {
        self.root_bound(partial, |p| self.comm_floor(p, Detail::Compute))
    }

    /// The compute-and-bubble bound, then the quick communication floor
    /// (`Evaluator::step_floor_quick`) where that does not cut.
    fn screen_bound(&self, partial: &Partial<'_>) -> f64 {
        self.root_bound(partial, |p| self.comm_floor(p, Detail::Quick))
    }

    fn memory_bound(&self, partial: &Partial<'_>) -> f64 {
        memory_floor(&self.exact, partial, self.memory_budget())
    }

    /// `Evaluator::floor_table` of the root under every open SP, placement and algorithm
    /// mode (the least of each entry), with the leaf knobs open as `comm_floor` opens them:
    /// each entry is the `time_bound` of the node fixing its triple, without the
    /// compute-and-bubble bound (which the floor's compute and pipeline already hold).
    fn floor_table(&self, root: &Partial<'_>, open: &Open<'_>, out: &mut Vec<f64>) -> bool {
        out.clear();
        out.resize(open.len(), f64::INFINITY);
        let k = self.leaf_knobs(root);
        let mut ok = true;
        k.each(&root.plan, &mut |q| {
            let lists = k.lists(open.recomputes, open.schedules, open.zeros);
            ok &= self.exact.floor_table(q, &lists, out);
        });
        ok
    }
}
