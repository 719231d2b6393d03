//! The fast solver: a topology-aware greedy start, then a seeded local search over swaps and
//! re-replications, then (when small enough) the optimal routing of the final placement.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::baseline;
use crate::eval::{evaluate, evaluate_nearest, Placement, Routing, Traffic};
use crate::instance::Instance;

/// Knobs of [`heuristic`]. The defaults are what the CLI uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeuristicOptions {
    /// Seed of the local search's move choices (the result is a pure function of it).
    pub seed: u64,
    /// Most objective evaluations; `None` = 20 000 (E=256, P=64: ~0.2 s).
    pub max_evals: Option<usize>,
    /// Restart from the best placement found (with a random kick) after this many
    /// evaluations in a row without improvement; `None` = max(300, 16·P).
    pub patience: Option<usize>,
    /// Solve the routing LP for the final placement when it has at most this many flow
    /// variables (P·P·E); 0 disables it.
    pub polish_max_vars: usize,
}

impl Default for HeuristicOptions {
    fn default() -> Self {
        HeuristicOptions {
            seed: 0,
            max_evals: None,
            patience: None,
            polish_max_vars: 4096,
        }
    }
}

/// Statistics of one [`heuristic`] run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SearchStats {
    /// Objective evaluations made by the local search.
    pub evaluations: usize,
    /// Moves accepted.
    pub improvements: usize,
    /// Whether the optimal-routing LP replaced the nearest-replica routing.
    pub routing_polished: bool,
}

/// Topology-aware greedy placement. Every slot is used:
///
/// 1. replica counts: each of the `P·L − E` spare slots goes to the expert with the largest
///    load per replica (EPLB's `replicate_experts` rule), at most one copy per GPU;
/// 2. replicas, heaviest load-per-replica first, each go to the GPU that has a free slot, does
///    not hold the expert, sits on the node with the fewest copies of it (so copies spread
///    over nodes and more sources find one on their own node, seed 004 §4.1.3), and has the
///    least load so far; ties on the lower index.
pub fn greedy(inst: &Instance) -> Placement {
    let (p, e_n, l) = (inst.gpus(), inst.experts(), inst.slots());
    let t = inst.topology();
    let loads: Vec<f64> = (0..e_n).map(|e| inst.expert_load(e)).collect();
    let mut count = vec![1usize; e_n];
    for _ in e_n..p * l {
        let best = (0..e_n).filter(|&e| count[e] < p).max_by(|&a, &b| {
            (loads[a] / count[a] as f64)
                .total_cmp(&(loads[b] / count[b] as f64))
                .then(b.cmp(&a))
        });
        match best {
            Some(e) => count[e] += 1,
            None => break,
        }
    }
    let mut items: Vec<(usize, f64)> = Vec::new();
    for e in 0..e_n {
        for _ in 0..count[e] {
            items.push((e, loads[e] / count[e] as f64));
        }
    }
    items.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut gpus: Vec<Vec<usize>> = vec![Vec::new(); p];
    let mut gload = vec![0.0f64; p];
    let mut on_node = vec![0usize; t.nodes()];
    let mut last_e = usize::MAX;
    for (e, w) in items {
        if e != last_e {
            on_node.iter_mut().for_each(|x| *x = 0);
            last_e = e;
        }
        let pick = (0..p)
            .filter(|&g| gpus[g].len() < l && !gpus[g].contains(&e))
            .min_by(|&a, &b| {
                on_node[t.node_of(a)]
                    .cmp(&on_node[t.node_of(b)])
                    .then(gload[a].total_cmp(&gload[b]))
                    .then(a.cmp(&b))
            });
        if let Some(g) = pick {
            gpus[g].push(e);
            gload[g] += w;
            on_node[t.node_of(g)] += 1;
        }
    }
    let mut pl = Placement { gpus };
    pl.normalise();
    pl
}

/// The heuristic's answer.
#[derive(Debug, Clone)]
pub struct HeuristicResult {
    pub placement: Placement,
    pub routing: Routing,
    pub stats: SearchStats,
}

