//! The capability table's refusals and the Megatron export of layouts only
//! `--pipeline-model-parallel-layout` expresses.

use autoplan_plan::{Framework, Plan};

fn model(name: &str) -> autoplan_graph::ModelSpec {
    autoplan_graph::resolve_model(name).expect("bundled model")
}

#[test]
fn ragged_virtual_stages_export_as_a_layout() {
    // DeepSeek-V3: 61 blocks on 2 stages, 4 virtual stages each (the issue's #1), with its
    // MTP module on the last stage; 120 micro-batches (a multiple of pp).
    let m = model("deepseek-v3");
    let plan: Plan = "tp=1,pp=2,dp=128,ep=64,mbs=1,schedule=interleaved,vpp=4,zero=1"
        .parse()
        .expect("plan");
    assert_eq!(plan.check(&m, 256), Ok(()));
    let args = plan.megatron_args(&m).expect("exports");
    let i = args
        .iter()
        .position(|a| a == "--pipeline-model-parallel-layout")
        .expect("a layout");
    let layout = &args[i + 1];
    let stages: Vec<&str> = layout.split('|').collect();
    assert_eq!(stages.len(), 8, "{layout}");
    assert_eq!(layout.matches('t').count(), 61, "{layout}");
    assert!(
        stages[0].starts_with('E') && stages[7].ends_with("mL"),
        "{layout}"
    );
    assert!(!args.iter().any(|a| a.starts_with("--num-virtual-stages")
        || a.starts_with("--num-layers-per-virtual")
        || a.starts_with("--decoder-first")));
}

#[test]
fn the_export_refuses_with_the_tables_reason() {
    let m = model("deepseek-v3");
    let plan: Plan = "tp=1,pp=16,dp=128,ep=64,mbs=1,schedule=dualpipe,recompute=full,zero=1"
        .parse()
        .expect("plan");
    let r = Framework::default().check(&plan, &m).expect_err("DualPipe");
    let e = plan.megatron_args(&m).expect_err("not exported");
    assert_eq!(e.reason, r.to_string());
    assert!(e
        .reason
        .starts_with("Megatron-Core 0.19 cannot run this pipeline schedule"));
    // Another framework is not a Megatron version.
    assert!(plan.megatron_args_for(&m, Framework::TorchTitan).is_err());
    // torchtitan runs DualPipe (as DualPipeV) with FSDP2, which under PyTorch's pipelining
    // gathers and reduces once per step (zero=1), not per micro-batch (zero=3), and not full
    // recompute with its EP overlap.
    // (DeepSeek-V3 trains in FP8 with block scaling, which torchtitan has not: its Float8 is
    // tensorwise current scaling or MXFP8, frameworks.md §2.5.)
    let r = Framework::TorchTitan
        .check(&plan, &m)
        .expect_err("precision");
    assert_eq!(r.setting(), "precision=fp8-block");
    let mut training = m.training.clone();
    training.precision = autoplan_graph::Precision::Bf16;
    let m = m.with_training(training).expect("bf16");
    assert_eq!(Framework::TorchTitan.check(&plan, &m), Ok(()));
    let fsdp = Plan {
        zero: autoplan_plan::Zero::parse("3").expect("zero"),
        ..plan
    };
    let r = Framework::TorchTitan
        .check(&fsdp, &m)
        .expect_err("zero=3 with PP");
    assert!(
        r.source.contains("FSDP2") && r.source.contains("pipelining/stage.py"),
        "{r}"
    );
    // Without PP it is the other way round.
    let flat: Plan = "tp=1,dp=2048,ep=64,mbs=1,recompute=full,zero=1"
        .parse()
        .expect("plan");
    assert!(Framework::TorchTitan.check(&flat, &m).is_err());
    let flat3 = Plan {
        zero: autoplan_plan::Zero::parse("3").expect("zero"),
        ..flat
    };
    assert_eq!(Framework::TorchTitan.check(&flat3, &m), Ok(()));
    let overlap = Plan {
        ep_overlap: true,
        ..plan
    };
    let r = Framework::TorchTitan
        .check(&overlap, &m)
        .expect_err("recompute");
    assert!(
        r.message().contains("torchtitan 0.2.2 cannot overlap EP"),
        "{r}"
    );
}

#[test]
fn framework_names_parse_and_print_back() {
    for s in [
        "megatron-core",
        "megatron-core@0.14",
        "torchtitan",
        "deepspeed",
        "any",
    ] {
        let f: Framework = s.parse().expect(s);
        assert_eq!(f.spec().parse::<Framework>(), Ok(f));
    }
    assert_eq!(
        "megatron".parse(),
        Ok(Framework::MegatronCore { minor: 19 })
    );
    assert_eq!(
        "megatron-core@0.15.1".parse(),
        Ok(Framework::MegatronCore { minor: 15 })
    );
    assert!("megatron-core@1.0".parse::<Framework>().is_err());
    assert!("torchtitan@0.3".parse::<Framework>().is_err());
    assert!("jax".parse::<Framework>().unwrap_err().contains("expected"));
}
