//! A closed-loop estimate, cheap enough to call per plan in a search, of how much balanced
//! placement with redundant experts reduces per-GPU expert load imbalance.

/// Expected max/mean per-GPU expert load after balanced placement (EPLB-style) of `experts`
/// experts on an EP group of `ep` GPUs with `redundant_per_gpu` extra expert slots per GPU,
/// for a model whose experts' loads have `load_imbalance` = max/mean over experts.
///
/// Derivation. Only max/mean over experts is known, so a load profile is assumed: a power
/// law `w_k ∝ k^(−s)` over popularity ranks k = 1..E (Zipf-like routing skew, the same
/// family as `--zipf`), with `s ≥ 0` found by bisection so that `w_1 / mean(w)` equals
/// `load_imbalance` (s = 0 is uniform; max/mean grows monotonically to E as s → ∞). Then the
/// EPLB procedure is run on it: the `ep · redundant_per_gpu` redundant slots go one by one to
/// the expert with the largest load per copy, and copies (each carrying load / copies) are
/// packed heaviest first onto the least-loaded GPU that has a free slot (`⌈E/P⌉ + R` slots)
/// and no copy of that expert yet. The result is that packing's max/mean GPU load.
///
/// Cost: O(ep·R·E + copies·ep), microseconds for E=256, P=64. Values below 1 (or NaN) of
/// `load_imbalance` are read as 1; `load_imbalance` above E is capped at E (one expert takes
/// everything). Degenerate sizes (0 experts or GPUs) return 1.
///
/// ```
/// use autoplan_evaluate::balanced_imbalance;
/// // Uniform loads that divide evenly stay perfectly balanced.
/// assert!((balanced_imbalance(64, 8, 0, 1.0) - 1.0).abs() < 1e-12);
/// // A skewed model: replicas reduce the imbalance.
/// let none = balanced_imbalance(256, 64, 0, 3.0);
/// let one = balanced_imbalance(256, 64, 1, 3.0);
/// assert!(one < none && one >= 1.0);
/// ```
pub fn balanced_imbalance(
    experts: usize,
    ep: usize,
    redundant_per_gpu: usize,
    load_imbalance: f64,
) -> f64 {
    if experts == 0 || ep <= 1 {
        return 1.0;
    }
    let w = power_profile(experts, load_imbalance);
    pack_max_over_mean(&w, ep, redundant_per_gpu)
}

/// Max/mean per-GPU expert load of the default contiguous placement (no replicas), for the
/// same inputs as [`balanced_imbalance`]: the GPU holding the hottest expert (load
/// `load_imbalance` × mean) together with `k − 1` experts of average load, where `k = E/P` is
/// the number of experts per GPU: `(load_imbalance + k − 1) / k`. For k = 1 it is the expert
/// imbalance itself; for one EP rank (`ep ≤ 1`) it is 1. Never below [`balanced_imbalance`] with no redundancy (a balanced packing
/// of the same experts), as the unit test checks.
///
/// ```
/// use autoplan_evaluate::contiguous_imbalance;
/// assert_eq!(contiguous_imbalance(256, 64, 3.0), 1.5); // (3 + 4 − 1) / 4
/// ```
pub fn contiguous_imbalance(experts: usize, ep: usize, load_imbalance: f64) -> f64 {
    // One EP rank holds every expert: its load is the mean (found by the search oracle,
    // `crates/search/tests/oracle.rs`; the formula below assumes other GPUs to compare with).
    if experts == 0 || ep <= 1 {
        return 1.0;
    }
    let m = if load_imbalance.is_nan() {
        1.0
    } else {
        load_imbalance.clamp(1.0, experts as f64)
    };
    let k = (experts as f64 / ep as f64).max(1.0);
    (m + k - 1.0) / k
}

