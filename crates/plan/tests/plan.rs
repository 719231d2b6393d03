//! Plan strings, validity reasons, stage layouts and Megatron flags.

use autoplan_graph::{resolve_model, ModelSpec};
use autoplan_plan::{
    AlgoMode, Algorithm, CpComm, Dim, Dispatcher, Invalid, MoeTpScheme, ParseError, PipelineSplit,
    PlacementPolicy, Plan, RankOrder, Recompute, RecomputeModules, Schedule, TpSpTransition, Zero,
};
use proptest::prelude::*;

fn model(name: &str) -> ModelSpec {
    resolve_model(name).unwrap()
}

#[test]
fn parses_every_key() {
    let p: Plan = "tp=8,pp=8,dp=16,mbs=2,recompute=full,recompute_layers=3,zero=1,sp=on,vpp=2,\
                   schedule=interleaved,ep=8,etp=2,cp=2,cp_comm=a2a,transition=all-to-all,\
                   moe_tp_scheme=scatter-gather,dispatcher=all-gather,algo=dbt,order=tp-dp-cp-pp,\
                   placement=balanced:2,first_stage_layers=5,last_stage_layers=6,\
                   pipeline_split=embedding+loss,tp_overlap=on,ep_overlap=true"
        .parse()
        .unwrap();
    let want = Plan {
        tp: 8,
        sp: true,
        cp: 2,
        cp_comm: CpComm::AllToAll,
        dp: 16,
        zero: Zero::stage(1),
        pp: 8,
        schedule: Schedule::Interleaved,
        vpp: 2,
        first_stage_layers: Some(5),
        last_stage_layers: Some(6),
        pipeline_split: PipelineSplit::EmbeddingLoss,
        ep: 8,
        moe_tp: 2,
        mbs: 2,
        recompute: Recompute::Full,
        recompute_modules: RecomputeModules::DEFAULT,
        recompute_layers: Some(3),
        tp_sp_transition: TpSpTransition::AllToAll,
        moe_tp_scheme: MoeTpScheme::ScatterGather,
        dispatcher: Dispatcher::AllGather,
        algo: AlgoMode::Fixed(Algorithm::DoubleBinaryTree),
        order: RankOrder([Dim::Tp, Dim::Dp, Dim::Cp, Dim::Pp]),
        placement: PlacementPolicy::Balanced { redundant: 2 },
        tp_overlap: true,
        ep_overlap: true,
        offload_optimizer: 0,
        offload_params: false,
        offload_activations: 0,
    };
    assert_eq!(p, want);
    assert_eq!(p.to_string().parse::<Plan>().unwrap(), p);
    // Absent keys keep the defaults; the empty string is the default plan.
    assert_eq!("".parse::<Plan>().unwrap(), Plan::default());
    assert_eq!(
        "tp=2".parse::<Plan>().unwrap(),
        Plan {
            tp: 2,
            ..Plan::default()
        }
    );
}

#[test]
fn errors_name_key_value_and_alternatives() {
    let e = "tp=8,recompute=sometimes".parse::<Plan>().unwrap_err();
    assert!(matches!(
        e,
        ParseError::BadValue { key: "recompute", ref value, .. } if value == "sometimes"
    ));
    assert!(e.to_string().contains("recompute") && e.to_string().contains("selective"));
    assert!(e.to_string().contains("mla_up_proj"), "{e}");
    assert!(matches!(
        "tp=0".parse::<Plan>(),
        Err(ParseError::BadValue { key: "tp", .. })
    ));
    assert!(matches!(
        "tq=2".parse::<Plan>(),
        Err(ParseError::UnknownKey { ref key, .. }) if key == "tq"
    ));
    assert_eq!(
        "tp=2,tp=4".parse::<Plan>(),
        Err(ParseError::DuplicateKey { key: "tp" })
    );
    assert!(matches!(
        "tp".parse::<Plan>(),
        Err(ParseError::NotKeyValue { .. })
    ));
    assert!(matches!(
        "order=tp-tp-dp-pp".parse::<Plan>(),
        Err(ParseError::BadValue { key: "order", .. })
    ));
    assert!(matches!(
        "zero=4".parse::<Plan>(),
        Err(ParseError::BadValue { key: "zero", .. })
    ));
    assert!(matches!(
        "algo=fastest".parse::<Plan>(),
        Err(ParseError::BadValue { key: "algo", .. })
    ));
}

