//! An independent oracle for the branch-and-bound: a deliberately plain enumerator that shares
//! no code with the engine's tree walk, decision order, relevance/collapse rules or bounds.
//!
//! The oracle is nested loops over every value list of a [`Space`] — every degree, micro-batch
//! size, recompute entry, ZeRO stage, schedule (with each `vpp` of the space when interleaved),
//! and every knob — building each [`Plan`] that uses all GPUs and scoring it with
//! `Evaluator::evaluate` itself. It knows nothing of which knobs matter for a plan: where the
//! engine collapses a knob that cannot matter (it keeps one value), the oracle scores every
//! value and so sees duplicates with the same numbers. Invalid plans are left for the
//! evaluator to reject, as the engine's objective does.
//!
//! The comparison (`check`) is exact and can fail:
//! - every engine plan re-evaluates (`Evaluator::evaluate`, not the engine's objective) to the
//!   very metrics it reports, so it is a feasible plan with that step time; no plan is listed
//!   twice; the ranking is sorted by step time;
//! - the *distinct* step times of the engine's ranking are exactly the oracle's distinct step
//!   times up to the engine's last one, `t_K`. Distinct values, not plans, because the oracle's
//!   duplicates (a collapsed knob scored at every value) have bit-identical step times while
//!   two genuinely different plans may also tie (e.g. two rank orders that put every group on
//!   the same links): merging oracle plans by their numbers alone would wrongly merge those,
//!   which the engine lists both. Ties are why only values are compared at `t_K` itself: the
//!   engine breaks ties by plan key and may keep only some plans of the last value. A plan the
//!   engine never enumerates (a CP exchange, a rank order, a dispatcher...) has its own step
//!   time in general, and then the oracle holds a value below `t_K` that the engine lacks;
//! - per value, the engine lists no more plans than the oracle scored with it (each engine
//!   plan stands for at least one oracle plan);
//! - with `top_k` at least the oracle's feasible count, the engine returns its whole ranking,
//!   and its distinct values must be all of the oracle's; a smaller `top_k` must return the
//!   first `top_k` step times of that whole ranking (as a multiset: ties are broken by key).

use std::collections::BTreeMap;

use autoplan_cluster::Cluster;
use autoplan_cost::calibration::{dgx_a100, dgx_h100, hgx_h800};
use autoplan_evaluate::{EvalOptions, Evaluator, Metrics};
use autoplan_graph::ModelSpec;
use autoplan_input::Source;
use autoplan_plan::{Plan, Schedule};
use autoplan_search::{search, Ranked, Scorer, SearchOptions, Space};
use proptest::prelude::*;

/// The oracle: every plan of `space` that uses all of `ev`'s GPUs and that the evaluator
/// accepts (valid, fits in HBM), with its metrics.
fn oracle(ev: &Evaluator, space: &Space) -> Vec<(Plan, Metrics)> {
    let gpus = ev.cluster().gpus();
    // A dense model has no expert degrees: its plans have ep = moe_tp = 1 whatever the space
    // lists (a space is written for dense and MoE models alike).
    let moe = ev.model().moe.is_some();
    let eps: &[u32] = if moe { &space.ep } else { &[1] };
    let moe_tps: &[u32] = if moe { &space.moe_tp } else { &[1] };
    let mut out = Vec::new();
    for &pp in &space.pp {
        for &tp in &space.tp {
            for &cp in &space.cp {
                // dp is what the GPUs leave (`Space`: every plan uses all of them).
                if !gpus.is_multiple_of(tp * cp * pp) {
                    continue;
                }
                let dp = gpus / (tp * cp * pp);
                if space.dp.is_some_and(|d| d != dp) {
                    continue;
                }
                for &ep in eps {
                    for &moe_tp in moe_tps {
                        for &mbs in &space.mbs {
                            let base = Plan {
                                tp,
                                cp,
                                pp,
                                dp,
                                ep,
                                moe_tp,
                                mbs,
                                ..Plan::default()
                            };
                            memory_and_pipeline(ev, space, base, &mut out);
                        }
                    }
                }
            }
        }
    }
    out
}