/// Loads `k^(−s)` (k = 1..=n) scaled to mean 1, with `s` such that max/mean = `target`.
pub(crate) fn power_profile(n: usize, target: f64) -> Vec<f64> {
    let target = if target.is_nan() {
        1.0
    } else {
        target.clamp(1.0, n as f64)
    };
    let ratio = |s: f64| {
        let sum: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
        n as f64 / sum
    };
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while ratio(hi) < target && hi < 64.0 {
        hi *= 2.0;
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if ratio(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let s = 0.5 * (lo + hi);
    let raw: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-s)).collect();
    let mean = raw.iter().sum::<f64>() / n as f64;
    raw.into_iter().map(|x| x / mean).collect()
}

/// EPLB-style replication + packing of expert loads `w` on `ep` GPUs; max/mean GPU load.
pub(crate) fn pack_max_over_mean(w: &[f64], ep: usize, redundant_per_gpu: usize) -> f64 {
    pack(w, ep, redundant_per_gpu).max_over_mean
}

/// Where a balanced placement puts the copies of the experts that have more than one: the
/// gradients of such an expert are summed over its copies every step (seed 004 §5.3.2,
/// Table 5-4's `Bwd_Allreduce` grows with the replicas), so the evaluator prices an
/// all-reduce over exactly these EP ranks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplicaLayout {
    /// For each replicated expert (two or more copies), the EP ranks holding it, ascending.
    pub sets: Vec<Vec<u32>>,
    /// For each EP rank, the indices into `sets` of the replicated experts it holds.
    pub per_gpu: Vec<Vec<u32>>,
}

/// A balanced packing: its max/mean GPU load and where the replicated experts went.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Packing {
    pub max_over_mean: f64,
    pub layout: ReplicaLayout,
}

/// [`balanced_imbalance`]'s packing with the replica layout kept (same inputs, same rules).
pub fn balanced_packing(
    experts: usize,
    ep: usize,
    redundant_per_gpu: usize,
    load_imbalance: f64,
) -> Packing {
    if experts == 0 || ep <= 1 {
        return Packing {
            max_over_mean: 1.0,
            layout: ReplicaLayout::default(),
        };
    }
    let w = power_profile(experts, load_imbalance);
    pack(&w, ep, redundant_per_gpu)
}