#[test]
fn selective_recompute_takes_megatron_modules() {
    let p: Plan = "tp=2,sp=on,recompute=selective:moe_act+layernorm"
        .parse()
        .unwrap();
    assert_eq!(p.recompute, Recompute::Selective);
    assert_eq!(
        p.recompute_modules,
        RecomputeModules(RecomputeModules::LAYERNORM | RecomputeModules::MOE_ACT)
    );
    // Printed in Megatron's order; the default set is not printed.
    assert!(
        p.to_string()
            .contains("recompute=selective:layernorm+moe_act,"),
        "{p}"
    );
    assert_eq!(p.to_string().parse::<Plan>().unwrap(), p);
    let d: Plan = "recompute=selective".parse().unwrap();
    assert_eq!(d.recompute_modules, RecomputeModules::DEFAULT);
    assert!(d.to_string().contains("recompute=selective,"));
    assert_eq!(
        "recompute=selective:core_attn".parse::<Plan>().unwrap(),
        d,
        "core_attn alone is the default"
    );
    // Modules need selective granularity; each name is Megatron's and appears once.
    for bad in [
        "recompute=full:mlp",
        "recompute=selective:",
        "recompute=selective:attention",
        "recompute=selective:mlp+mlp",
    ] {
        assert!(
            matches!(
                bad.parse::<Plan>(),
                Err(ParseError::BadValue {
                    key: "recompute",
                    ..
                })
            ),
            "{bad}"
        );
    }
}

#[test]
fn recompute_modules_must_exist_in_the_model() {
    let llama = model("llama3-8b");
    let ds = model("deepseek-v3");
    let mixtral = model("mixtral-8x7b");
    let with = |s: &str| s.parse::<Plan>().unwrap();
    let err = |m: &ModelSpec, s: &str| match with(s).check(m, 8) {
        Err(Invalid::RecomputeModule { module, .. }) => module,
        other => panic!("{s}: {other:?}"),
    };
    assert_eq!(
        err(&llama, "dp=1,tp=8,recompute=selective:mla_up_proj"),
        "mla_up_proj"
    );
    assert_eq!(
        err(&llama, "dp=1,tp=8,recompute=selective:moe_act"),
        "moe_act"
    );
    assert_eq!(err(&llama, "dp=1,tp=8,recompute=selective:moe"), "moe");
    assert_eq!(
        err(
            &mixtral,
            "dp=1,tp=8,sp=on,recompute=selective:shared_experts"
        ),
        "shared_experts"
    );
    assert_eq!(
        err(&mixtral, "dp=1,tp=8,sp=on,recompute=selective:mlp"),
        "mlp"
    );
    assert_eq!(
        with("dp=1,tp=8,recompute=selective:layernorm+mlp").check(&llama, 8),
        Ok(())
    );
    // DeepSeek-V3's own choice (report §3.2.3: RMSNorm and MLA up-projection; §3.3.3: the
    // SwiGLU output) on its 61 blocks, 3 of them dense.
    let plan = with(
        "tp=1,pp=16,dp=128,ep=64,schedule=dualpipe,zero=1,\
         recompute=selective:layernorm+mla_up_proj+moe_act+shared_experts+mlp",
    );
    assert_eq!(plan.check(&ds, 2048), Ok(()));
    let msg = with("dp=1,tp=8,recompute=selective:mla_up_proj")
        .check(&llama, 8)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("mla_up_proj") && msg.contains("llama3-8b") && msg.contains("multi-latent")
    );
}

#[test]
fn dp_is_inferred_from_the_gpu_count() {
    let p = Plan::parse_for_gpus("tp=8,pp=4", 256).unwrap();
    assert_eq!(p.dp, 8);
    let p = Plan::parse_for_gpus("tp=8,pp=4,dp=2", 256).unwrap();
    assert_eq!(p.dp, 2); // given: kept (check() reports the mismatch)
    assert!(matches!(
        Plan::parse_for_gpus("tp=3", 256),
        Err(ParseError::BadValue { key: "dp", .. })
    ));
}

