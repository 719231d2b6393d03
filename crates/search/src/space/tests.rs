use super::*;

#[test]
fn bundled_spaces_parse() {
    for name in bundled_spaces() {
        let s = resolve_space(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!s.tp.is_empty(), "{name}");
    }
}

fn with(replace: &str, by: &str) -> String {
    let text = BUNDLED[0].1;
    assert!(text.contains(replace), "{replace}");
    text.replacen(replace, by, 1)
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn unknown_recompute_is_located_with_the_allowed_names() {
    let text = with("\"selective\"", "\"sometimes\"");
    let err = Space::from_source(&Source::new("s.toml", text.as_str())).unwrap_err();
    let msg = err.to_string();
    let line = line_of(&text, "sometimes");
    assert!(msg.starts_with(&format!("s.toml:{line}:")), "{msg}");
    assert!(
        msg.contains("memory.recompute") && msg.contains("selective"),
        "{msg}"
    );
}

#[test]
fn zero_degree_and_empty_list_and_bad_order_are_errors() {
    let err = Space::from_source(&Source::new("s.toml", with("tp = [", "tp = [0, ")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("degrees.tp = 0"), "{err}");
    let err = Space::from_source(&Source::new("s.toml", with("mbs = [", "mbs = [] #")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("batch.mbs") && err.contains("empty"), "{err}");
    let err = Space::from_source(&Source::new(
        "s.toml",
        with("\"tp-cp-dp-pp\"", "\"tp-tp-dp-pp\""),
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("knobs.rank_order"), "{err}");
    let err = Space::from_source(&Source::new("s.toml", with("[batch]", "[batch]\nmbz = 1")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("mbz"), "{err}");
}

#[test]
fn fix_restricts_and_rejects_bad_items() {
    let mut s = resolve_space("default").unwrap();
    s.fix("tp=8, pp=16,recompute=full,rank_order=tp-dp-cp-pp,sp=true")
        .unwrap();
    assert_eq!(s.tp, vec![8]);
    assert_eq!(s.pp, vec![16]);
    assert_eq!(
        s.recompute,
        vec![(Recompute::Full, RecomputeModules::DEFAULT)]
    );
    assert_eq!(s.sp, vec![true]);
    assert!(s.fix("tp=0").is_err());
    assert!(s.fix("tq=2").unwrap_err().reason.contains("unknown key"));
    assert!(s.fix("recompute=most").unwrap_err().reason.contains("full"));
    assert!(s.fix("tp").is_err());
    // Module sets, in the plan string's syntax.
    let mut s = resolve_space("default").unwrap();
    s.fix("recompute=selective:moe_act+layernorm").unwrap();
    assert_eq!(
        s.recompute,
        vec![(
            Recompute::Selective,
            RecomputeModules(RecomputeModules::LAYERNORM | RecomputeModules::MOE_ACT)
        )]
    );
    let err = s.fix("recompute=selective:attention").unwrap_err().reason;
    assert!(err.contains("mla_up_proj"), "{err}");
    // The plan string's keys and values, as `search` prints them (`sp=off`: what plans
    // with tp = 1 show, though the space lists sp = [true]).
    let mut s = resolve_space("default").unwrap();
    s.fix("sp=off,transition=all-to-all,tp_overlap=on,order=tp-dp-cp-pp,dp=4")
        .unwrap();
    assert_eq!(s.sp, vec![false]);
    assert_eq!(s.tp_sp_transition, vec![TpSpTransition::AllToAll]);
    assert_eq!(s.tp_overlap, vec![true]);
    assert_eq!(s.order, vec!["tp-dp-cp-pp".parse().unwrap()]);
    assert_eq!(s.dp, Some(4));
    let mut s = resolve_space("default").unwrap();
    s.fix("tp_sp_transition=all-reduce-slice").unwrap();
    assert_eq!(s.tp_sp_transition, vec![TpSpTransition::AllReduceSlice]);
    let err = s.fix("first_stage_layers=2").unwrap_err().reason;
    assert!(err.contains("not a decision"), "{err}");
}

#[test]
fn fix_rejects_a_knob_given_twice() {
    let mut s = resolve_space("default").unwrap();
    let e = s.fix("tp=1,tp=8").unwrap_err();
    assert_eq!(e.item, "tp=8");
    assert!(e.reason.contains("fixed twice (first `tp=1`)"), "{e}");
    // Aliases name the same knob.
    let e = s
        .fix("rank_order=tp-cp-dp-pp, order=tp-dp-cp-pp")
        .unwrap_err();
    assert!(e.reason.contains("`order` is fixed twice"), "{e}");
}

#[test]
fn fix_narrows_and_never_widens() {
    let quick = resolve_space("quick").unwrap();
    for (item, listed) in [
        ("schedule=dualpipe", "schedule=1f1b|interleaved"),
        ("tp=16", "tp=1|2|4|8"),
        ("cp=2", "cp=1"),
        ("zero=3", "zero=1"),
        ("vpp=4", "vpp=2"),
        ("recompute=none", "recompute=selective|full"),
        ("dispatcher=deepep", "dispatcher=all-to-all"),
        ("placement=balanced:1", "placement=contiguous"),
        ("tp_overlap=on", "tp_overlap=off"),
    ] {
        let e = quick.clone().fix(item).unwrap_err();
        assert_eq!(e.item, item);
        assert!(
            e.reason.contains("is not in the space") && e.reason.contains(listed),
            "{item}: {e}"
        );
    }
    // What a plan shows where the knob does not apply: accepted, though not listed.
    for item in [
        "sp=off",
        "zero=0",
        "vpp=1",
        "schedule=1f1b",
        "ep=1",
        "moe_tp=1",
    ] {
        let mut s = resolve_space("moe").unwrap();
        s.zero = vec![Zero::stage(1)];
        s.schedule = vec![Schedule::Interleaved];
        s.ep = vec![8];
        s.moe_tp = vec![2];
        s.fix(item).unwrap_or_else(|e| panic!("{item}: {e}"));
    }
    // Always-relevant knobs have no such default.
    let mut s = resolve_space("quick").unwrap();
    s.mbs = vec![2];
    assert!(s.fix("mbs=1").is_err());
    // dp is not a list.
    quick.clone().fix("dp=3").unwrap();
}

#[test]
fn space_files_take_module_sets_and_locate_bad_ones() {
    let src = |recompute: &str| {
        let quick = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../search_spaces/quick.toml"
        );
        let text = std::fs::read_to_string(quick).unwrap().replace(
            "recompute = [\"selective\", \"full\"]",
            &format!("recompute = {recompute}"),
        );
        Space::from_source(&Source::new("quick.toml", text))
    };
    let s = src("[\"selective:moe\", \"selective\", \"full\", \"selective:moe\"]").unwrap();
    // Sorted, de-duplicated: the default set before `moe`.
    assert_eq!(
        s.recompute,
        vec![
            (Recompute::Selective, RecomputeModules::DEFAULT),
            (
                Recompute::Selective,
                RecomputeModules(RecomputeModules::MOE)
            ),
            (Recompute::Full, RecomputeModules::DEFAULT),
        ]
    );
    let err = src("[\"selective:norm\"]").unwrap_err().to_string();
    assert!(
        err.contains("memory.recompute") && err.contains("layernorm"),
        "{err}"
    );
}

#[test]
fn lists_are_sorted_and_deduplicated() {
    let s = Space::from_source(&Source::new("s.toml", with("tp = [", "tp = [8, 1, 8, "))).unwrap();
    assert!(s.tp.windows(2).all(|w| w[0] < w[1]), "{:?}", s.tp);
}
