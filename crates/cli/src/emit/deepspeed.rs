//! `--emit deepspeed`: the plan as a DeepSpeed 0.19.5 JSON config (frameworks.md §3) and the
//! Megatron-DeepSpeed `pretrain_gpt.py` arguments that set the tensor, pipeline and Ulysses
//! degrees, written as one shell script: a heredoc writes `ds_config.json`, a bash array holds
//! the arguments. [`parse`] reads the script back into the plan.
//!
//! The JSON: the three batch keys (`train_batch_size = micro · accumulation · dp`,
//! config.py @ v0.19.5:L924-927, §3.1), `bf16`/`fp16` (§3.2), `zero_optimization` with its
//! stage, buckets and overlap (§3.3; MiCS `mics_shard_size` for HSDP groups) and, with full
//! recompute, `activation_checkpointing`; with `offload_optimizer`, ZeRO-Offload's
//! `zero_optimization.offload_optimizer` (§3.3); with `offload_params`, ZeRO-Infinity's
//! `zero_optimization.offload_param`; with `offload_activations=all`,
//! `activation_checkpointing.cpu_checkpointing` and `--checkpoint-in-cpu`. DeepSpeed runs one pipeline schedule (1F1B), no EP,
//! no TP overlap and no selective recompute: its capability table refuses those plans. The
//! collective algorithms are `--emit nccl`'s.

use autoplan_cluster::Precision;
use autoplan_graph::ModelSpec;
use autoplan_plan::{CpComm, Framework, Plan, Recompute, Zero};
use serde_json::json;

use super::{admit, ExportError};

const FW: Framework = Framework::DeepSpeed;

/// `reduce_bucket_size` and `allgather_bucket_size`: the code defaults, 5e8 elements
/// (zero/config.py @ v0.19.5:L95-401; frameworks.md §3.3), written out so the file says what
/// runs.
const BUCKET: u64 = 500_000_000;
/// `stage3_prefetch_bucket_size`: the code default, 5e7 (the docs' 5e8 is not what runs; §3.3).
const PREFETCH: u64 = 50_000_000;

/// The script's markers.
const JSON_START: &str = "cat > ds_config.json <<'JSON'";
const JSON_END: &str = "JSON";
const ARGS_START: &str = "MEGATRON_DEEPSPEED_ARGS=(";