/// The EPLB packing of [`balanced_imbalance`]'s docs, keeping where each copy went.
pub(crate) fn pack(w: &[f64], ep: usize, redundant_per_gpu: usize) -> Packing {
    let n = w.len();
    let slots = n.div_ceil(ep) + redundant_per_gpu;
    let mut count = vec![1usize; n];
    for _ in 0..ep * redundant_per_gpu {
        let best = (0..n).filter(|&e| count[e] < ep).max_by(|&a, &b| {
            (w[a] / count[a] as f64)
                .total_cmp(&(w[b] / count[b] as f64))
                .then(b.cmp(&a))
        });
        match best {
            Some(e) => count[e] += 1,
            None => break,
        }
    }
    let mut items: Vec<(usize, f64)> = Vec::new();
    for e in 0..n {
        for _ in 0..count[e] {
            items.push((e, w[e] / count[e] as f64));
        }
    }
    items.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut load = vec![0.0f64; ep];
    let mut hosted: Vec<Vec<usize>> = vec![Vec::new(); ep];
    for (e, x) in items {
        let pick = (0..ep)
            .filter(|&g| hosted[g].len() < slots && !hosted[g].contains(&e))
            .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)));
        if let Some(g) = pick {
            hosted[g].push(e);
            load[g] += x;
        }
    }
    let total: f64 = load.iter().sum();
    let max = load.iter().fold(0.0f64, |m, &x| m.max(x));
    let max_over_mean = if total > 0.0 {
        max / (total / ep as f64)
    } else {
        1.0
    };
    // The replica sets: every expert with two or more copies, the ranks holding it.
    let mut holders: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (g, h) in hosted.iter().enumerate() {
        for &e in h {
            holders[e].push(g as u32);
        }
    }
    let mut layout = ReplicaLayout {
        sets: Vec::new(),
        per_gpu: vec![Vec::new(); ep],
    };
    for set in holders.into_iter().filter(|s| s.len() >= 2) {
        let k = layout.sets.len() as u32;
        for &g in &set {
            layout.per_gpu[g as usize].push(k);
        }
        layout.sets.push(set);
    }
    Packing {
        max_over_mean,
        layout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_hits_target() {
        for &m in &[1.0, 1.5, 3.0, 10.0] {
            let w = power_profile(256, m);
            let max = w.iter().fold(0.0f64, |a, &x| a.max(x));
            assert!((max - m).abs() < 1e-6 * m, "target {m}, got {max}");
        }
    }

    #[test]
    fn hand_computed_two_gpus() {
        // Loads 3,1 (mean 2) on 2 GPUs, no replicas: GPU loads 3 and 1, max/mean = 3/2.
        // With one redundant slot per GPU both experts get a copy on each GPU (the hot one
        // first, then the cold one, since a third copy of the hot one would share a GPU):
        // 1.5+0.5 on each GPU, max/mean = 1.
        assert!((pack_max_over_mean(&[3.0, 1.0], 2, 0) - 1.5).abs() < 1e-12);
        assert!((pack_max_over_mean(&[3.0, 1.0], 2, 1) - 1.0).abs() < 1e-12);
        // Loads 5,1,1,1 on 2 GPUs, 2 slots each, no replicas: 5+1 | 1+1 -> 6/4.
        assert!((pack_max_over_mean(&[5.0, 1.0, 1.0, 1.0], 2, 0) - 1.5).abs() < 1e-12);
    }

    #[test]
    fn one_ep_rank_is_balanced_whatever_the_expert_skew() {
        for m in [1.0, 1.5, 3.0, 40.0] {
            assert_eq!(contiguous_imbalance(64, 1, m), 1.0);
            assert_eq!(balanced_imbalance(64, 1, 2, m), 1.0);
        }
        assert!(contiguous_imbalance(64, 2, 3.0) > 1.0);
    }

    #[test]
    fn balanced_never_worse_than_contiguous() {
        for &(e, p) in &[(256, 64), (64, 8), (8, 8), (160, 32)] {
            for &m in &[1.0, 1.3, 2.0, 5.0] {
                let c = contiguous_imbalance(e, p, m);
                let b = balanced_imbalance(e, p, 0, m);
                assert!(
                    b <= c + 1e-9,
                    "E={e} P={p} m={m}: balanced {b} > contiguous {c}"
                );
            }
        }
    }

    #[test]
    fn replica_layout_lists_every_copy_of_a_replicated_expert() {
        // Loads 3,1 on 2 GPUs with one redundant slot each: both experts on both GPUs.
        let p = pack(&[3.0, 1.0], 2, 1);
        assert_eq!(p.layout.sets, vec![vec![0, 1], vec![0, 1]]);
        assert_eq!(p.layout.per_gpu, vec![vec![0, 1], vec![0, 1]]);
        // No redundant slots: nothing replicated.
        let p = pack(&[5.0, 1.0, 1.0, 1.0], 2, 0);
        assert!(p.layout.sets.is_empty());
        // 64 experts on 8 GPUs, 2 replicas each: 16 extra copies, every set on distinct GPUs.
        let p = balanced_packing(64, 8, 2, 3.0);
        let copies: usize = p.layout.sets.iter().map(|s| s.len() - 1).sum();
        assert_eq!(copies, 16);
        for s in &p.layout.sets {
            assert!(s.windows(2).all(|w| w[0] < w[1]), "{s:?}");
        }
        assert_eq!(p.max_over_mean, balanced_imbalance(64, 8, 2, 3.0));
    }

    #[test]
    fn more_redundancy_never_hurts_much_and_is_bounded() {
        let mut prev = f64::INFINITY;
        for r in 0..4 {
            let x = balanced_imbalance(256, 64, r, 4.0);
            assert!(x >= 1.0 - 1e-12);
            assert!(x <= prev + 1e-9, "r={r}: {x} > {prev}");
            prev = x;
        }
    }
}