/// The recompute, ZeRO and pipeline loops below one degree tuple.
fn memory_and_pipeline(ev: &Evaluator, space: &Space, base: Plan, out: &mut Vec<(Plan, Metrics)>) {
    for &(recompute, recompute_modules) in &space.recompute {
        for &zero in &space.zero {
            for &schedule in &space.schedule {
                // vpp is a virtual-stage count for the interleaved schedule only.
                let vpps: &[u32] = if schedule == Schedule::Interleaved {
                    &space.vpp
                } else {
                    &[1]
                };
                for &vpp in vpps {
                    let plan = Plan {
                        recompute,
                        recompute_modules,
                        zero,
                        schedule,
                        vpp,
                        ..base
                    };
                    knobs(ev, space, plan, out);
                }
            }
        }
    }
}

/// The knob loops below one (degrees, memory, pipeline) plan: every value of every knob.
fn knobs(ev: &Evaluator, space: &Space, base: Plan, out: &mut Vec<(Plan, Metrics)>) {
    // Nor does a dense model take the other expert knobs (`Plan::check` refuses them set):
    // `Plan::default()`'s values whatever the space lists, as for ep and moe_tp above.
    let moe = ev.model().moe.is_some();
    let d = Plan::default();
    fn only<T: Copy>(moe: bool, list: &[T], default: T) -> Vec<T> {
        if moe {
            list.to_vec()
        } else {
            vec![default]
        }
    }
    let moe_tp_schemes = only(moe, &space.moe_tp_scheme, d.moe_tp_scheme);
    let dispatchers = only(moe, &space.dispatcher, d.dispatcher);
    let ep_overlaps = only(moe, &space.ep_overlap, d.ep_overlap);
    let placements = only(moe, &space.placement, d.placement);
    for &sp in &space.sp {
        for &cp_comm in &space.cp_comm {
            for &tp_sp_transition in &space.tp_sp_transition {
                for &moe_tp_scheme in &moe_tp_schemes {
                    for &dispatcher in &dispatchers {
                        for &algo in &space.algo {
                            for &order in &space.order {
                                for &tp_overlap in &space.tp_overlap {
                                    for &ep_overlap in &ep_overlaps {
                                        for &placement in &placements {
                                            for &offload_optimizer in &space.offload_optimizer {
                                                for &offload_params in &space.offload_params {
                                                    for &offload_activations in
                                                        &space.offload_activations
                                                    {
                                                        let plan = Plan {
                                                            sp,
                                                            cp_comm,
                                                            tp_sp_transition,
                                                            moe_tp_scheme,
                                                            dispatcher,
                                                            algo,
                                                            order,
                                                            tp_overlap,
                                                            ep_overlap,
                                                            placement,
                                                            offload_optimizer,
                                                            offload_params,
                                                            offload_activations,
                                                            ..base
                                                        };
                                                        if let Ok(m) = ev.evaluate(&plan) {
                                                            out.push((plan, m));
                                                        }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// How many plans the oracle scores for `space` (an upper bound: before dividing the GPUs).
fn oracle_size(space: &Space) -> usize {
    let pipeline: usize = space
        .schedule
        .iter()
        .map(|&s| {
            if s == Schedule::Interleaved {
                space.vpp.len()
            } else {
                1
            }
        })
        .sum();
    [
        space.pp.len(),
        space.tp.len(),
        space.cp.len(),
        space.ep.len(),
        space.moe_tp.len(),
        space.mbs.len(),
        space.recompute.len(),
        space.zero.len(),
        pipeline,
        space.sp.len(),
        space.cp_comm.len(),
        space.tp_sp_transition.len(),
        space.moe_tp_scheme.len(),
        space.dispatcher.len(),
        space.algo.len(),
        space.order.len(),
        space.tp_overlap.len(),
        space.ep_overlap.len(),
        space.placement.len(),
        space.offload_optimizer.len(),
        space.offload_params.len(),
        space.offload_activations.len(),
    ]
    .iter()
    .product()
}

/// Step times as a map from the value (its bits: step times are finite and ≥ 0, so the bits
/// order like the numbers) to how many plans have it.
fn histogram(times: impl Iterator<Item = f64>) -> BTreeMap<u64, usize> {
    let mut h = BTreeMap::new();
    for t in times {
        assert!(t.is_finite() && t >= 0.0, "step time {t}");
        *h.entry(t.to_bits()).or_insert(0) += 1;
    }
    h
}

/// The branch-and-bound's top `top_k` under the real objective (`Scorer`, as `autoplan search`).
fn engine(
    model: &ModelSpec,
    cluster: &Cluster,
    space: &Space,
    top_k: usize,
) -> Vec<Ranked<Metrics>> {
    let scorer = Scorer::new(model, cluster, EvalOptions::default());
    let opts = SearchOptions {
        top_k,
        exhaustive: false,
    };
    search(&scorer, space, &opts, &()).plans
}

/// The checks of the module docs for one case; `Err` says what differs.
fn check(model: &ModelSpec, cluster: &Cluster, space: &Space, top_k: usize) -> Result<(), String> {
    let ev = Evaluator::new(model, cluster, EvalOptions::default());
    let all = oracle(&ev, space);
    let oracle_times = histogram(all.iter().map(|(_, m)| m.step_time_s));
    // The whole ranking: `top_k` ≥ every plan the oracle found feasible ≥ the engine's.
    let whole = engine(model, cluster, space, all.len().max(1));
    let top = engine(model, cluster, space, top_k);
    for (name, ranking) in [("whole ranking", &whole), ("top-k", &top)] {
        for (i, r) in ranking.iter().enumerate() {
            let again = ev.evaluate(&r.plan).map_err(|e| {
                format!("{name}: plan {} `{}` does not evaluate: {e}", i + 1, r.plan)
            })?;
            if again != r.metrics || r.step_time_s != again.step_time_s {
                return Err(format!(
                    "{name}: plan {} `{}` reported {:?} (step {}), re-evaluates to {:?}",
                    i + 1,
                    r.plan,
                    r.metrics,
                    r.step_time_s,
                    again
                ));
            }
            if ranking[..i].iter().any(|q| q.plan == r.plan) {
                return Err(format!("{name}: `{}` is listed twice", r.plan));
            }
            if i > 0 && ranking[i - 1].step_time_s > r.step_time_s {
                return Err(format!("{name}: not sorted at plan {}", i + 1));
            }
        }
    }
    let whole_times = histogram(whole.iter().map(|r| r.step_time_s));
    let engine_values: Vec<u64> = whole_times.keys().copied().collect();
    let oracle_values: Vec<u64> = oracle_times.keys().copied().collect();
    if engine_values != oracle_values {
        let missing: Vec<String> = oracle_times
            .keys()
            .filter(|t| !whole_times.contains_key(t))
            .take(5)
            .map(|&t| {
                let t = f64::from_bits(t);
                let plan = all.iter().find(|(_, m)| m.step_time_s == t).map(|(p, _)| p);
                format!(
                    "{t} s (`{}`)",
                    plan.map_or(String::new(), |p| p.to_string())
                )
            })
            .collect();
        let extra: Vec<f64> = whole_times
            .keys()
            .filter(|t| !oracle_times.contains_key(t))
            .take(5)
            .map(|&t| f64::from_bits(t))
            .collect();
        return Err(format!(
            "the engine's {} distinct step times differ from the oracle's {} ({} plans scored, \
             {} feasible): the oracle has {:?} the engine lacks, the engine {:?} the oracle lacks",
            engine_values.len(),
            oracle_values.len(),
            oracle_size(space),
            all.len(),
            missing,
            extra
        ));
    }
    for (t, &n) in &whole_times {
        if n > oracle_times[t] {
            return Err(format!(
                "{n} engine plans at {} s, only {} oracle plans",
                f64::from_bits(*t),
                oracle_times[t]
            ));
        }
    }
    // The top-k: the first `top_k` step times of the whole ranking, as a multiset.
    let want: Vec<f64> = whole.iter().take(top_k).map(|r| r.step_time_s).collect();
    let got: Vec<f64> = top.iter().map(|r| r.step_time_s).collect();
    if want != got {
        let plans = |r: &[Ranked<Metrics>]| -> Vec<String> {
            r.iter().take(top_k).map(|r| r.plan.to_string()).collect()
        };
        return Err(format!(
            "top-{top_k} step times {got:?} ({:?}), the oracle-checked ranking starts {want:?} \
             ({:?})",
            plans(&top),
            plans(&whole)
        ));
    }
    // And directly against the oracle: its distinct values up to the top-k's last one.
    if let Some(last) = got.last() {
        let upto: Vec<u64> = oracle_values
            .iter()
            .copied()
            .filter(|&t| f64::from_bits(t) <= *last)
            .collect();
        let mut seen: Vec<u64> = got.iter().map(|t| t.to_bits()).collect();
        seen.dedup();
        if seen != upto {
            return Err(format!(
                "top-{top_k}: distinct step times {} against the oracle's {} up to {last} s",
                seen.len(),
                upto.len()
            ));
        }
    } else if !all.is_empty() {
        return Err(format!(
            "the engine found nothing; the oracle {} plans",
            all.len()
        ));
    }
    Ok(())
}

/// A small model file: dense (Llama-style GQA) or MoE (Mixtral-style, optionally with a dense
/// first block, shared experts and skewed routing).
#[derive(Debug, Clone)]
struct SmallModel {
    layers: u32,
    hidden: u32,
    heads: u32,
    kv_heads: u32,
    seq_len: u32,
    global_batch: u32,
    /// (experts, top_k, first dense blocks, shared experts, load imbalance)
    moe: Option<(u32, u32, u32, u32, f64)>,
}

impl SmallModel {
    fn spec(&self) -> ModelSpec {
        let mut text = format!(
            "[model]\nname = \"oracle-small\"\nfamily = \"{}\"\nlayers = {}\nhidden = {}\n\
             heads = {}\nffn_hidden = {}\nmlp = \"swiglu\"\nnorm = \"rmsnorm\"\n\
             positions = \"rope\"\nvocab = 32000\ntied_embeddings = false\nbias = false\n\n\
             [attention]\nkind = \"gqa\"\nkv_heads = {}\n\n",
            if self.moe.is_some() {
                "mixtral"
            } else {
                "llama"
            },
            self.layers,
            self.hidden,
            self.heads,
            self.hidden * 4,
            self.kv_heads
        );
        if let Some((experts, top_k, dense, shared, imbalance)) = self.moe {
            text += &format!(
                "[moe]\nexperts = {experts}\ntop_k = {top_k}\nexpert_ffn_hidden = {}\n\
                 first_dense_layers = {dense}\nload_imbalance = {imbalance}\n",
                self.hidden
            );
            if shared > 0 {
                text += &format!(
                    "shared_experts = {shared}\nshared_ffn_hidden = {}\n",
                    self.hidden
                );
            }
            text += "\n";
        }
        text += &format!(
            "[training]\nseq_len = {}\nglobal_batch = {}\nprecision = \"bf16\"\n\
             optimizer = \"adam\"\n",
            self.seq_len, self.global_batch
        );
        ModelSpec::from_toml(&Source::new("oracle-small.toml", text)).expect("a valid model file")
    }
}

fn small_model() -> impl Strategy<Value = SmallModel> {
    (
        prop::sample::select(vec![4u32, 6, 8]),
        prop::sample::select(vec![512u32, 1024, 2048]),
        prop::sample::select(vec![(8u32, 8u32), (16, 4), (16, 16)]),
        prop::sample::select(vec![1024u32, 4096]),
        prop::sample::select(vec![32u32, 64]),
        proptest::option::of((
            prop::sample::select(vec![4u32, 8, 16]),
            1u32..=2,
            0u32..=1,
            0u32..=1,
            prop::sample::select(vec![1.0f64, 1.5]),
        )),
    )
        .prop_map(
            |(layers, hidden, (heads, kv_heads), seq_len, global_batch, moe)| SmallModel {
                layers,
                hidden,
                heads,
                kv_heads,
                seq_len,
                global_batch,
                moe,
            },
        )
}

/// A cluster of 1 or 2 nodes of 8 GPUs (A100, H100 or H800), its HBM scaled down so that
/// memory decides some cases.
fn small_cluster() -> impl Strategy<Value = Cluster> {
    (
        0usize..3,
        1u32..=2,
        prop::sample::select(vec![1.0f64, 1.0, 0.3, 0.1]),
        // Host memory per node: a DGX's 2 TiB, or little enough that offload runs out of it.
        prop::sample::select(vec![2048.0f64, 8.0, 1.0]),
    )
        .prop_map(|(gpu, nodes, hbm, host_gib)| {
            let mut c = match gpu {
                0 => dgx_a100(nodes),
                1 => dgx_h100(nodes),
                _ => hgx_h800(nodes),
            };
            c.gpu.hbm_bytes *= hbm;
            c.host = Some(autoplan_cluster::Host {
                memory_bytes: host_gib * 1024.0 * 1024.0 * 1024.0,
                memory_bw: 409.6e9,
                link: autoplan_cluster::HostLink::PcieGen4,
                link_bw: 26.3e9,
                gpus_per_link: 2,
            });
            c
        })
}

/// One list of a space file as TOML: a single value (weight 2) or a random non-empty subset
/// (weight `open`) of `all`, each value in quotes if `quote`.
fn list(all: &[&str], quote: bool, open: u32) -> BoxedStrategy<String> {
    let all: Vec<String> = all
        .iter()
        .map(|s| {
            if quote {
                format!("\"{s}\"")
            } else {
                s.to_string()
            }
        })
        .collect();
    let single = prop::sample::select(all.clone()).prop_map(|v| vec![v]);
    let subset = prop::sample::subsequence(all.clone(), 1..=all.len());
    prop_oneof![2 => single, open => subset]
        .prop_map(|v| format!("[{}]", v.join(", ")))
        .boxed()
}

/// A random space file: every degree list a subset; each knob one value or (sometimes) several,
/// the CP exchange and the rank order open more often. No constraints.
fn small_space() -> impl Strategy<Value = Space> {
    let num = |v: &[&str], open| list(v, false, open);
    let quoted = |v: &[&str], open| list(v, true, open);
    (
        (
            num(&["1", "2", "4"], 4),
            num(&["1", "2", "4"], 4),
            num(&["1", "2", "4"], 4),
            num(&["1", "2", "4"], 4),
            num(&["1", "2"], 2),
            num(&["1", "2"], 2),
        ),
        (
            quoted(
                &["none", "selective", "selective:layernorm+moe_act", "full"],
                2,
            ),
            // Every sharding mode: ZeRO stages, FSDP without resharding, HSDP groups of 2.
            quoted(
                &[
                    "0",
                    "1",
                    "2",
                    "3",
                    "3-noreshard",
                    "1:2",
                    "2:2",
                    "3:2",
                    "3-noreshard:2",
                ],
                2,
            ),
            quoted(&["1f1b", "interleaved", "zero-bubble", "dualpipe"], 2),
            num(&["2", "4"], 2),
        ),
        (
            num(&["false", "true"], 2),
            quoted(&["ring", "all-to-all", "all-gather", "a2a+p2p:2"], 4),
            quoted(&["all-reduce-slice", "all-to-all"], 2),
            quoted(&["scatter-gather", "group-all-to-all"], 2),
            quoted(&["all-to-all", "all-gather", "deepep"], 2),
            quoted(&["cheapest", "nccl-like", "ring"], 2),
        ),
        (
            quoted(
                &["tp-cp-dp-pp", "tp-dp-cp-pp", "dp-tp-cp-pp", "pp-cp-dp-tp"],
                4,
            ),
            num(&["false", "true"], 2),
            num(&["false", "true"], 2),
            quoted(&["contiguous", "balanced", "balanced:1"], 2),
            num(&["0", "0.5", "1"], 2),
            num(&["false", "true"], 1),
            num(&["0", "1", "\"all\""], 2),
        ),
    )
        .prop_map(
            |((tp, pp, cp, ep, moe_tp, mbs), (rc, zero, sch, vpp), knobs, rest)| {
                let (sp, cpc, tpsp, mts, disp, algo) = knobs;
                let (order, tpo, epo, place, off, offp, offa) = rest;
                let text = format!(
                    "[degrees]\ntp = {tp}\npp = {pp}\ncp = {cp}\nep = {ep}\nmoe_tp = {moe_tp}\n\
                     [batch]\nmbs = {mbs}\n[memory]\nrecompute = {rc}\nzero = {zero}\n\
                     offload_optimizer = {off}\noffload_params = {offp}\n\
                     offload_activations = {offa}\n\
                     [pipeline]\nschedules = {sch}\nvpp = {vpp}\n[knobs]\nsp = {sp}\n\
                     cp_comm = {cpc}\ntp_sp_transition = {tpsp}\nmoe_tp_scheme = {mts}\n\
                     dispatcher = {disp}\nalgo = {algo}\nrank_order = {order}\n\
                     tp_overlap = {tpo}\nep_overlap = {epo}\nplacement = {place}\n"
                );
                Space::from_source(&Source::new("oracle-space.toml", text))
                    .expect("a valid space file")
            },
        )
        // Keep each case to a few thousand oracle evaluations.
        .prop_filter("oracle too large", |s| oracle_size(s) <= 8192)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The branch-and-bound's ranking (whole and top-k) against the oracle on random small
    /// models, clusters and spaces.
    #[test]
    fn bnb_matches_the_oracle(
        model in small_model(),
        cluster in small_cluster(),
        space in small_space(),
        top_k in 1usize..8,
    ) {
        let spec = model.spec();
        if let Err(e) = check(&spec, &cluster, &space, top_k) {
            return Err(TestCaseError::fail(format!("{e}\nmodel {model:?}\nspace {space:?}")));
        }
    }
}

/// A fixed case where every value of the knobs the engine has been seen to drop matters: 16
/// GPUs on two nodes, CP 2 with both exchanges, four rank orders (groups on or across the
/// nodes), three dispatchers, interleaving with two vpp, all ZeRO stages, FSDP without
/// resharding and HSDP, recompute modes.
#[test]
fn bnb_matches_the_oracle_on_every_communication_knob() {
    let model = SmallModel {
        layers: 8,
        hidden: 1024,
        heads: 16,
        kv_heads: 4,
        seq_len: 4096,
        global_batch: 32,
        moe: Some((8, 2, 0, 0, 1.5)),
    }
    .spec();
    let text = "[degrees]\ntp = [1, 2]\npp = [1, 2]\ncp = [1, 2]\nep = [2, 4]\nmoe_tp = [1]\n\
                [batch]\nmbs = [1]\n[memory]\nrecompute = [\"selective\", \"full\"]\n\
                zero = [0, 1, 2, 3, \"3-noreshard\", \"1:2\", \"3:2\"]\n\
                [pipeline]\nschedules = [\"1f1b\", \"interleaved\"]\n\
                vpp = [2, 4]\n[knobs]\nsp = [true]\ncp_comm = [\"ring\", \"all-to-all\"]\n\
                tp_sp_transition = [\"all-reduce-slice\"]\n\
                moe_tp_scheme = [\"scatter-gather\"]\n\
                dispatcher = [\"all-to-all\", \"all-gather\", \"deepep\"]\n\
                algo = [\"cheapest\"]\n\
                rank_order = [\"tp-cp-dp-pp\", \"tp-dp-cp-pp\", \"dp-tp-cp-pp\", \"pp-cp-dp-tp\"]\n\
                tp_overlap = [true]\nep_overlap = [false]\n";
    let space = Space::from_source(&Source::new("fixed.toml", text)).expect("a valid space");
    for top_k in [1, 5] {
        if let Err(e) = check(&model, &dgx_h100(2), &space, top_k) {
            panic!("top {top_k}: {e}");
        }
    }
}

/// The same on a dense model: CP exchanges and rank orders with TP, CP and PP across two nodes.
#[test]
fn bnb_matches_the_oracle_on_a_dense_model() {
    let model = SmallModel {
        layers: 8,
        hidden: 2048,
        heads: 16,
        kv_heads: 16,
        seq_len: 4096,
        global_batch: 64,
        moe: None,
    }
    .spec();
    let text = "[degrees]\ntp = [1, 2, 4]\npp = [1, 2, 4]\ncp = [1, 2]\nep = [1]\nmoe_tp = [1]\n\
                [batch]\nmbs = [1, 2]\n[memory]\nrecompute = [\"none\", \"full\"]\n\
                zero = [1, 2, 3, \"3-noreshard\", \"3:2\"]\n[pipeline]\nschedules = [\"1f1b\", \"interleaved\", \"zero-bubble\"]\n\
                vpp = [2]\n[knobs]\nsp = [false, true]\ncp_comm = [\"ring\", \"all-to-all\"]\n\
                tp_sp_transition = [\"all-reduce-slice\"]\n\
                moe_tp_scheme = [\"scatter-gather\"]\ndispatcher = [\"all-to-all\"]\n\
                algo = [\"cheapest\"]\n\
                rank_order = [\"tp-cp-dp-pp\", \"cp-tp-dp-pp\", \"dp-cp-tp-pp\"]\n\
                tp_overlap = [true]\nep_overlap = [true]\n";
    let space = Space::from_source(&Source::new("dense.toml", text)).expect("a valid space");
    for top_k in [1, 5] {
        if let Err(e) = check(&model, &dgx_a100(2), &space, top_k) {
            panic!("top {top_k}: {e}");
        }
    }
}

/// The plans of a dense 8-layer model at `seq_len` on one A100 node with a host tier, over a
/// space whose `[memory]` section is `memory` (its MoE knobs at `Plan::default()`'s values: a
/// dense plan with others is invalid, and the memory floor of an invalid plan is 0, which
/// would let these cases pass without the floor), where HBM is set between the least peak of all
/// and the least of the plans `offloaded` rejects: every plan that fits is `offloaded`, and
/// the engine still finds every plan the oracle does (the memory floor holds with the offload
/// lists open). Returns the plans that fit.
fn only_offloaded_fit(
    seq_len: u32,
    memory: &str,
    offloaded: &dyn Fn(&Plan) -> bool,
) -> Vec<(Plan, Metrics)> {
    let model = SmallModel {
        layers: 8,
        hidden: 4096,
        heads: 32,
        kv_heads: 32,
        seq_len,
        global_batch: 64,
        moe: None,
    }
    .spec();
    let text = format!(
        "[degrees]\ntp = [1, 2]\npp = [1, 2]\ncp = [1]\nep = [1]\nmoe_tp = [1]\n\
         [batch]\nmbs = [1, 2]\n[memory]\n{memory}\n\
         [pipeline]\nschedules = [\"1f1b\"]\nvpp = [2]\n[knobs]\nsp = [true]\n\
         cp_comm = [\"ring\"]\ntp_sp_transition = [\"all-reduce-slice\"]\n\
         moe_tp_scheme = [\"group-all-to-all\"]\ndispatcher = [\"all-to-all\"]\n\
         algo = [\"cheapest\"]\nrank_order = [\"tp-cp-dp-pp\"]\n\
         tp_overlap = [true]\nep_overlap = [false]\n"
    );
    let space = Space::from_source(&Source::new("offload.toml", text)).expect("a valid space");
    let mut cluster = dgx_a100(1);
    cluster.host = autoplan_cluster::resolve_cluster("a100x64").unwrap().host;
    // The least peaks, with HBM to spare.
    let roomy = {
        let mut c = cluster.clone();
        c.gpu.hbm_bytes *= 100.0;
        c
    };
    let all = oracle(
        &Evaluator::new(&model, &roomy, EvalOptions::default()),
        &space,
    );
    let least = |keep: &dyn Fn(&Plan) -> bool| {
        all.iter()
            .filter(|(p, _)| keep(p))
            .map(|(_, m)| m.memory_peak_bytes)
            .fold(f64::INFINITY, f64::min)
    };
    let (with, without) = (least(&|_| true), least(&|p| !offloaded(p)));
    assert!(with < without, "{with} !< {without}");
    cluster.gpu.hbm_bytes = (with + without) / 2.0;
    let ev = Evaluator::new(&model, &cluster, EvalOptions::default());
    let fits = oracle(&ev, &space);
    assert!(!fits.is_empty());
    assert!(fits.iter().all(|(p, _)| offloaded(p)));
    for top_k in [1, 4] {
        if let Err(e) = check(&model, &cluster, &space, top_k) {
            panic!("top {top_k}: {e}");
        }
    }
    // The memory floor is informative here: it cuts subtrees.
    let scorer = Scorer::new(&model, &cluster, EvalOptions::default());
    let opts = SearchOptions {
        top_k: 1,
        exhaustive: false,
    };
    let stats = search(&scorer, &space, &opts, &()).stats;
    assert!(stats.pruned_by_memory > 0, "{stats:?}");
    fits
}

/// Where only optimizer-offloaded plans fit.
#[test]
fn bnb_matches_the_oracle_where_only_offload_fits() {
    only_offloaded_fit(
        2048,
        "recompute = [\"none\", \"full\"]\nzero = [0, 1, 2]\noffload_optimizer = [0, 0.5, 1]",
        &|p| p.offload_optimizer > 0,
    );
}

/// Where only plans offloading their activations fit: the memory floor must offload the most
/// the space lists, or it prunes them.
#[test]
fn bnb_matches_the_oracle_where_only_activation_offload_fits() {
    only_offloaded_fit(
        8192,
        "recompute = [\"none\", \"selective\", \"full\"]\nzero = [1]\n\
         offload_activations = [0, 2, \"all\"]",
        &|p| p.offload_activations > 0,
    );
}

/// Where only plans offloading their parameters fit: the memory floor must try parameter
/// offload where the plan can take it.
#[test]
fn bnb_matches_the_oracle_where_only_param_offload_fits() {
    only_offloaded_fit(
        2048,
        "recompute = [\"full\"]\nzero = [1, 3]\noffload_optimizer = [1]\n\
         offload_params = [false, true]",
        &|p| p.offload_params,
    );
}