/// The DeepSpeed config and Megatron-DeepSpeed arguments of `plan` for `model`, or why
/// DeepSpeed cannot run it.
pub fn emit(plan: &Plan, model: &ModelSpec) -> Result<String, ExportError> {
    // No EP in the DeepSpeed table: no rule of the cluster's NVLink domain applies.
    admit(plan, model, FW, false)?;
    let inexpressible = |knob, value: String, reason| ExportError::Inexpressible {
        framework: FW,
        knob,
        value,
        reason,
    };
    let g = model.training.global_batch;
    let micro = plan.microbatches(model);
    let ctx = autoplan_plan::knob::Context::new(plan, model.moe.is_some());
    let z = if autoplan_plan::Knob::Zero.matters(&ctx) {
        plan.zero
    } else {
        Zero::NONE
    };
    if z.stage == 3 && !z.reshard {
        // The table refuses it; kept here so no value is ever dropped.
        return Err(inexpressible(
            "zero",
            z.to_string(),
            "stage 3 always re-gathers parameters in the backward",
        ));
    }
    let mut zero = json!({ "stage": z.stage });
    if z.stage > 0 {
        // The evaluator overlaps the gradient reduction with the backward: `overlap_comm`
        // explicit, as it resolves to false below stage 3 (zero/config.py @ v0.19.5:L382-386).
        zero["overlap_comm"] = true.into();
        zero["contiguous_gradients"] = true.into();
        zero["reduce_scatter"] = true.into();
        zero["reduce_bucket_size"] = BUCKET.into();
        zero["allgather_bucket_size"] = BUCKET.into();
    }
    if z.stage == 3 {
        zero["stage3_prefetch_bucket_size"] = PREFETCH.into();
        if z.group > 0 {
            // MiCS shards inside groups of `mics_shard_size` ranks (zero3.rst @
            // v0.19.5:L157-190; §3.3).
            zero["mics_shard_size"] = z.group.into();
        }
    } else if z.group > 0 {
        return Err(inexpressible(
            "zero",
            z.to_string(),
            "shard groups (MiCS) exist at stage 3 only",
        ));
    }
    if plan.offload_optimizer > 0 {
        zero["offload_optimizer"] = offload_optimizer(plan.offload_optimizer);
    }
    if plan.offload_params {
        // ZeRO-Infinity's parameter offload to CPU memory, stage 3 only (§3.3), pinned
        // buffers (the v0.19.5 default, written out).
        zero["offload_param"] = json!({ "device": "cpu", "pin_memory": true });
    }
    let mut cfg = json!({
        "train_batch_size": g,
        "train_micro_batch_size_per_gpu": plan.mbs,
        "gradient_accumulation_steps": micro,
        "zero_optimization": zero,
    });
    let precision_flag = match model.training.precision {
        Precision::Bf16 => {
            cfg["bf16"] = json!({ "enabled": true });
            Some("--bf16")
        }
        Precision::Fp16 => {
            // Dynamic loss scaling (`loss_scale` 0; precision_config.py @ v0.19.5, §3.2).
            cfg["fp16"] = json!({ "enabled": true, "loss_scale": 0 });
            Some("--fp16")
        }
        _ => None,
    };
    if plan.recompute == Recompute::Full {
        // DeepSpeed's activation checkpointing (Megatron-DeepSpeed routes Megatron's
        // recompute through it): every block, nothing partitioned; with
        // `offload_activations=all` (the capability table admits no other count) the
        // checkpoints go to the CPU (`cpu_checkpointing`, config.py @ v0.19.5:L84-85).
        cfg["activation_checkpointing"] = json!({
            "partition_activations": false,
            "cpu_checkpointing": plan.offload_activations > 0,
            "contiguous_memory_optimization": false,
        });
    }

    let mut args: Vec<String> = Vec::new();
    let mut kv = |k: &str, v: String| {
        args.push(format!("{k} {v}"));
    };
    kv("--tensor-model-parallel-size", plan.tp.to_string());
    if plan.pp > 1 {
        kv("--pipeline-model-parallel-size", plan.pp.to_string());
    }
    if plan.cp > 1 {
        if plan.cp_comm != CpComm::AllToAll {
            return Err(inexpressible(
                "cp_comm",
                autoplan_plan::Knob::CpComm.value(plan),
                "DeepSpeed's sequence parallelism is Ulysses (all-to-all)",
            ));
        }
        kv("--ds-sequence-parallel-size", plan.cp.to_string());
    }
    kv("--micro-batch-size", plan.mbs.to_string());
    kv("--global-batch-size", g.to_string());
    kv("--seq-length", model.training.seq_len.to_string());
    kv("--zero-stage", z.stage.to_string());
    if plan.recompute == Recompute::Full {
        kv("--recompute-granularity", "full".into());
        kv("--recompute-method", "uniform".into());
        kv("--recompute-num-layers", "1".into());
    }
    let mut flags: Vec<String> = Vec::new();
    if plan.pp <= 1 {
        // Without pipelining Megatron-DeepSpeed builds no PipelineModule (which ZeRO-2/3
        // cannot run with, pipe/engine.py @ v0.19.5:L76-77).
        flags.push("--no-pipeline-parallel".into());
    }
    if plan.tp > 1 && plan.sp {
        flags.push("--sequence-parallel".into());
    }
    if plan.recompute == Recompute::Full {
        flags.push("--deepspeed-activation-checkpointing".into());
        if plan.offload_activations > 0 {
            // Megatron-DeepSpeed hands `checkpoint_in_cpu` to
            // `deepspeed.checkpointing.configure`, whose arguments override the config file
            // (checkpointing.py @ v0.19.5:L1096-1113): the flag and the JSON say the same.
            flags.push("--checkpoint-in-cpu".into());
        }
    }
    flags.extend(precision_flag.map(String::from));
    flags.push("--deepspeed".into());
    flags.push("--deepspeed_config ds_config.json".into());
    args.extend(flags);

    let json =
        serde_json::to_string_pretty(&cfg).map_err(|e| ExportError::Invalid(e.to_string()))?;
    let mut s = format!(
        "#!/usr/bin/env bash\n\
         # DeepSpeed 0.19.5 config and Megatron-DeepSpeed pretrain_gpt.py arguments\n\
         # plan {plan}\n\
         # for {} on {} GPUs (dp {} · tp {} · pp {} · Ulysses {}). The model's own\n\
         # arguments stay yours: append them to the array. Collective algorithms: autoplan\n\
         # evaluate --emit nccl.\n",
        model.name,
        plan.gpus(),
        plan.dp,
        plan.tp,
        plan.pp,
        plan.cp
    );
    s.push_str(JSON_START);
    s.push('\n');
    s.push_str(&json);
    s.push('\n');
    s.push_str(JSON_END);
    s.push('\n');
    s.push_str(ARGS_START);
    s.push('\n');
    for a in &args {
        s.push_str(&format!("  {a}\n"));
    }
    s.push_str(")\n");
    Ok(s)
}