#[test]
fn check_gives_the_exact_reason() {
    let gpt = model("gpt3-175b"); // 96 blocks, 96 heads, GB 1536, seq 2048
    let ok: Plan = "tp=8,pp=8,dp=16,sp=on".parse().unwrap();
    assert_eq!(ok.check(&gpt, 1024), Ok(()));
    let with = |s: &str| s.parse::<Plan>().unwrap();
    assert_eq!(
        with("tp=8,pp=8,dp=8").check(&gpt, 1024),
        Err(Invalid::GpuCount {
            plan: 512,
            gpus: 1024
        })
    );
    assert_eq!(
        with("tp=64,pp=1,dp=1").check(&gpt, 64),
        Err(Invalid::TpHeads { tp: 64, heads: 96 })
    );
    assert_eq!(
        with("tp=8,pp=1,dp=5").check(&gpt, 40),
        Err(Invalid::Batch {
            global_batch: 1536,
            mbs: 1,
            dp: 5
        })
    );
    assert_eq!(
        with("tp=1,pp=128,dp=1").check(&gpt, 128),
        Err(Invalid::PpBlocks {
            pp: 128,
            blocks: 96
        })
    );
    assert_eq!(
        with("tp=8,pp=8,dp=16,vpp=2").check(&gpt, 1024),
        Err(Invalid::VppSchedule {
            vpp: 2,
            schedule: "1f1b"
        })
    );
    // 96 / 8 = 12 blocks per stage: 13 chunks cannot all have a block; 5 uneven chunks can.
    assert_eq!(
        with("tp=8,pp=8,dp=16,vpp=13,schedule=interleaved").check(&gpt, 1024),
        Err(Invalid::VppBlocks {
            stage: 0,
            blocks: 12,
            vpp: 13
        })
    );
    assert_eq!(
        with("tp=8,pp=8,dp=16,vpp=5,schedule=interleaved").check(&gpt, 1024),
        Ok(())
    );
    // 12 blocks per stage in 5 chunks: only `--pipeline-model-parallel-layout` says it.
    assert!(with("tp=8,pp=8,dp=16,vpp=5,schedule=interleaved")
        .megatron_args(&gpt)
        .unwrap()
        .contains(&"--pipeline-model-parallel-layout".to_string()));
    assert_eq!(
        with("tp=8,pp=8,dp=16,ep=2").check(&gpt, 1024),
        Err(Invalid::ExpertDegreesWithoutMoe {
            ep: 2,
            moe_tp: 1,
            model: "gpt3-175b".into()
        })
    );
    // 2048 is not a multiple of 2·cp for cp = 3 (683 tokens each would not balance).
    assert_eq!(
        with("tp=8,cp=3,pp=8,dp=16").check(&gpt, 3072),
        Err(Invalid::CpSeq {
            cp: 3,
            seq_len: 2048
        })
    );
    assert_eq!(
        with("tp=8,pp=8,dp=16,recompute_layers=2").check(&gpt, 1024),
        Err(Invalid::RecomputeLayersWithoutRecompute { layers: 2 })
    );
    assert_eq!(
        with("tp=8,pp=8,dp=16,schedule=dualpipe").check(&gpt, 1024),
        Ok(())
    );
    assert_eq!(
        with("tp=8,pp=1,dp=128,schedule=dualpipe").check(&gpt, 1024),
        Err(Invalid::DualPipePp { pp: 1 })
    );
    assert_eq!(
        with("tp=8,pp=8,dp=16,first_stage_layers=90").check(&gpt, 1024),
        Err(Invalid::UnevenStages {
            first: Some(90),
            last: None,
            blocks: 96,
            pp: 8
        })
    );

    // GQA: Llama 3 70B has 8 kv heads: tp 16 replicates each twice (allowed), tp 8 splits them;
    // FFN 28672 = 2^12·7 is not divisible by tp = 3... nor are the 64 heads.
    let llama = model("llama3-70b");
    assert_eq!(with("tp=16,pp=1,dp=8").check(&llama, 128), Ok(()));
    let mut odd = llama.clone();
    odd.attention = autoplan_graph::Attention::Gqa {
        kv_heads: 6,
        head_dim: 128,
    };
    assert_eq!(
        with("tp=4,pp=1,dp=32").check(&odd, 128),
        Err(Invalid::TpKvHeads { tp: 4, kv_heads: 6 })
    );

    // MoE: DeepSeek-V3 has 256 experts, expert FFN 2048, GB 15360.
    let ds = model("deepseek-v3");
    assert_eq!(
        with("tp=2,pp=16,dp=64,ep=64,sp=on").check(&ds, 2048),
        Ok(())
    );
    assert_eq!(
        with("tp=2,pp=16,dp=64,ep=3,sp=on").check(&ds, 2048),
        Err(Invalid::EpExperts {
            ep: 3,
            experts: 256
        })
    );
    assert_eq!(
        with("tp=2,pp=16,dp=64,ep=256,sp=on").check(&ds, 2048),
        Err(Invalid::Folding {
            moe_tp: 1,
            ep: 256,
            dense: 128
        })
    );
    assert_eq!(
        with("tp=2,pp=16,dp=64,ep=64").check(&ds, 2048),
        Err(Invalid::MoeTpNeedsSp { tp: 2 })
    );
}

