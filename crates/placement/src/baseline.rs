//! The two placements every result is compared with: the default contiguous one and a port
//! of DeepSeek's EPLB.

use crate::eval::Placement;
use crate::instance::Instance;

/// The default EP placement: expert `e` on GPU `e / (E/P)`, no replicas (redundant slots stay
/// empty). When P does not divide E the first `E mod P` GPUs get one expert more.
pub fn contiguous(inst: &Instance) -> Placement {
    let (p, e_n) = (inst.gpus(), inst.experts());
    let base = e_n / p;
    let rem = e_n % p;
    let mut gpus = Vec::with_capacity(p);
    let mut next = 0;
    for g in 0..p {
        let n = base + usize::from(g < rem);
        gpus.push((next..next + n).collect());
        next += n;
    }
    Placement { gpus }
}

/// DeepSeek EPLB's policy (deepseek-ai/EPLB `eplb.py`, `rebalance_experts_hierarchical`),
/// with every one of the P·L slots used (`num_replicas = P·L`) and each expert its own group:
///
/// 1. pack experts onto nodes, `E / nodes` per node, heaviest first onto the lightest node
///    (`balanced_packing`);
/// 2. inside each node, give the node's `G·L` slots to its experts, each extra replica to the
///    expert with the largest load per replica (`replicate_experts`);
/// 3. pack the node's replicas onto its GPUs, `L` per GPU, heaviest (load / replicas) first
///    onto the lightest GPU (`balanced_packing`).
///
/// When the node count does not divide E (or the GPUs), EPLB falls back to its global policy,
/// which is the same procedure with one node. Two departures, both needed by this crate's
/// placement model: a GPU never receives two copies of one expert (EPLB's packing does not
/// check; we take the lightest GPU that does not hold it yet), so an expert gets at most as
/// many replicas as its node has GPUs.
pub fn eplb(inst: &Instance) -> Placement {
    let (p, e_n, l) = (inst.gpus(), inst.experts(), inst.slots());
    let loads: Vec<f64> = (0..e_n).map(|e| inst.expert_load(e)).collect();
    let t = inst.topology();
    let nodes = t.nodes();
    let hierarchical = nodes > 1
        && e_n % nodes == 0
        && p % nodes == 0
        && (p / nodes) * l >= e_n / nodes
        && (0..p).all(|g| t.node_of(g) == g / (p / nodes));
    let (n_packs, per_node_gpus) = if hierarchical {
        (nodes, p / nodes)
    } else {
        (1, p)
    };
    // Step 1: experts onto nodes.
    let all: Vec<usize> = (0..e_n).collect();
    let node_experts = balanced_packing(&all, &loads, n_packs, e_n / n_packs, |_, _| true);
    let mut gpus = vec![Vec::new(); p];
    for (n, experts) in node_experts.iter().enumerate() {
        let slots = per_node_gpus * l;
        // Step 2: replicas within the node.
        let mut count = vec![1usize; experts.len()];
        for _ in experts.len()..slots {
            let best = (0..experts.len())
                .filter(|&k| count[k] < per_node_gpus)
                .max_by(|&a, &b| {
                    let la = loads[experts[a]] / count[a] as f64;
                    let lb = loads[experts[b]] / count[b] as f64;
                    la.total_cmp(&lb).then(b.cmp(&a))
                });
            match best {
                Some(k) => count[k] += 1,
                None => break,
            }
        }
        // Step 3: replicas onto the node's GPUs.
        let mut phys = Vec::new();
        let mut w = Vec::new();
        for (k, &e) in experts.iter().enumerate() {
            for _ in 0..count[k] {
                phys.push(e);
                w.push(loads[e] / count[k] as f64);
            }
        }
        let idx: Vec<usize> = (0..phys.len()).collect();
        let packs = balanced_packing(&idx, &w, per_node_gpus, l, |pack: &[usize], item| {
            !pack.iter().any(|&q| phys[q] == phys[item])
        });
        for (k, pack) in packs.into_iter().enumerate() {
            gpus[n * per_node_gpus + k] = pack.into_iter().map(|q| phys[q]).collect();
        }
    }
    let mut pl = Placement { gpus };
    pl.normalise();
    pl
}

