//! The rank layout (`GroupPlacement::of`) against the examples and a brute-force
//! enumeration of every rank of the grid.

use autoplan_cluster::GroupPlacement;
use proptest::prelude::*;

/// Issue 2 item 6: TP = 8 innermost on 8-GPU nodes is intra-node.
#[test]
fn tp8_innermost_is_intra_node() {
    let tp = GroupPlacement::of(8, &[8, 1, 16, 4], &[true, false, false, false]);
    assert_eq!((tp.size, tp.ranks_per_node, tp.nodes), (8, 8, 1));
    assert!(tp.intra_node());
}

/// Issue 2 item 6: a DP group spans nodes (TP fills the node, DP strides over nodes).
#[test]
fn dp_group_spans_nodes() {
    let dp = GroupPlacement::of(8, &[8, 1, 16, 4], &[false, false, true, false]);
    assert_eq!((dp.size, dp.ranks_per_node, dp.nodes), (16, 1, 16));
    assert!(!dp.intra_node());
}

/// Issue 2 item 6: TP = 16 spans two nodes with 8 ranks on each.
#[test]
fn tp16_spans_two_nodes() {
    let tp = GroupPlacement::of(8, &[16, 1, 8, 1], &[true, false, false, false]);
    assert_eq!((tp.size, tp.ranks_per_node, tp.nodes), (16, 8, 2));
}

/// The same TP = 8 group is inter-node when it is not innermost: with DP = 8 innermost, the
/// 8 TP members are 8 nodes apart.
#[test]
fn tp8_outside_dp8_is_inter_node() {
    let tp = GroupPlacement::of(8, &[8, 8], &[false, true]);
    assert_eq!((tp.size, tp.ranks_per_node, tp.nodes), (8, 1, 8));
}

/// An EP group over TP × DP (TP = 2, DP = 8) on 8-GPU nodes: 4 DP values share a node with
/// each TP pair, so 8 per node over 2 nodes.
#[test]
fn ep_over_two_inner_dims() {
    let ep = GroupPlacement::of(8, &[2, 8, 4], &[true, true, false]);
    assert_eq!((ep.size, ep.ranks_per_node, ep.nodes), (16, 8, 2));
}

/// Misaligned: TP = 3 on 8-GPU nodes. Group {6, 7, 8} straddles nodes 0 and 1, so the worst
/// case (2 nodes) is reported.
#[test]
fn misaligned_reports_worst_case() {
    assert!(!GroupPlacement::aligned(8, &[3, 8]));
    let tp = GroupPlacement::of(8, &[3, 8], &[true, false]);
    assert_eq!((tp.size, tp.ranks_per_node, tp.nodes), (3, 2, 2));
}

/// Non-power-of-two but aligned: 16-GPU DGX-2 nodes, TP = 4 and CP = 4 fill a node.
#[test]
fn dgx2_aligned() {
    assert!(GroupPlacement::aligned(16, &[4, 4, 6]));
    let dp = GroupPlacement::of(16, &[4, 4, 6], &[false, false, true]);
    assert_eq!((dp.size, dp.ranks_per_node, dp.nodes), (6, 1, 6));
    // 6 GPUs per node with TP = 2, DP = 3 inside it: aligned although not a power of two.
    assert!(GroupPlacement::aligned(6, &[2, 3, 4]));
    assert!(!GroupPlacement::aligned(6, &[4, 3]));
}

/// For every group of the grid: (members, nodes touched, members on each touched node).
fn brute_force(g: u32, degrees: &[u32], in_group: &[bool]) -> Vec<(u32, Vec<u32>)> {
    let world: u32 = degrees.iter().product();
    let mut groups: std::collections::BTreeMap<Vec<u32>, std::collections::BTreeMap<u32, u32>> =
        Default::default();
    for r in 0..world {
        // Digits of r, innermost first; the key is the digits of the non-member dims.
        let mut rest = r;
        let mut key = Vec::new();
        for (i, &d) in degrees.iter().enumerate() {
            let c = rest % d;
            rest /= d;
            if !in_group[i] {
                key.push(c);
            }
        }
        *groups.entry(key).or_default().entry(r / g).or_default() += 1;
    }
    groups
        .into_values()
        .map(|nodes| (nodes.values().sum(), nodes.into_values().collect()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Aligned grids: every group has exactly the reported shape. Misaligned grids: the
    /// reported node count bounds every group's from above and covers the group.
    #[test]
    fn agrees_with_enumeration(
        g in 1u32..=16,
        dims in proptest::collection::vec((1u32..=8, any::<bool>()), 1..=4),
    ) {
        let degrees: Vec<u32> = dims.iter().map(|d| d.0).collect();
        let in_group: Vec<bool> = dims.iter().map(|d| d.1).collect();
        let p = GroupPlacement::of(g, &degrees, &in_group);
        let groups = brute_force(g, &degrees, &in_group);
        for (size, per_node) in &groups {
            prop_assert_eq!(p.size, *size);
            if GroupPlacement::aligned(g, &degrees) {
                prop_assert_eq!(p.nodes as usize, per_node.len());
                prop_assert!(per_node.iter().all(|&n| n == p.ranks_per_node));
            } else {
                prop_assert!(p.nodes as usize >= per_node.len());
                prop_assert!(p.nodes * p.ranks_per_node >= p.size);
                prop_assert!(p.ranks_per_node <= g);
            }
        }
    }

    /// Powers of two (node size and every degree) are always aligned.
    #[test]
    fn powers_of_two_are_aligned(
        k in 0u32..=4,
        exps in proptest::collection::vec(0u32..=4, 1..=4),
    ) {
        let degrees: Vec<u32> = exps.iter().map(|e| 1 << e).collect();
        prop_assert!(GroupPlacement::aligned(1 << k, &degrees));
    }
}