/// Greedy + local search (+ routing LP when small). Starts from the best of [`greedy`],
/// [`baseline::eplb`] and [`baseline::contiguous`], so it is never worse than either baseline
/// under the same routing rule.
///
/// Moves, on a GPU that is the current bottleneck half of the time and a random one otherwise:
/// swap one of its experts with another GPU's; move an expert to a free slot; replace a
/// replicated expert's copy by another expert (changing replica counts); fill a free slot.
/// A move is kept only if it lowers the objective (first improvement); after `patience`
/// fruitless tries the search restarts from the best placement kicked by 2-4 random moves
/// (iterated local search). Each move re-routes only the experts it touches and updates the
/// per-rank send/receive times incrementally, O(P · copies).
pub fn heuristic(inst: &Instance, opts: &HeuristicOptions) -> HeuristicResult {
    let starts = [
        greedy(inst),
        baseline::eplb(inst),
        baseline::contiguous(inst),
    ];
    let mut best: Option<(f64, Placement)> = None;
    for s in starts {
        let o = evaluate_nearest(inst, &s).objective_s;
        match &best {
            Some((b, _)) if *b <= o => {}
            _ => best = Some((o, s)),
        }
    }
    let (_, start) = best.expect("three starts");
    let (placement, evaluations, improvements) = local_search(inst, start, opts);
    let mut routing = Routing::nearest(inst, &placement);
    let mut polished = false;
    let vars = inst.gpus() * inst.gpus() * inst.experts();
    if opts.polish_max_vars > 0 && vars <= opts.polish_max_vars {
        if let Ok(r) = crate::formulation::optimal_routing_bounded(inst, &placement) {
            let before = evaluate(inst, &placement, &routing).objective_s;
            if evaluate(inst, &placement, &r).objective_s < before {
                routing = r;
                polished = true;
            }
        }
    }
    HeuristicResult {
        placement,
        routing,
        stats: SearchStats {
            evaluations,
            improvements,
            routing_polished: polished,
        },
    }
}

struct State<'a> {
    inst: &'a Instance,
    hosts: Vec<Vec<usize>>,
    reps: Vec<Vec<usize>>,
    tr: Traffic,
}