#[test]
fn knobs_a_dense_model_has_no_use_for_are_invalid() {
    let llama = model("llama3-8b"); // 32 blocks, dense
    let with = |s: &str| Plan::parse_for_gpus(s, 8).unwrap();
    assert_eq!(with("tp=8").check(&llama, 8), Ok(()));
    assert!(matches!(
        with("tp=8,ep=2").check(&llama, 8),
        Err(Invalid::ExpertDegreesWithoutMoe { ep: 2, .. })
    ));
    assert!(matches!(
        with("tp=8,moe_tp=2").check(&llama, 8),
        Err(Invalid::ExpertDegreesWithoutMoe { moe_tp: 2, .. })
    ));
    for (plan, knob, value) in [
        ("tp=8,dispatcher=deepep", "dispatcher", "deepep"),
        ("tp=8,placement=balanced:1", "placement", "balanced:1"),
        ("tp=8,ep_overlap=on", "ep_overlap", "on"),
        (
            "tp=8,moe_tp_scheme=scatter-gather",
            "moe_tp_scheme",
            "scatter-gather",
        ),
    ] {
        let e = with(plan).check(&llama, 8).unwrap_err();
        assert_eq!(
            e,
            Invalid::MoeKnobWithoutMoe {
                knob,
                value: value.into(),
                model: "llama3-8b".into()
            },
            "{plan}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("{knob}={value} does not apply to llama3-8b")),
            "{msg}"
        );
    }
    // Their defaults are what every dense plan holds: fine, even spelled out.
    assert_eq!(
        with("tp=8,dispatcher=all-to-all,ep_overlap=off,placement=contiguous").check(&llama, 8),
        Ok(())
    );
    // On an MoE model they apply.
    let mixtral = model("mixtral-8x7b");
    assert_eq!(
        with("tp=1,ep=8,dispatcher=deepep,ep_overlap=on,placement=balanced:1").check(&mixtral, 8),
        Ok(())
    );
}

#[test]
fn recompute_layers_beyond_a_stage_are_invalid() {
    let llama = model("llama3-8b"); // 32 blocks
    let with = |s: &str| Plan::parse_for_gpus(s, 8).unwrap();
    assert_eq!(
        with("tp=8,recompute=full,recompute_layers=999").check(&llama, 8),
        Err(Invalid::RecomputeLayersExceedStage {
            layers: 999,
            max: 32,
            blocks: 32,
            pp: 1,
            vpp: 1
        })
    );
    assert_eq!(
        with("tp=8,recompute=full,recompute_layers=32").check(&llama, 8),
        Ok(())
    );
    // pp = 4: 8 blocks a stage; interleaved ×2: 4 per chunk.
    assert_eq!(
        with("tp=2,pp=4,recompute=full,recompute_layers=8").check(&llama, 8),
        Ok(())
    );
    assert!(matches!(
        with("tp=2,pp=4,recompute=full,recompute_layers=9").check(&llama, 8),
        Err(Invalid::RecomputeLayersExceedStage { max: 8, .. })
    ));
    let i = "tp=2,pp=4,schedule=interleaved,vpp=2,recompute=full,recompute_layers";
    assert_eq!(with(&format!("{i}=4")).check(&llama, 8), Ok(()));
    let e = with(&format!("{i}=5")).check(&llama, 8).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("recompute_layers=5 is more than the 4 blocks of the largest model chunk"),
        "{e}"
    );
}

#[test]
fn stage_layout_examples() {
    let mut m = model("gpt3-175b");
    let p = |s: &str| s.parse::<Plan>().unwrap();
    let l = p("pp=8").stage_blocks(&m).unwrap();
    assert_eq!((0..8).map(|s| l.blocks(s)).collect::<Vec<_>>(), [12; 8]);
    m.layers = 61; // DeepSeek-V3-like: 61 = 6·8 + 13 → first 6, last 7
    let l = p("pp=8").stage_blocks(&m).unwrap();
    assert_eq!(
        (0..8).map(|s| l.blocks(s)).collect::<Vec<_>>(),
        [6, 8, 8, 8, 8, 8, 8, 7]
    );
    m.layers = 10; // 10 blocks on 8 stages: middle 2 each would need 12; fall back
    let l = p("pp=8").stage_blocks(&m).unwrap();
    assert_eq!(
        (0..8).map(|s| l.blocks(s)).collect::<Vec<_>>(),
        [1, 2, 2, 1, 1, 1, 1, 1]
    );
    assert_eq!(l.max_blocks(), 2);
    m.layers = 15; // 15 = 7·2 + 1 with no middle stage: the last takes the extra block
    let l = p("pp=2").stage_blocks(&m).unwrap();
    assert_eq!((l.blocks(0), l.blocks(1)), (7, 8));
    m.layers = 96;
    let l = p("pp=8,first_stage_layers=6,last_stage_layers=6")
        .stage_blocks(&m)
        .unwrap();
    assert_eq!(
        (0..8).map(|s| l.blocks(s)).collect::<Vec<_>>(),
        [6, 14, 14, 14, 14, 14, 14, 6]
    );
}

