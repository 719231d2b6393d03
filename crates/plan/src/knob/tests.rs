use super::*;

#[test]
fn keys_are_unique_and_listed_in_keys() {
    let listed: Vec<&str> = crate::parse::KEYS
        .split(", ")
        .map(|k| k.split(' ').next().unwrap_or(k))
        .collect();
    let keys: Vec<&str> = Knob::ALL.iter().map(|k| k.key()).collect();
    assert_eq!(listed, keys);
    for k in Knob::ALL {
        assert_eq!(Knob::from_key(k.key()), Some(k));
        for a in k.aliases() {
            assert_eq!(Knob::from_key(a), Some(k), "{a}");
        }
    }
}

#[test]
fn leaves_are_the_tail_of_the_key_order() {
    let tail = &Knob::KEY_ORDER[Knob::KEY_ORDER.len() - Knob::LEAVES.len()..];
    assert_eq!(tail, &Knob::LEAVES[..]);
    for (i, k) in Knob::KEY_ORDER.iter().enumerate() {
        assert!(!Knob::KEY_ORDER[..i].contains(k), "{k:?} twice");
    }
}

#[test]
fn every_value_prints_and_parses_back() {
    fn check<T: Copy + PartialEq + std::fmt::Debug>(t: Names<T>) {
        for n in t.0 {
            assert_eq!(t.parse(n.name), Some(n.value), "{}", n.name);
            assert_eq!(t.parse(n.file_name), Some(n.value), "{}", n.file_name);
            for a in n.aliases {
                assert_eq!(t.parse(a), Some(n.value), "{a}");
            }
        }
    }
    check(SCHEDULES);
    check(CP_COMMS);
    check(TRANSITIONS);
    check(MOE_TP_SCHEMES);
    check(DISPATCHERS);
    check(PIPELINE_SPLITS);
    let p: Plan = "tp=2,sp=on,cp=2,cp_comm=a2a,transition=all-to-all,ep=2,moe_tp=2,\
                   moe_tp_scheme=scatter-gather,dispatcher=deepep,algo=ring,\
                   order=tp-dp-cp-pp,placement=balanced:1,tp_overlap=on,ep_overlap=on,\
                   recompute=full,recompute_layers=2,first_stage_layers=3,\
                   last_stage_layers=1,pipeline_split=embedding+loss,pp=4,schedule=interleaved,vpp=2,\
                   zero=3-noreshard:2,mbs=2,offload_optimizer=0.35,offload_params=on,\
                   offload_activations=3"
        .parse()
        .unwrap();
    for k in Knob::ALL {
        let mut q = Plan::default();
        k.parse_into(&mut q, &k.value(&p)).unwrap();
        assert!(k.same(&p, &q), "{k:?}");
        assert!(k.shown(&p), "{k:?}");
    }
}

/// `same` compares exactly the fields `copy` copies: after copying knob `k` from `p` into
/// the default plan, the two plans agree on `k` and on no other knob they did not agree on.
#[test]
fn same_agrees_with_copy() {
    let p: Plan = "tp=2,sp=on,cp=2,cp_comm=a2a,transition=all-to-all,ep=2,moe_tp=2,\
                   moe_tp_scheme=scatter-gather,dispatcher=deepep,algo=ring,\
                   order=tp-dp-cp-pp,placement=balanced:1,tp_overlap=on,ep_overlap=on,\
                   recompute=full,recompute_layers=2,first_stage_layers=3,\
                   last_stage_layers=1,pipeline_split=loss,pp=4,schedule=interleaved,vpp=2,zero=3,\
                   mbs=2"
        .parse()
        .unwrap();
    let d = Plan::default();
    let mut plans = vec![p, d];
    for k in Knob::ALL {
        let mut q = d;
        k.copy(&p, &mut q);
        for j in Knob::ALL {
            let expect = j == k || j.same(&p, &d);
            assert_eq!(j.same(&p, &q), expect, "copy {k:?}, compare {j:?}");
        }
        plans.push(q);
    }
    // The definition: `a` holds `b`'s value of `k` when copying it over changes nothing.
    for a in &plans {
        for b in &plans {
            for k in Knob::ALL {
                let mut c = *a;
                k.copy(b, &mut c);
                assert_eq!(k.same(a, b), c == *a, "{k:?}");
            }
        }
    }
}

#[test]
fn relevance_follows_the_degrees() {
    let dense: Plan = "tp=1,cp=1,dp=8,pp=1".parse().unwrap();
    let ctx = Context::new(&dense, false);
    for k in [
        Knob::Sp,
        Knob::Transition,
        Knob::CpComm,
        Knob::Dispatcher,
        Knob::Placement,
        Knob::Schedule,
        Knob::Vpp,
    ] {
        assert!(!k.matters(&ctx), "{k:?}");
    }
    assert!(Knob::Zero.matters(&ctx));
    let moe: Plan = "tp=2,cp=2,dp=2,pp=2,ep=1,moe_tp=2,schedule=interleaved"
        .parse()
        .unwrap();
    let ctx = Context::new(&moe, true);
    for k in [
        Knob::Sp,
        Knob::CpComm,
        Knob::Dispatcher,
        Knob::MoeTpScheme,
        Knob::EpOverlap,
        Knob::Vpp,
    ] {
        assert!(k.matters(&ctx), "{k:?}");
    }
    assert!(!Knob::Placement.matters(&ctx));
    assert!(!Knob::Dispatcher.matters(&Context::new(&moe, false)));
}

#[test]
fn moe_only_knobs_are_the_expert_ones() {
    let moe_only: Vec<Knob> = Knob::ALL.into_iter().filter(|k| k.moe_only()).collect();
    assert_eq!(
        moe_only,
        [
            Knob::Ep,
            Knob::MoeTp,
            Knob::MoeTpScheme,
            Knob::Dispatcher,
            Knob::Placement,
            Knob::EpOverlap
        ]
    );
}