/// `zero_optimization.offload_optimizer` for `pct` percent of the optimizer state in host
/// memory (frameworks.md §3.3, `deepspeed/runtime/zero/offload_config.py @ v0.19.5`): the CPU
/// device, pinned buffers (the v0.19.5 default, written out so the file says what runs) and,
/// below all of it, `ratio` (the capability table admits that on stage 3 only, `L388-393`).
fn offload_optimizer(pct: u8) -> serde_json::Value {
    let mut o = json!({ "device": "cpu", "pin_memory": true });
    if pct < 100 {
        o["ratio"] = (f64::from(pct) / 100.0).into();
    }
    o
}

/// The percent of the optimizer state an `offload_optimizer` dict puts in host memory: `cpu`
/// only (`none` is no offload; autoplan prices no NVMe tier), `ratio` 1.0 when absent (its
/// default, §3.3).
fn read_offload_optimizer(o: &serde_json::Value) -> Result<u8, String> {
    let device = o.get("device").and_then(|d| d.as_str()).unwrap_or("none");
    match device {
        "none" => return Ok(0),
        "cpu" => {}
        other => {
            return Err(format!(
                "zero_optimization.offload_optimizer.device = {other:?}: autoplan prices \
                 `cpu` (host memory) only"
            ))
        }
    }
    match o.get("ratio") {
        None => Ok(100),
        Some(r) => {
            let text = r
                .as_f64()
                .map(|x| x.to_string())
                .ok_or("zero_optimization.offload_optimizer.ratio: expected a number")?;
            autoplan_plan::offload::parse("ratio", &text).map_err(|_| {
                format!(
                    "zero_optimization.offload_optimizer.ratio = {text}: expected a fraction \
                     in [0, 1] in steps of 0.01"
                )
            })
        }
    }
}

