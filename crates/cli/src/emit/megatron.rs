//! `--emit megatron`: the flags of `Plan::megatron_args_for` (autoplan-plan's `megatron.rs`,
//! one `--flag value` a line), and [`parse`], which reads them back into the plan.

use autoplan_graph::ModelSpec;
use autoplan_plan::knob::{Context, CP_COMMS, DISPATCHERS};
use autoplan_plan::{
    CpComm, Dim, Dispatcher, Framework, PipelineSplit, Plan, RankOrder, Recompute,
    RecomputeModules, Schedule, Zero,
};

use super::{admit, layout_from_stages, ExportError};

/// The Megatron-LM flags of `plan` for `model` under `framework` (a Megatron-Core version; any
/// other framework means the default version), one `--flag value` a line, continued
/// shell-style. `mnnvl`: the cluster's NVLink domain spans several nodes (`Plan::
/// megatron_args_on`: the flex dispatcher's HybridEP backend).
pub fn emit(
    plan: &Plan,
    model: &ModelSpec,
    framework: Framework,
    mnnvl: bool,
) -> Result<String, ExportError> {
    let version = match framework {
        f @ Framework::MegatronCore { .. } => f,
        _ => Framework::default(),
    };
    admit(plan, model, version, mnnvl)?;
    let flags =
        plan.megatron_args_on(model, version, mnnvl)
            .map_err(|e| ExportError::Inexpressible {
                framework: version,
                knob: e.knob,
                value: e.value,
                reason: "Megatron-LM has no flag for it",
            })?;
    let mut lines: Vec<String> = Vec::new();
    for f in flags {
        match lines.last_mut() {
            Some(l) if !f.starts_with("--") => {
                l.push(' ');
                l.push_str(&f);
            }
            _ => lines.push(f),
        }
    }
    let env = if plan.zero.shards_grads() || plan.ep_overlap && plan.ep > 1 {
        // FSDP asserts the variable is not 1, the EP overlap wants more than one connection
        // (args.py @ core_v0.19.0:L1014-1015,L1143-1144; frameworks.md §1.3, §1.6).
        "# environment: CUDA_DEVICE_MAX_CONNECTIONS unset (FSDP and the EP overlap need more \
         than one connection)\n"
    } else if plan.tp > 1 || plan.cp > 1 {
        // TP or CP on Hopper and earlier asserts it (args.py @ core_v0.19.0:L1413-1439;
        // frameworks.md §1.3); harmless on Blackwell.
        "# environment: CUDA_DEVICE_MAX_CONNECTIONS=1\n"
    } else {
        ""
    };
    Ok(format!("{env}{}\n", lines.join(" \\\n  ")))
}

/// [`emit`] for `plan` on `cluster`: the flex dispatcher's backend by its NVLink domain
/// (`mnnvl`), and `UB_SKIPMC=1` where the plan overlaps TP communication with the GEMMs
/// (`--tp-comm-overlap`) on nodes without NVLink SHARP: Transformer Engine's userbuffers
/// assert CUDA multicast unless told to use CUDA IPC ("Launch app with UB_SKIPMC=1 to try
/// CUDA IPC instead", `initialize_ub`, `pytorch/module/base.py` @ transformer-engine 2.9.0
/// L183-187); multicast objects are the NVSwitch's in-network reduction (NVLS), which a cluster
/// file states as `in_switch_reduction` (A100 and PCIe nodes have none).
pub fn emit_on(
    plan: &Plan,
    model: &ModelSpec,
    framework: Framework,
    cluster: &autoplan_cluster::Cluster,
) -> Result<String, ExportError> {
    let text = emit(plan, model, framework, cluster.multi_node_nvlink())?;
    let ub = words(&text).iter().any(|w| w == "--tp-comm-overlap");
    Ok(if ub && !cluster.node.in_switch_reduction {
        format!(
            "# Transformer Engine's TP overlap without CUDA multicast (no NVLink SHARP on \
             these nodes): CUDA IPC\n# environment: UB_SKIPMC=1\n{text}"
        )
    } else {
        text
    })
}