/// EPLB's `balanced_packing`: items in decreasing weight, each onto the lightest pack that has
/// room (`cap` items) and accepts it. Ties break on the lower index, so the result is
/// deterministic.
fn balanced_packing(
    items: &[usize],
    weight: &[f64],
    n_packs: usize,
    cap: usize,
    accepts: impl Fn(&[usize], usize) -> bool,
) -> Vec<Vec<usize>> {
    let mut order = items.to_vec();
    order.sort_by(|&a, &b| weight[b].total_cmp(&weight[a]).then(a.cmp(&b)));
    let mut packs: Vec<Vec<usize>> = vec![Vec::new(); n_packs];
    let mut pw = vec![0.0f64; n_packs];
    let cap = cap.max(items.len().div_ceil(n_packs.max(1)));
    for it in order {
        let pick = (0..n_packs)
            .filter(|&k| packs[k].len() < cap && accepts(&packs[k], it))
            .min_by(|&a, &b| pw[a].total_cmp(&pw[b]).then(a.cmp(&b)))
            .or_else(|| (0..n_packs).find(|&k| packs[k].len() < cap));
        if let Some(k) = pick {
            packs[k].push(it);
            pw[k] += weight[it];
        }
    }
    packs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::{InstanceOptions, Topology};
    use crate::loads::Loads;

    fn inst(nodes: usize, per_node: usize, totals: Vec<f64>, slots: usize) -> Instance {
        let p = nodes * per_node;
        let e = totals.len();
        let topo = Topology::two_level(nodes, per_node, (0.0, 0.0), (0.0, 1.0)).unwrap();
        let demand = Loads::Totals(totals).demand(p, e, "t").unwrap();
        Instance::new(topo, e, slots, demand, InstanceOptions::default()).unwrap()
    }

    #[test]
    fn contiguous_splits_remainder_onto_first_gpus() {
        let i = inst(1, 2, vec![1.0; 5], 3);
        assert_eq!(contiguous(&i).gpus, vec![vec![0, 1, 2], vec![3, 4]]);
    }

    #[test]
    fn eplb_hierarchical_by_hand() {
        // Loads 8 4 2 2 on 2 nodes × 2 GPUs, 2 slots per GPU.
        // Step 1 (2 experts per node, heaviest first onto the lightest node):
        //   8 -> node 0, 4 -> node 1, 2 -> node 1 (4 < 8), 2 -> node 0 (node 1 full).
        // Step 2 (4 slots per node): node 0 replicates expert 0 (8 > 2), then expert 0 is at
        //   its cap of 2 copies (2 GPUs) so expert 3 gets the last; node 1 likewise 1 then 2.
        // Step 3: copies 4,4,1,1 onto the node's 2 GPUs, one copy of an expert per GPU.
        let i = inst(2, 2, vec![8.0, 4.0, 2.0, 2.0], 2);
        let pl = eplb(&i);
        pl.validate(&i).unwrap();
        assert_eq!(
            pl.gpus,
            vec![vec![0, 3], vec![0, 3], vec![1, 2], vec![1, 2]]
        );
    }

    #[test]
    fn eplb_global_when_nodes_do_not_divide_experts() {
        // 3 experts on 2 nodes: EPLB's global policy (one pack of all GPUs).
        let i = inst(2, 1, vec![6.0, 3.0, 1.0], 2);
        let pl = eplb(&i);
        pl.validate(&i).unwrap();
        // One spare slot goes to expert 0 (6 > 3): copies 3,3,3,1 over 2 GPUs of 2 slots.
        assert_eq!(pl.gpus, vec![vec![0, 1], vec![0, 2]]);
    }
}
