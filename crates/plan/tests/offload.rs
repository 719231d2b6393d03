//! The `offload_optimizer` knob: plan text and JSON round trips, the framework rules and the
//! Megatron flags.

use autoplan_graph::resolve_model;
use autoplan_plan::{Framework, Knob, Plan};

#[test]
fn round_trips_through_text_and_json() {
    for s in ["0.25", "0.5", "1", "0.05"] {
        let p: Plan = format!("tp=2,dp=4,zero=1,offload_optimizer={s}")
            .parse()
            .unwrap();
        let text = p.to_string();
        assert!(text.contains(&format!("offload_optimizer={s}")), "{text}");
        assert_eq!(text.parse::<Plan>().unwrap(), p);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), p);
    }
    // No offload is the default and is not written.
    let p: Plan = "tp=2,dp=4,offload_optimizer=0".parse().unwrap();
    assert!(!p.to_string().contains("offload"));
    // A plan JSON without the field (older files) reads as no offload.
    let mut v = serde_json::to_value(p).unwrap();
    v.as_object_mut().unwrap().remove("offload_optimizer");
    assert_eq!(
        serde_json::from_value::<Plan>(v).unwrap().offload_optimizer,
        0
    );
    let e = "offload_optimizer=1.5".parse::<Plan>().unwrap_err();
    assert!(e.to_string().contains("offload_optimizer"), "{e}");
    assert_eq!(
        Knob::from_key("offload-optimizer"),
        Some(Knob::OffloadOptimizer)
    );
}

#[test]
fn frameworks_offer_only_what_they_run() {
    let m = resolve_model("llama3-8b").unwrap();
    let plan = |s: &str| s.parse::<Plan>().unwrap();
    let mcore = Framework::default();
    assert!(mcore
        .check(&plan("dp=8,zero=1,offload_optimizer=0.5"), &m)
        .is_ok());
    let r = mcore
        .check(&plan("dp=8,zero=0,offload_optimizer=1"), &m)
        .unwrap_err();
    assert_eq!(r.knob, Knob::OffloadOptimizer);
    assert!(r.to_string().contains("--use-distributed-optimizer"), "{r}");
    assert!(mcore
        .check(&plan("dp=8,zero=3,offload_optimizer=1"), &m)
        .is_err());
    let tt = Framework::TorchTitan;
    let r = tt
        .check(&plan("dp=8,zero=3,offload_optimizer=1"), &m)
        .unwrap_err();
    assert!(r.to_string().contains("enable_cpu_offload"), "{r}");
    let ds = Framework::DeepSpeed;
    assert!(ds
        .check(&plan("dp=8,zero=1,offload_optimizer=1"), &m)
        .is_ok());
    assert!(ds
        .check(&plan("dp=8,zero=1,offload_optimizer=0.5"), &m)
        .is_err());
    assert!(ds
        .check(&plan("dp=8,zero=3,offload_optimizer=0.5"), &m)
        .is_ok());
    assert!(ds
        .check(&plan("dp=8,zero=0,offload_optimizer=1"), &m)
        .is_err());
    assert!(Framework::Any
        .check(&plan("dp=8,offload_optimizer=0.5"), &m)
        .is_ok());
}

#[test]
fn megatron_flags() {
    let m = resolve_model("llama3-8b").unwrap();
    let p: Plan = "tp=1,dp=8,zero=1,offload_optimizer=0.75".parse().unwrap();
    let a = p.megatron_args(&m).unwrap();
    for f in [
        "--optimizer-cpu-offload",
        "--overlap-cpu-optimizer-d2h-h2d",
        "--use-precision-aware-optimizer",
        "--use-distributed-optimizer",
    ] {
        assert!(a.iter().any(|x| x == f), "{f} missing: {a:?}");
    }
    assert!(
        a.windows(2)
            .any(|w| w == ["--optimizer-offload-fraction", "0.75"]),
        "{a:?}"
    );
    let none: Plan = "tp=1,dp=8,zero=1".parse().unwrap();
    let a = none.megatron_args(&m).unwrap();
    assert!(!a.iter().any(|x| x.contains("offload")), "{a:?}");
    // What Megatron refuses is refused by the export too.
    let bad: Plan = "tp=1,dp=8,zero=0,offload_optimizer=1".parse().unwrap();
    assert!(bad.megatron_args(&m).is_err());
}

/// `offload_activations`: each framework's rules (Megatron-Core `--cpu-offloading-num-layers`: no PP, no
/// recompute, fewer layers than the model; DeepSpeed `cpu_checkpointing`: full recompute, every
/// layer; torchtitan: none), the plan check's one spelling per plan, and Megatron's flags.
#[test]
fn activation_offload_rules_and_flags() {
    let m = resolve_model("llama3-8b").unwrap(); // 32 layers
    let plan = |s: &str| s.parse::<Plan>().unwrap();
    let mcore = Framework::default();
    assert!(mcore
        .check(&plan("dp=8,offload_activations=31"), &m)
        .is_ok());
    for (bad, why) in [
        ("dp=4,pp=2,offload_activations=4", "pipeline"),
        ("dp=8,recompute=full,offload_activations=4", "recomputation"),
        ("dp=8,offload_activations=all", "below num_layers"),
    ] {
        let r = mcore.check(&plan(bad), &m).unwrap_err();
        assert_eq!(r.knob, Knob::OffloadActivations, "{bad}");
        assert!(r.to_string().contains(why), "{bad}: {r}");
        assert!(r.to_string().contains("transformer_config.py"), "{r}");
    }
    let ds = Framework::DeepSpeed;
    assert!(ds
        .check(&plan("dp=8,recompute=full,offload_activations=all"), &m)
        .is_ok());
    for bad in [
        "dp=8,offload_activations=all",
        "dp=8,recompute=full,offload_activations=4",
    ] {
        let r = ds.check(&plan(bad), &m).unwrap_err();
        assert!(r.to_string().contains("cpu_checkpointing"), "{bad}: {r}");
    }
    let r = Framework::TorchTitan
        .check(&plan("dp=8,offload_activations=all"), &m)
        .unwrap_err();
    assert!(r.to_string().contains("no activation offload"), "{r}");
    assert!(Framework::Any
        .check(
            &plan("dp=4,pp=2,recompute=selective,offload_activations=3"),
            &m
        )
        .is_ok());

    // A count reaching the largest stage is `all` (16 blocks per stage at pp=2).
    assert!(plan("dp=4,pp=2,offload_activations=15")
        .check(&m, 8)
        .is_ok());
    let e = plan("dp=4,pp=2,offload_activations=16")
        .check(&m, 8)
        .unwrap_err();
    assert!(e.to_string().contains("offload_activations=all"), "{e}");
    assert!(plan("dp=4,pp=2,offload_activations=all")
        .check(&m, 8)
        .is_ok());

    let a = plan("dp=8,offload_activations=12")
        .megatron_args(&m)
        .unwrap();
    let i = a
        .iter()
        .position(|x| x == "--cpu-offloading-num-layers")
        .unwrap();
    assert_eq!(a[i + 1], "12");
    // `--cpu-offloading` is no Megatron-LM 0.19 flag (set from the count).
    assert!(!a.iter().any(|x| x == "--cpu-offloading"));
    let none = plan("dp=8").megatron_args(&m).unwrap();
    assert!(!none.iter().any(|x| x.starts_with("--cpu-offloading")));
    assert!(plan("dp=8,offload_activations=all")
        .megatron_args(&m)
        .is_err());
}