/// The environment an export asks for (`# environment: VAR=VALUE` lines).
pub fn environment(text: &str) -> std::collections::BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# environment: "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The flags and values of an export, comments and line continuations dropped.
pub fn words(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.split_whitespace())
        .filter(|w| *w != "\\")
        .map(String::from)
        .collect()
}

/// The plan Megatron-LM flags describe, for `model` on `gpus` GPUs (the flags carry no world
/// size: `dp` is what the GPUs leave). The inverse of [`emit`]; an unknown flag is an error.
pub fn parse(text: &str, model: &ModelSpec, gpus: u32) -> Result<Plan, String> {
    let owned = words(text);
    let words: Vec<&str> = owned.iter().map(String::as_str).collect();
    // (flag, its values) in order.
    let mut flags: Vec<(&str, Vec<&str>)> = Vec::new();
    for w in &words {
        if w.starts_with("--") {
            flags.push((w, Vec::new()));
        } else if let Some((_, v)) = flags.last_mut() {
            v.push(w);
        } else {
            return Err(format!("`{w}` before the first flag"));
        }
    }
    let get = |f: &str| flags.iter().find(|(k, _)| *k == f).map(|(_, v)| v.clone());
    let num = |f: &str, default: u32| -> Result<u32, String> {
        match get(f) {
            None => Ok(default),
            Some(v) => v
                .first()
                .and_then(|x| x.parse().ok())
                .ok_or_else(|| format!("{f}: expected a number")),
        }
    };
    let has = |f: &str| get(f).is_some();
    let mut p = Plan {
        tp: num("--tensor-model-parallel-size", 1)?,
        pp: num("--pipeline-model-parallel-size", 1)?,
        cp: num("--context-parallel-size", 1)?,
        ep: num("--expert-model-parallel-size", 1)?,
        moe_tp: num("--expert-tensor-parallel-size", 1)?,
        mbs: num("--micro-batch-size", 1)?,
        sp: has("--sequence-parallel"),
        tp_overlap: has("--tp-comm-overlap"),
        ep_overlap: has("--overlap-moe-expert-parallel-comm"),
        ..Plan::default()
    };
    let per = u64::from(p.tp) * u64::from(p.cp) * u64::from(p.pp);
    if per == 0 || !u64::from(gpus).is_multiple_of(per) {
        return Err(format!("{gpus} GPUs do not divide by tp·cp·pp = {per}"));
    }
    p.dp = (u64::from(gpus) / per) as u32;
    if num("--global-batch-size", 0)? != model.training.global_batch {
        return Err(format!(
            "--global-batch-size: the model's is {}",
            model.training.global_batch
        ));
    }
    if num("--seq-length", 0)? != model.training.seq_len {
        return Err(format!(
            "--seq-length: the model's is {}",
            model.training.seq_len
        ));
    }
    stages_from_flags(&mut p, model, &get, &num)?;
    recompute_from_flags(&mut p, &get, &num)?;
    // Sharding: the distributed optimizer (HSDP by its instances), Megatron-FSDP strategies,
    // Torch-FSDP2 without resharding.
    p.zero = if has("--use-distributed-optimizer") {
        let instances = num("--num-distributed-optimizer-instances", 1)?;
        Zero::stage(1).hsdp(if has("--num-distributed-optimizer-instances") {
            p.dp * p.cp / instances.max(1)
        } else {
            0
        })
    } else if has("--use-torch-fsdp2") && has("--torch-fsdp2-no-reshard-after-forward") {
        Zero::NORESHARD
    } else if has("--use-megatron-fsdp") {
        if get("--ckpt-format").as_deref() != Some(&["fsdp_dtensor"]) {
            return Err("--use-megatron-fsdp without --ckpt-format fsdp_dtensor".into());
        }
        match get("--data-parallel-sharding-strategy").as_deref() {
            Some(["optim_grads"]) => Zero::stage(2),
            Some(["optim_grads_params"]) => Zero::stage(3),
            other => return Err(format!("--data-parallel-sharding-strategy {other:?}")),
        }
    } else {
        Zero::NONE
    };
    p.offload_optimizer = offload_from_flags(&get, &has)?;
    p.offload_activations = activation_offload_from_flags(&get)?;
    if let Some(v) = get("--cp-comm-type") {
        p.cp_comm = match v.as_slice() {
            ["a2a+p2p"] => {
                let sizes = get("--hierarchical-context-parallel-sizes").unwrap_or_default();
                let a2a = sizes
                    .first()
                    .and_then(|x| x.parse().ok())
                    .ok_or("--hierarchical-context-parallel-sizes: expected the a2a size")?;
                CpComm::Hierarchical { a2a }
            }
            [name] => CP_COMMS
                .0
                .iter()
                .find(|n| n.megatron == Some(name))
                .map(|n| n.value)
                .ok_or_else(|| format!("--cp-comm-type {name}"))?,
            _ => return Err("--cp-comm-type: one value".into()),
        };
    }
    if let Some(v) = get("--moe-token-dispatcher-type") {
        p.dispatcher = DISPATCHERS
            .0
            .iter()
            .find(|n| v.first().is_some_and(|x| n.megatron == Some(x)))
            .map(|n| n.value)
            .ok_or_else(|| format!("--moe-token-dispatcher-type {v:?}"))?;
        // DeepEP's backend, or HybridEP's on a multi-node NVLink domain (`megatron_args_on`).
        let backend = get("--moe-flex-dispatcher-backend");
        let priced = has("--moe-enable-deepep")
            || matches!(backend.as_deref(), Some(["deepep"] | ["hybridep"]));
        if p.dispatcher == Dispatcher::DeepEp && !priced {
            return Err(
                "flex without --moe-enable-deepep or --moe-flex-dispatcher-backend \
                 deepep|hybridep: autoplan prices those backends only"
                    .into(),
            );
        }
    }
    if has("--use-tp-pp-dp-mapping") {
        p.order = RankOrder([Dim::Tp, Dim::Cp, Dim::Pp, Dim::Dp]);
    }
    const KNOWN: &[&str] = &[
        "--tensor-model-parallel-size",
        "--pipeline-model-parallel-size",
        "--context-parallel-size",
        "--expert-model-parallel-size",
        "--expert-tensor-parallel-size",
        "--micro-batch-size",
        "--global-batch-size",
        "--seq-length",
        "--sequence-parallel",
        "--tp-comm-overlap",
        "--overlap-moe-expert-parallel-comm",
        "--pipeline-model-parallel-layout",
        "--account-for-embedding-in-pipeline-split",
        "--account-for-loss-in-pipeline-split",
        "--decoder-first-pipeline-num-layers",
        "--decoder-last-pipeline-num-layers",
        "--num-layers-per-virtual-pipeline-stage",
        "--num-virtual-stages-per-pipeline-rank",
        "--recompute-granularity",
        "--recompute-modules",
        "--recompute-method",
        "--recompute-num-layers",
        "--use-distributed-optimizer",
        "--num-distributed-optimizer-instances",
        "--use-torch-fsdp2",
        "--torch-fsdp2-no-reshard-after-forward",
        "--no-gradient-accumulation-fusion",
        "--use-megatron-fsdp",
        "--data-parallel-sharding-strategy",
        "--ckpt-format",
        "--overlap-grad-reduce",
        "--overlap-param-gather",
        "--cp-comm-type",
        "--hierarchical-context-parallel-sizes",
        "--moe-token-dispatcher-type",
        "--moe-enable-deepep",
        "--moe-flex-dispatcher-backend",
        "--use-tp-pp-dp-mapping",
        "--optimizer-cpu-offload",
        "--optimizer-offload-fraction",
        "--overlap-cpu-optimizer-d2h-h2d",
        "--use-precision-aware-optimizer",
        "--cpu-offloading-num-layers",
    ];
    if let Some((f, _)) = flags.iter().find(|(f, _)| !KNOWN.contains(f)) {
        return Err(format!("{f}: not a flag --emit megatron writes"));
    }
    Ok(p)
}