#[test]
fn megatron_flags_of_a_gpt3_plan() {
    let m = model("gpt3-175b");
    let plan: Plan =
        "tp=8,pp=8,dp=16,mbs=1,sp=on,recompute=selective,zero=1,schedule=interleaved,vpp=2"
            .parse()
            .unwrap();
    plan.check(&m, 1024).unwrap();
    let args = plan.megatron_args(&m).unwrap().join(" ");
    assert_eq!(
        args,
        "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 \
         --context-parallel-size 1 --micro-batch-size 1 --global-batch-size 1536 \
         --seq-length 2048 --num-layers-per-virtual-pipeline-stage 6 \
         --recompute-granularity selective --sequence-parallel --use-distributed-optimizer \
         --overlap-grad-reduce --overlap-param-gather"
    );
    let unsupported = "tp=8,pp=8,dp=16,schedule=zero-bubble"
        .parse::<Plan>()
        .unwrap()
        .megatron_args(&m)
        .unwrap_err();
    assert_eq!(unsupported.knob, "schedule");
    let full: Plan = "tp=8,pp=8,dp=16,recompute=full,recompute_layers=2"
        .parse()
        .unwrap();
    let args = full.megatron_args(&m).unwrap().join(" ");
    assert!(args.contains(
        "--recompute-granularity full --recompute-method block --recompute-num-layers 2"
    ));
    let ds = model("deepseek-v3");
    let moe: Plan = "tp=2,pp=16,dp=64,ep=64,sp=on,zero=1".parse().unwrap();
    let args = moe.megatron_args(&ds).unwrap().join(" ");
    assert!(args.contains("--expert-model-parallel-size 64 --expert-tensor-parallel-size 1"));
    assert!(args.contains("--moe-token-dispatcher-type alltoall"));
    let deepep: Plan = "tp=2,pp=16,dp=64,ep=64,sp=on,zero=1,dispatcher=deepep"
        .parse()
        .unwrap();
    let args = deepep.megatron_args(&ds).unwrap().join(" ");
    assert!(args.contains("--moe-token-dispatcher-type flex --moe-enable-deepep"));
    // (Not `layernorm`: DeepSeek-V3 trains in FP8 with delayed scaling, which Megatron-Core
    // refuses with `layernorm` or `moe_act` recomputed.)
    let modules: Plan = "tp=2,pp=16,dp=64,ep=64,sp=on,recompute=selective:mla_up_proj+mlp"
        .parse()
        .unwrap();
    let args = modules.megatron_args(&ds).unwrap().join(" ");
    assert!(args.contains("--recompute-granularity selective --recompute-modules mla_up_proj mlp"));
    // 61 blocks on 16 stages: 14 middle stages of 4, first 2, last 3.
    assert!(
        args.contains("--decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 3")
    );
}

#[test]
fn sharding_modes_parse_check_and_export() {
    let gpt = model("gpt3-175b"); // 96 blocks, GB 1536
    let with = |s: &str| s.parse::<Plan>().unwrap();
    let p = with("tp=8,pp=8,dp=16,zero=3-noreshard:8");
    assert_eq!(p.zero, Zero::NORESHARD.hsdp(8));
    assert_eq!(p.to_string().parse::<Plan>().unwrap(), p);
    assert!(p.to_string().contains("zero=3-noreshard:8"));
    assert_eq!(p.check(&gpt, 1024), Ok(()));
    assert_eq!(with("tp=8,pp=8,dp=16,zero=fsdp").zero, Zero::stage(3));
    assert_eq!(
        with("tp=8,pp=8,dp=16,zero=hsdp:4").zero,
        Zero::stage(3).hsdp(4)
    );
    // The shard group must tile dp·cp and be smaller than it.
    for (plan, group, dp_cp) in [
        ("tp=8,pp=8,dp=16,zero=3:16", 16, 16),
        ("tp=8,pp=8,dp=16,zero=3:6", 6, 16),
        ("tp=8,pp=4,dp=16,cp=2,zero=1:64", 64, 32),
    ] {
        let gpus = with(plan).gpus() as u32;
        assert_eq!(
            with(plan).check(&gpt, gpus),
            Err(Invalid::ShardGroup { group, dp_cp }),
            "{plan}"
        );
    }
    for bad in ["zero=0:8", "zero=4", "zero=3:1", "zero=2-noreshard"] {
        let e = format!("tp=8,pp=8,dp=16,{bad}")
            .parse::<Plan>()
            .unwrap_err();
        assert!(
            matches!(e, ParseError::BadValue { key: "zero", .. }),
            "{bad}: {e}"
        );
    }
    // Megatron: stage-1 HSDP is the distributed optimizer in dp·cp/G instances; FSDP without
    // resharding is Torch-FSDP2's no-reshard flag (pp = 1, ep = 1 only).
    let args = with("tp=8,pp=8,dp=16,zero=1:4")
        .megatron_args(&gpt)
        .unwrap()
        .join(" ");
    assert!(args.contains("--use-distributed-optimizer"), "{args}");
    assert!(
        args.contains("--num-distributed-optimizer-instances 4"),
        "{args}"
    );
    let m8 = model("llama3-8b");
    let nr = with("tp=8,dp=8,zero=3-noreshard");
    let args = nr.megatron_args(&m8).unwrap().join(" ");
    assert!(
        args.contains("--use-torch-fsdp2 --torch-fsdp2-no-reshard-after-forward"),
        "{args}"
    );
    assert!(!args.contains("--overlap-param-gather"), "{args}");
    let e = with("tp=8,pp=8,dp=16,zero=3-noreshard")
        .megatron_args(&gpt)
        .unwrap_err();
    assert_eq!(e.knob, "zero");
    let e = with("tp=8,pp=8,dp=16,zero=3:8")
        .megatron_args(&gpt)
        .unwrap_err();
    assert_eq!(e.knob, "zero");
}