impl<'a> State<'a> {
    fn new(inst: &'a Instance, hosts: Vec<Vec<usize>>) -> State<'a> {
        let reps = Placement {
            gpus: hosts.clone(),
        }
        .replicas_of(inst.experts());
        let mut st = State {
            inst,
            hosts,
            reps,
            tr: Traffic::new(inst.gpus()),
        };
        for e in 0..inst.experts() {
            st.attach(e);
        }
        st.tr.times(inst);
        st
    }

    /// Apply `edits` (in order), updating the traffic of the experts they touch.
    fn apply(&mut self, edits: &[Edit]) {
        self.rewire(
            edits,
            |st, &(g, e, add)| {
                if add {
                    st.add_copy(g, e)
                } else {
                    st.remove_copy(g, e)
                }
            },
            false,
        );
    }

    /// Undo [`State::apply`] of the same `edits`.
    fn revert(&mut self, edits: &[Edit]) {
        self.rewire(
            edits,
            |st, &(g, e, add)| {
                if add {
                    st.remove_copy(g, e)
                } else {
                    st.add_copy(g, e)
                }
            },
            true,
        );
    }

    fn rewire(&mut self, edits: &[Edit], f: impl Fn(&mut Self, &Edit), reverse: bool) {
        let mut touched: [usize; 4] = [usize::MAX; 4];
        let mut n = 0;
        for &(_, e, _) in edits {
            if !touched[..n].contains(&e) {
                touched[n] = e;
                n += 1;
            }
        }
        for &e in &touched[..n] {
            self.detach(e);
        }
        if reverse {
            edits.iter().rev().for_each(|x| f(self, x));
        } else {
            edits.iter().for_each(|x| f(self, x));
        }
        for &e in &touched[..n] {
            self.attach(e);
        }
    }

    fn objective(&self) -> f64 {
        self.tr
            .fast_times(self.inst)
            .objective(self.inst.objective())
            + crate::eval::replica_sync_s(self.inst, &self.reps)
    }

    fn detach(&mut self, e: usize) {
        let r = std::mem::take(&mut self.reps[e]);
        self.tr.nearest_expert(self.inst, e, &r, -1);
        self.reps[e] = r;
    }

    fn attach(&mut self, e: usize) {
        let r = std::mem::take(&mut self.reps[e]);
        self.tr.nearest_expert(self.inst, e, &r, 1);
        self.reps[e] = r;
    }

    fn remove_copy(&mut self, g: usize, e: usize) {
        self.hosts[g].retain(|&x| x != e);
        self.reps[e].retain(|&x| x != g);
    }

    fn add_copy(&mut self, g: usize, e: usize) {
        self.hosts[g].push(e);
        let pos = self.reps[e].partition_point(|&x| x < g);
        self.reps[e].insert(pos, g);
    }
}

/// One elementary change: `(gpu, expert, add?)`. A move is up to four of them.
type Edit = (usize, usize, bool);

fn local_search(
    inst: &Instance,
    start: Placement,
    opts: &HeuristicOptions,
) -> (Placement, usize, usize) {
    let (p, e_n, l) = (inst.gpus(), inst.experts(), inst.slots());
    let mut st = State::new(inst, start.gpus);
    let mut cur = st.objective();
    let mut best = (cur, st.hosts.clone());
    // Each evaluation re-routes the one or two experts a move touches: O(P · copies).
    let max_evals = opts.max_evals.unwrap_or(20_000);
    let patience = opts.patience.unwrap_or((16 * p).max(300));
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let (mut evals, mut accepted, mut since) = (0usize, 0usize, 0usize);
    let mut edits: Vec<Edit> = Vec::with_capacity(4);
    while evals < max_evals && p > 1 {
        if since >= patience {
            // Iterated local search: restart from the best placement, kicked by 2-4 random
            // moves taken whatever they cost (escapes optima that need two moves at once).
            st = State::new(inst, best.1.clone());
            for _ in 0..rng.gen_range(2..=4) {
                let a = rng.gen_range(0..p);
                edits.clear();
                propose(&st, a, l, e_n, p, &mut rng, &mut edits);
                st.apply(&edits);
            }
            cur = st.objective();
            since = 0;
        }
        let a = if rng.gen_bool(0.5) {
            st.tr.critical_rank(inst)
        } else {
            rng.gen_range(0..p)
        };
        edits.clear();
        propose(&st, a, l, e_n, p, &mut rng, &mut edits);
        evals += 1;
        if edits.is_empty() {
            since += 1;
            continue;
        }
        st.apply(&edits);
        let o = st.objective();
        if o < cur * (1.0 - 1e-12) {
            cur = o;
            accepted += 1;
            since = 0;
            if o < best.0 * (1.0 - 1e-12) {
                best = (o, st.hosts.clone());
            }
        } else {
            since += 1;
            st.revert(&edits);
        }
    }
    let mut pl = Placement { gpus: best.1 };
    pl.normalise();
    (pl, evals, accepted)
}

/// A random valid move around GPU `a`, as edits (empty if the draw found none).
fn propose(
    st: &State,
    a: usize,
    l: usize,
    e_n: usize,
    p: usize,
    rng: &mut ChaCha8Rng,
    edits: &mut Vec<Edit>,
) {
    let ha = &st.hosts[a];
    let kind = rng.gen_range(0..4);
    // Fill a free slot on `a` with an expert it does not hold.
    if ha.len() < l && (kind == 0 || ha.is_empty()) {
        let y = rng.gen_range(0..e_n);
        if !ha.contains(&y) {
            edits.push((a, y, true));
        }
        return;
    }
    if ha.is_empty() {
        return;
    }
    let x = ha[rng.gen_range(0..ha.len())];
    let b = (a + rng.gen_range(1..p)) % p;
    let hb = &st.hosts[b];
    match kind {
        // Swap x (on a) with y (on b).
        0 | 1 => {
            if hb.is_empty() || hb.contains(&x) {
                return;
            }
            let y = hb[rng.gen_range(0..hb.len())];
            if ha.contains(&y) {
                return;
            }
            edits.extend([(a, x, false), (b, y, false), (a, y, true), (b, x, true)]);
        }
        // Move x from a to a free slot on b.
        2 => {
            if hb.len() < l && !hb.contains(&x) {
                edits.extend([(a, x, false), (b, x, true)]);
            } else if st.reps[x].len() > 1 {
                // Or drop a redundant copy of x.
                edits.push((a, x, false));
            }
        }
        // Replace a redundant copy of x by a copy of y.
        _ => {
            if st.reps[x].len() < 2 {
                return;
            }
            let y = rng.gen_range(0..e_n);
            if y != x && !ha.contains(&y) {
                edits.extend([(a, x, false), (a, y, true)]);
            }
        }
    }
}