type Get<'a> = dyn Fn(&str) -> Option<Vec<&'a str>> + 'a;
type Num<'a> = dyn Fn(&str, u32) -> Result<u32, String> + 'a;

/// The stage layout: an explicit `--pipeline-model-parallel-layout`, or the first/last counts,
/// account-for splits and virtual stages.
fn stages_from_flags(p: &mut Plan, model: &ModelSpec, get: &Get, num: &Num) -> Result<(), String> {
    if let Some(v) = get("--pipeline-model-parallel-layout") {
        let layout = v
            .first()
            .ok_or("--pipeline-model-parallel-layout: no value")?;
        let counts: Vec<u32> = layout
            .split('|')
            .map(|s| s.chars().filter(|&c| c == 't').count() as u32)
            .collect();
        let pp = p.pp.max(1);
        if !(counts.len() as u32).is_multiple_of(pp) {
            return Err(format!(
                "--pipeline-model-parallel-layout: {} stages on pp {pp}",
                counts.len()
            ));
        }
        p.vpp = counts.len() as u32 / pp;
        p.schedule = if p.vpp > 1 {
            Schedule::Interleaved
        } else {
            Schedule::OneF1B
        };
        *p = layout_from_stages(*p, model, &counts).ok_or_else(|| {
            format!("--pipeline-model-parallel-layout {layout}: no autoplan layout")
        })?;
        return Ok(());
    }
    let emb = get("--account-for-embedding-in-pipeline-split").is_some();
    let loss = get("--account-for-loss-in-pipeline-split").is_some();
    p.pipeline_split = match (emb, loss) {
        (false, false) => PipelineSplit::Blocks,
        (true, false) => PipelineSplit::Embedding,
        (false, true) => PipelineSplit::Loss,
        (true, true) => PipelineSplit::EmbeddingLoss,
    };
    if get("--decoder-first-pipeline-num-layers").is_some() {
        p.first_stage_layers = Some(num("--decoder-first-pipeline-num-layers", 0)?);
        p.last_stage_layers = Some(num("--decoder-last-pipeline-num-layers", 0)?);
    }
    if get("--num-virtual-stages-per-pipeline-rank").is_some() {
        p.vpp = num("--num-virtual-stages-per-pipeline-rank", 1)?;
    } else if get("--num-layers-per-virtual-pipeline-stage").is_some() {
        let per = num("--num-layers-per-virtual-pipeline-stage", 1)?;
        let per_stage = model.layers / p.pp.max(1);
        if per == 0 || !per_stage.is_multiple_of(per) {
            return Err("--num-layers-per-virtual-pipeline-stage does not divide a stage".into());
        }
        p.vpp = per_stage / per;
    }
    if p.vpp > 1 {
        p.schedule = Schedule::Interleaved;
    }
    Ok(())
}