#[test]
fn megatron_accounts_for_embedding_and_loss_when_the_layout_matches() {
    // Qwen3-235B-A22B (94 blocks) on pp = 8, vpp = 4, as the Megatron MoE model zoo runs it:
    // (94 + 2) / 32 = 3 blocks per chunk; the first and last stages have 11 blocks.
    let m = model("qwen3-235b-a22b");
    let p: Plan = "tp=4,pp=8,dp=8,ep=8,sp=on,schedule=interleaved,vpp=4"
        .parse()
        .unwrap();
    assert_eq!(p.check(&m, 256), Ok(()));
    let l = p.stage_blocks(&m).unwrap();
    assert_eq!(
        (0..8).map(|s| l.blocks(s)).collect::<Vec<_>>(),
        [11, 12, 12, 12, 12, 12, 12, 11]
    );
    let args = p.megatron_args(&m).unwrap().join(" ");
    assert!(
        args.contains("--num-virtual-stages-per-pipeline-rank 4"),
        "{args}"
    );
    assert!(args.contains(
        "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"
    ));
    assert!(!args.contains("--decoder-first-pipeline-num-layers"));
}

#[test]
fn pipeline_split_counts_the_embedding_and_loss_as_megatron_does() {
    // Qwen3-235B-A22B on pp = 32, vpp = 3 (the ModelZoo's intra-node EP 8 run): 94 blocks
    // leave stage 0 two blocks for three chunks; with the embedding and the loss counted,
    // (94 + 2)/96 = one slot per chunk, stage 0's first chunk the embedding alone.
    let m = model("qwen3-235b-a22b");
    let base = "tp=2,sp=on,pp=32,dp=4,ep=8,schedule=interleaved,vpp=3,mbs=1";
    let blocks: Plan = base.parse().unwrap();
    assert_eq!(
        blocks.check(&m, 256),
        Err(Invalid::VppBlocks {
            stage: 0,
            blocks: 2,
            vpp: 3
        })
    );
    let p: Plan = format!("{base},pipeline_split=embedding+loss")
        .parse()
        .unwrap();
    assert_eq!(p.check(&m, 256), Ok(()));
    let l = p.stage_blocks(&m).unwrap();
    assert_eq!((l.blocks(0), l.blocks(1), l.blocks(31)), (2, 3, 2));
    assert_eq!(l.total(), 94);
    assert_eq!((l.slots(0), l.slots(15), l.slots(31)), (3, 3, 3));
    let chunks = |s| (0..3).map(|c| l.chunk_blocks(s, c)).collect::<Vec<_>>();
    assert_eq!(chunks(0), [0.0, 1.0, 1.0]);
    assert_eq!(chunks(1), [1.0, 1.0, 1.0]);
    assert_eq!(chunks(31), [1.0, 1.0, 0.0]);
    let args = p.megatron_args(&m).unwrap().join(" ");
    assert!(args.contains(
        "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"
    ));
    assert!(
        args.contains("--num-virtual-stages-per-pipeline-rank 3"),
        "{args}"
    );
    // One part counted: 95 slots divide on pp = 5 (19 each), the loss stage holds 18.
    let q: Plan = "tp=2,sp=on,pp=5,dp=4,ep=8,mbs=1,pipeline_split=loss"
        .parse()
        .unwrap();
    let l = q.stage_blocks(&m).unwrap();
    assert_eq!((l.blocks(0), l.blocks(2), l.blocks(4)), (19, 19, 18));
    let args = q.megatron_args(&m).unwrap().join(" ");
    assert!(
        args.contains("--account-for-loss-in-pipeline-split"),
        "{args}"
    );
    assert!(!args.contains("--account-for-embedding"), "{args}");
    // Megatron's rules: the slots must divide into pp·vpp chunks, and no first/last counts.
    for bad in [
        "tp=2,sp=on,pp=8,dp=16,ep=8,schedule=interleaved,vpp=5,pipeline_split=embedding+loss",
        "tp=2,sp=on,pp=8,dp=16,ep=8,first_stage_layers=10,pipeline_split=embedding+loss",
    ] {
        let p: Plan = bad.parse().unwrap();
        let e = p.check(&m, 256).unwrap_err();
        assert!(matches!(e, Invalid::PipelineSplit { .. }), "{bad}: {e}");
        assert!(e.to_string().contains("96 slots"), "{e}");
    }
}