/// The plan an [`emit`] script describes, for `model` (whose batch and sequence length it must
/// carry).
pub fn parse(text: &str, model: &ModelSpec) -> Result<Plan, String> {
    let lines: Vec<&str> = text.lines().collect();
    let find = |marker: &str, from: usize| {
        lines[from..]
            .iter()
            .position(|l| l.trim() == marker)
            .map(|i| i + from)
            .ok_or_else(|| format!("no `{marker}` line"))
    };
    let js = find(JSON_START, 0)?;
    let je = find(JSON_END, js + 1)?;
    let cfg: serde_json::Value = serde_json::from_str(&lines[js + 1..je].join("\n"))
        .map_err(|e| format!("ds_config.json: {e}"))?;
    let a0 = find(ARGS_START, je)?;
    let a1 = find(")", a0)?;
    let words: Vec<&str> = lines[a0 + 1..a1]
        .iter()
        .flat_map(|l| l.split_whitespace())
        .collect();
    let has = |flag: &str| words.contains(&flag);
    let value = |flag: &str| -> Result<Option<u32>, String> {
        match words.iter().position(|w| *w == flag) {
            None => Ok(None),
            Some(i) => words
                .get(i + 1)
                .and_then(|v| v.parse().ok())
                .map(Some)
                .ok_or_else(|| format!("{flag}: expected a number")),
        }
    };
    let num = |v: &serde_json::Value, k: &str| -> Result<u32, String> {
        v.get(k)
            .and_then(|x| x.as_u64())
            .and_then(|x| u32::try_from(x).ok())
            .ok_or_else(|| format!("ds_config.json: `{k}` is not a count"))
    };
    let g = num(&cfg, "train_batch_size")?;
    let mbs = num(&cfg, "train_micro_batch_size_per_gpu")?;
    let gas = num(&cfg, "gradient_accumulation_steps")?;
    if g != model.training.global_batch || value("--global-batch-size")? != Some(g) {
        return Err(format!(
            "train_batch_size = {g}, --global-batch-size and the model's global batch ({}) differ",
            model.training.global_batch
        ));
    }
    if value("--micro-batch-size")? != Some(mbs) {
        return Err("--micro-batch-size differs from train_micro_batch_size_per_gpu".into());
    }
    if value("--seq-length")? != Some(model.training.seq_len) {
        return Err(format!(
            "--seq-length: the model's is {}",
            model.training.seq_len
        ));
    }
    if mbs == 0 || gas == 0 || u64::from(g) % (u64::from(mbs) * u64::from(gas)) != 0 {
        return Err("train_batch_size is not micro · accumulation · dp".into());
    }
    let zero = cfg
        .get("zero_optimization")
        .ok_or("ds_config.json: no zero_optimization")?;
    let stage = num(zero, "stage")?;
    let group = match zero.get("mics_shard_size") {
        None => 0,
        Some(_) => num(zero, "mics_shard_size")?,
    };
    let offload_optimizer = match zero.get("offload_optimizer") {
        None => 0,
        Some(o) => read_offload_optimizer(o)?,
    };
    let offload_params = match zero.get("offload_param") {
        None => false,
        Some(o) => match o.get("device").and_then(|d| d.as_str()).unwrap_or("none") {
            "none" => false,
            "cpu" => true,
            other => {
                return Err(format!(
                    "zero_optimization.offload_param.device = {other:?}: autoplan prices `cpu` \
                     (host memory) only"
                ))
            }
        },
    };
    if value("--zero-stage")? != Some(stage) {
        return Err("--zero-stage differs from zero_optimization.stage".into());
    }
    let tp = value("--tensor-model-parallel-size")?.unwrap_or(1);
    let pp = if has("--no-pipeline-parallel") {
        1
    } else {
        value("--pipeline-model-parallel-size")?.unwrap_or(1)
    };
    let cp = value("--ds-sequence-parallel-size")?.unwrap_or(1);
    let full = words
        .windows(2)
        .any(|w| w == ["--recompute-granularity", "full"]);
    if full != cfg.get("activation_checkpointing").is_some() {
        return Err("recompute flags and activation_checkpointing disagree".into());
    }
    let cpu_checkpointing = match cfg
        .get("activation_checkpointing")
        .and_then(|a| a.get("cpu_checkpointing"))
    {
        None => false,
        Some(v) => v
            .as_bool()
            .ok_or("activation_checkpointing.cpu_checkpointing: expected true or false")?,
    };
    if cpu_checkpointing != has("--checkpoint-in-cpu") {
        return Err(
            "--checkpoint-in-cpu and activation_checkpointing.cpu_checkpointing disagree".into(),
        );
    }
    Ok(Plan {
        tp,
        sp: tp > 1 && has("--sequence-parallel"),
        cp,
        cp_comm: if cp > 1 {
            CpComm::AllToAll
        } else {
            CpComm::Ring
        },
        dp: (u64::from(g) / (u64::from(mbs) * u64::from(gas))) as u32,
        zero: Zero::stage(stage as u8).hsdp(group),
        offload_optimizer,
        offload_params,
        pp,
        mbs,
        recompute: if full {
            Recompute::Full
        } else {
            Recompute::None
        },
        // `cpu_checkpointing` offloads every checkpointed layer.
        offload_activations: if cpu_checkpointing {
            autoplan_plan::offload_activations::ALL
        } else {
            0
        },
        ..Plan::default()
    })
}