/// Activation offload (frameworks.md §1.7): `--cpu-offloading-num-layers N`, the layers whose
/// activations go to host memory (`N > 0` turns `cpu_offloading` on, arguments.py @
/// core_v0.19.2:L1869-1870; 0 or absent offloads nothing).
fn activation_offload_from_flags(get: &Get) -> Result<u32, String> {
    match get("--cpu-offloading-num-layers").as_deref() {
        None => Ok(0),
        Some([v]) => v
            .parse::<u32>()
            .map_err(|_| format!("--cpu-offloading-num-layers {v}: expected an integer ≥ 0")),
        Some(v) => Err(format!("--cpu-offloading-num-layers: one value, got {v:?}")),
    }
}

/// Optimizer offload (frameworks.md §1.9): `--optimizer-cpu-offload` with its fraction (the
/// CLI default 1.0 where absent), the percent in host memory. The evaluator prices it with
/// the transfers overlapped and Megatron requires the precision-aware optimizer
/// (`args.py @ core_v0.19.0:L1803-1811`): both flags must be there.
fn offload_from_flags(get: &Get, has: &dyn Fn(&str) -> bool) -> Result<u8, String> {
    if !has("--optimizer-cpu-offload") {
        if has("--optimizer-offload-fraction") {
            return Err("--optimizer-offload-fraction without --optimizer-cpu-offload".into());
        }
        return Ok(0);
    }
    for needed in [
        "--use-precision-aware-optimizer",
        "--overlap-cpu-optimizer-d2h-h2d",
    ] {
        if !has(needed) {
            return Err(format!("--optimizer-cpu-offload without {needed}"));
        }
    }
    match get("--optimizer-offload-fraction").as_deref() {
        None => Ok(100),
        Some([f]) => autoplan_plan::offload::parse("offload_optimizer", f).map_err(|_| {
            format!("--optimizer-offload-fraction {f}: expected 0 to 1 in steps of 0.01")
        }),
        Some(v) => Err(format!(
            "--optimizer-offload-fraction: one value, got {v:?}"
        )),
    }
}