fn any_plan() -> impl Strategy<Value = Plan> {
    let degrees = (
        1u32..65,
        1u32..9,
        1u32..65,
        1u32..33,
        1u32..17,
        1u32..5,
        1u32..9,
        1u32..5,
    );
    let knobs = (
        any::<bool>(),
        proptest::sample::select(vec![
            Zero::stage(0),
            Zero::stage(1),
            Zero::stage(2),
            Zero::stage(3),
            Zero::NORESHARD,
            Zero::stage(1).hsdp(2),
            Zero::stage(2).hsdp(8),
            Zero::stage(3).hsdp(4),
            Zero::NORESHARD.hsdp(16),
        ]),
        prop_oneof![
            Just(Recompute::None),
            Just(Recompute::Selective),
            Just(Recompute::Full)
        ],
        prop_oneof![
            Just(Schedule::OneF1B),
            Just(Schedule::Interleaved),
            Just(Schedule::ZeroBubble),
            Just(Schedule::DualPipe)
        ],
        proptest::option::of(0u32..20),
        proptest::option::of(0u32..20),
        proptest::option::of(1u32..20),
        any::<bool>(),
        any::<bool>(),
        proptest::sample::select(vec![
            PipelineSplit::Blocks,
            PipelineSplit::Embedding,
            PipelineSplit::Loss,
            PipelineSplit::EmbeddingLoss,
        ]),
    );
    let comm = (
        prop_oneof![
            Just(CpComm::Ring),
            Just(CpComm::AllToAll),
            Just(CpComm::AllGather),
            (2u32..64).prop_map(|a2a| CpComm::Hierarchical { a2a })
        ],
        any::<bool>(),
        any::<bool>(),
        proptest::sample::select(vec![
            Dispatcher::AllToAll,
            Dispatcher::AllGather,
            Dispatcher::DeepEp,
        ]),
        prop_oneof![
            Just(AlgoMode::Cheapest),
            Just(AlgoMode::NcclLike),
            Just(AlgoMode::NcclTuner),
            proptest::sample::select(Algorithm::ALL.to_vec()).prop_map(AlgoMode::Fixed)
        ],
        Just([Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp]).prop_shuffle(),
        proptest::option::of(0u32..4),
        1u8..128,
        0u8..=100,
        proptest::bool::ANY,
    );
    let acts = prop_oneof![
        Just(0u32),
        1u32..64,
        Just(autoplan_plan::offload_activations::ALL)
    ];
    (degrees, knobs, comm, acts).prop_map(
        |((tp, cp, dp, pp, ep, moe_tp, mbs, vpp), knobs, comm, offload_activations)| {
            let (sp, zero, recompute, schedule, first, last, rl, tpo, epo, split) = knobs;
            let (cpa, tra, sg, ag, algo, order, bal, modules, offload_optimizer, offload_params) =
                comm;
            Plan {
                tp,
                sp,
                cp,
                cp_comm: cpa,
                dp,
                zero,
                pp,
                schedule,
                vpp,
                first_stage_layers: first,
                last_stage_layers: last,
                pipeline_split: split,
                ep,
                moe_tp,
                mbs,
                recompute,
                // The set is part of the plan only under selective recompute.
                recompute_modules: if recompute == Recompute::Selective {
                    RecomputeModules(modules)
                } else {
                    RecomputeModules::DEFAULT
                },
                recompute_layers: rl,
                tp_sp_transition: if tra {
                    TpSpTransition::AllToAll
                } else {
                    TpSpTransition::AllReduceSlice
                },
                moe_tp_scheme: if sg {
                    MoeTpScheme::ScatterGather
                } else {
                    MoeTpScheme::GroupAllToAll
                },
                dispatcher: ag,
                algo,
                order: RankOrder(order),
                placement: bal.map_or(PlacementPolicy::Contiguous, |r| PlacementPolicy::Balanced {
                    redundant: r,
                }),
                tp_overlap: tpo,
                ep_overlap: epo,
                offload_optimizer,
                offload_params,
                offload_activations,
            }
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn display_round_trips(p in any_plan()) {
        prop_assert_eq!(p.to_string().parse::<Plan>().unwrap(), p);
    }

    #[test]
    fn stage_layout_covers_every_block_once(
        blocks in 1u32..130, pp in 1u32..40, first in proptest::option::of(1u32..30),
        last in proptest::option::of(1u32..30),
    ) {
        let mut m = model("llama3-8b");
        m.layers = blocks;
        let p = Plan { pp, first_stage_layers: first, last_stage_layers: last, ..Plan::default() };
        if let Some(l) = p.stage_blocks(&m) {
            prop_assert_eq!(l.total(), blocks);
            prop_assert!((0..pp).all(|s| l.blocks(s) >= 1));
            prop_assert_eq!(l.max_blocks(), (0..pp).map(|s| l.blocks(s)).max().unwrap());
            if first.is_none() && last.is_none() {
                // Default split: the smallest possible largest stage.
                prop_assert_eq!(l.max_blocks(), blocks.div_ceil(pp));
            }
        } else {
            let reason = p.check(&m, pp);
            let expected = matches!(
                reason,
                Err(Invalid::PpBlocks { .. } | Invalid::UnevenStages { .. })
            );
            prop_assert!(expected, "{:?}", reason);
        }
    }
}

#[test]
fn cp_modes_parse_print_check_and_emit() {
    let m = model("llama3-8b"); // 32 heads, 8 kv heads
    let plan = |s: &str| s.parse::<Plan>().unwrap();
    // Names both ways, Megatron's spellings accepted.
    for (s, c) in [
        ("p2p", CpComm::Ring),
        ("a2a", CpComm::AllToAll),
        ("all_gather", CpComm::AllGather),
        ("a2a+p2p:4", CpComm::Hierarchical { a2a: 4 }),
    ] {
        let p = plan(&format!("tp=1,cp=8,dp=1,cp_comm={s}"));
        assert_eq!(p.cp_comm, c, "{s}");
        assert_eq!(p.to_string().parse::<Plan>().unwrap(), p, "{s}");
    }
    assert!("tp=1,cp=8,cp_comm=a2a+p2p:1".parse::<Plan>().is_err());
    assert!("tp=1,cp=8,cp_comm=a2a+p2p".parse::<Plan>().is_err());
    // Ulysses: heads and kv heads divisible by tp·cp.
    let e = plan("tp=4,cp=4,dp=4,cp_comm=a2a")
        .check(&m, 64)
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("a2a needs kv_heads (8) divisible by tp·cp (16)"),
        "{e}"
    );
    assert!(plan("tp=2,cp=4,dp=8,cp_comm=a2a").check(&m, 64).is_ok());
    assert!(plan("tp=4,cp=4,dp=4,cp_comm=ring").check(&m, 64).is_ok());
    assert!(plan("tp=4,cp=4,dp=4,cp_comm=all-gather")
        .check(&m, 64)
        .is_ok());
    // a2a+p2p: the a2a level 2..cp/2 dividing cp, Ulysses' rule on it.
    assert!(plan("tp=4,cp=4,dp=4,cp_comm=a2a+p2p:2")
        .check(&m, 64)
        .is_ok());
    let e = plan("tp=4,cp=8,dp=2,cp_comm=a2a+p2p:4")
        .check(&m, 64)
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("a2a+p2p needs kv_heads (8) divisible by tp·a2a (16)"),
        "{e}"
    );
    for bad in ["a2a+p2p:8", "a2a+p2p:3"] {
        let e = plan(&format!("tp=1,cp=8,dp=8,cp_comm={bad}")).check(&m, 64);
        assert!(
            matches!(e, Err(Invalid::CpHierarchy { .. })),
            "{bad}: {e:?}"
        );
    }
    // Megatron flags: TE's `all_gather` spelling, the hierarchical sizes.
    let args = plan("tp=1,cp=8,dp=8,cp_comm=a2a+p2p:2")
        .megatron_args(&m)
        .unwrap()
        .join(" ");
    assert!(
        args.contains("--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 4"),
        "{args}"
    );
    let args = plan("tp=1,cp=8,dp=8,cp_comm=all-gather")
        .megatron_args(&m)
        .unwrap()
        .join(" ");
    assert!(args.contains("--cp-comm-type all_gather"), "{args}");
}