/// Recompute: granularity, modules, method and block count.
fn recompute_from_flags(p: &mut Plan, get: &Get, num: &Num) -> Result<(), String> {
    match get("--recompute-granularity").as_deref() {
        None => {}
        Some(["selective"]) => {
            p.recompute = Recompute::Selective;
            if let Some(mods) = get("--recompute-modules") {
                let mut m = 0u8;
                for name in mods {
                    let (_, bit) = RecomputeModules::NAMES
                        .iter()
                        .find(|(n, _)| *n == name)
                        .ok_or_else(|| format!("--recompute-modules {name}"))?;
                    m |= bit;
                }
                p.recompute_modules = RecomputeModules(m);
            }
        }
        Some(["full"]) => {
            p.recompute = Recompute::Full;
            match get("--recompute-method").as_deref() {
                Some(["uniform"]) if num("--recompute-num-layers", 1)? == 1 => {}
                Some(["block"]) => p.recompute_layers = Some(num("--recompute-num-layers", 0)?),
                other => return Err(format!("--recompute-method {other:?}")),
            }
        }
        Some(other) => return Err(format!("--recompute-granularity {other:?}")),
    }
    Ok(())
}

/// Whether two plans agree on every knob `framework`'s export expresses: the knobs that matter
/// for the model (the collective algorithm aside: `--emit nccl`'s), the rank order up to
/// dimensions of size 1, the stage layout by the blocks of each pipeline rank.
pub fn same_expressed(a: &Plan, b: &Plan, model: &ModelSpec) -> Result<(), String> {
    use autoplan_plan::Knob;
    let moe = model.moe.is_some();
    let (ca, cb) = (Context::new(a, moe), Context::new(b, moe));
    for k in Knob::ALL {
        if matches!(
            k,
            Knob::Algo
                | Knob::Order
                | Knob::FirstStageLayers
                | Knob::LastStageLayers
                | Knob::PipelineSplit
        ) {
            continue;
        }
        let (ma, mb) = (k.matters(&ca), k.matters(&cb));
        if ma != mb || (ma && k.value(a) != k.value(b)) {
            return Err(format!("{}: {} vs {}", k.key(), k.value(a), k.value(b)));
        }
    }
    if ca.order_class(&a.order) != cb.order_class(&b.order) {
        return Err(format!(
            "order: {} vs {}",
            Knob::Order.value(a),
            Knob::Order.value(b)
        ));
    }
    // The blocks of each pipeline rank (how a rank's blocks go over its virtual stages is
    // the split's: Megatron's exporter writes a blocks-only layout of the account-for shape
    // as that split).
    let ranks = |p: &Plan| {
        p.stage_blocks(model)
            .map(|l| (0..l.pp).map(|r| l.blocks(r)).collect::<Vec<u32>>())
    };
    if ranks(a) != ranks(b) {
        return Err(format!(
            "blocks per stage: {:?} vs {:?}",
            ranks(a),
            ranks(b)
        ));
    }
    Ok(())
}
