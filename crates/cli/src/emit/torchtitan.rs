//! `--emit torchtitan`: the plan as torchtitan v0.2.2's TOML job config (`--job.config_file`,
//! the last release with TOML; `torchtitan/config/job_config.py @ v0.2.2`, frameworks.md §2),
//! and [`parse`], which reads such a file back into the plan.
//!
//! Written: `[training]` (batch and sequence length, §2.2), `[parallelism]` (every degree, the
//! FSDP/HSDP split and resharding, the pipeline schedule and stage contents, CP rotation, EP,
//! §2.1), `[activation_checkpoint]` (§2.3), `[compile]` (§2.4: on, as the profile prices it) and the FP8/MX
//! converters (§2.5). The model's own tables (`[model]` name and flavor, optimizer, data) stay
//! the user's. Knobs torchtitan has one value for (the TP→SP transition, the `moe_tp` scheme,
//! the rank order, contiguous expert placement) are the capability table's, and the collective
//! algorithms are `--emit nccl`'s.

use autoplan_cluster::Precision;
use autoplan_graph::ModelSpec;
use autoplan_plan::{CpComm, Dispatcher, Framework, Plan, Recompute, Schedule, Zero};

use super::{admit, layout_from_stages, stages, ExportError};

const FW: Framework = Framework::TorchTitan;

/// `pipeline_parallel_schedule` names (`get_schedule_class`, pytorch
/// `torch/distributed/pipelining/schedules.py` @ 00722e648b74; frameworks.md §2.1).
const SCHEDULES: [(Schedule, &str); 3] = [
    (Schedule::OneF1B, "1F1B"),
    (Schedule::Interleaved, "Interleaved1F1B"),
    (Schedule::DualPipe, "DualPipeV"),
];

/// `context_parallel_rotate_method` (utils.py @ v0.2.2:L205-216): `alltoall` passes the K/V
/// blocks around the ring (ring attention, autoplan's `ring`), `allgather` gathers them all
/// first (`all-gather`).
const ROTATE: [(CpComm, &str); 2] = [(CpComm::Ring, "alltoall"), (CpComm::AllGather, "allgather")];

/// The TOML job config of `plan` for `model`, or why torchtitan cannot run it (`mnnvl`: on a
/// cluster whose NVLink domain spans several nodes, `Framework::check_on`).
pub fn emit(plan: &Plan, model: &ModelSpec, mnnvl: bool) -> Result<String, ExportError> {
    admit(plan, model, FW, mnnvl)?;
    let inexpressible = |knob, value: String, reason| ExportError::Inexpressible {
        framework: FW,
        knob,
        value,
        reason,
    };
    let precision = model.training.precision;
    // Sharding that cannot matter (dp·cp = 1 and no expert data parallelism) is written as
    // none.
    let ctx = autoplan_plan::knob::Context::new(plan, model.moe.is_some());
    let sharding = if autoplan_plan::Knob::Zero.matters(&ctx) {
        plan.zero
    } else {
        Zero::NONE
    };
    let (replicate, shard) = fsdp_degrees(&Plan {
        zero: sharding,
        ..*plan
    })
    .map_err(|r| inexpressible("zero", plan.zero.to_string(), r))?;
    let g = model.training.global_batch;
    let mut t = String::new();
    t.push_str(&format!(
        "# torchtitan v0.2.2 job config (torchtitan/config/job_config.py @ v0.2.2)\n\
         # plan {plan}\n\
         # for {} on {} GPUs. Merge it into your job file (the [model] name and flavor,\n\
         # optimizer, data and checkpoint tables stay yours) and launch with\n\
         # --job.config_file. Collective algorithms: autoplan evaluate --emit nccl.\n",
        model.name,
        plan.gpus()
    ));
    t.push_str("\n[training]\n");
    // Without PP a step accumulates `global / (local·dp)` micro-batches of `local_batch_size`;
    // with PP the local batch is split into micro-batches of
    // `pipeline_parallel_microbatch_size` (train.py @ v0.2.2:L195-215; frameworks.md §2.2).
    let local = if plan.pp > 1 { g / plan.dp } else { plan.mbs };
    kv(&mut t, "local_batch_size", local);
    kv(&mut t, "global_batch_size", g);
    kv(&mut t, "seq_len", model.training.seq_len);
    if plan.offload_params {
        // FSDP's `CPUOffloadPolicy`: parameters, gradients and optimizer state on the CPU
        // (§2.2); the table admits it only with `offload_optimizer=1`.
        kv(&mut t, "enable_cpu_offload", true);
    }
    let mp = match precision {
        Precision::Fp32 => "float32",
        _ => "bfloat16",
    };
    kv(&mut t, "mixed_precision_param", quote(mp));

    t.push_str("\n[parallelism]\n");
    kv(&mut t, "data_parallel_replicate_degree", replicate);
    kv(&mut t, "data_parallel_shard_degree", shard);
    if sharding.stage == 3 {
        // Explicit: `default` reshards unless PP is on (llama3/infra/parallelize.py @
        // v0.2.2:L319-331).
        let r = if sharding.reshard { "always" } else { "never" };
        kv(&mut t, "fsdp_reshard_after_forward", quote(r));
    } else if sharding.stage == 1 && plan.pp > 1 {
        // FSDP under PP (zero=1: gathered once, reduced once per step by torch's pipelining,
        // `ShardModes::pp_once_per_step`); `default` does not reshard after the forward with
        // PP. Written so that the file says it shards even where dp·cp = 1.
        kv(&mut t, "fsdp_reshard_after_forward", quote("default"));
    }
    kv(&mut t, "tensor_parallel_degree", plan.tp);
    kv(
        &mut t,
        "enable_async_tensor_parallel",
        plan.tp > 1 && plan.tp_overlap,
    );
    kv(&mut t, "context_parallel_degree", plan.cp);
    if plan.cp > 1 {
        let name = ROTATE
            .iter()
            .find(|(c, _)| *c == plan.cp_comm)
            .map(|(_, n)| *n)
            .ok_or_else(|| {
                inexpressible(
                    "cp_comm",
                    autoplan_plan::Knob::CpComm.value(plan),
                    "context_parallel_rotate_method is allgather or alltoall",
                )
            })?;
        kv(&mut t, "context_parallel_rotate_method", quote(name));
    }
    kv(&mut t, "pipeline_parallel_degree", plan.pp);
    if plan.pp > 1 {
        let name = SCHEDULES
            .iter()
            .find(|(s, _)| *s == plan.schedule)
            .map(|(_, n)| *n)
            .ok_or_else(|| {
                inexpressible(
                    "schedule",
                    autoplan_plan::Knob::Schedule.value(plan),
                    "no such pipeline_parallel_schedule",
                )
            })?;
        kv(&mut t, "pipeline_parallel_schedule", quote(name));
        kv(&mut t, "pipeline_parallel_microbatch_size", plan.mbs);
        // The stage contents spelt out (`module_fqns_per_model_part`, one list per stage in
        // model order; torchtitan's decoder modules `tok_embeddings`, `layers.<i>`, `norm`,
        // `output`): uneven and virtual stages alike.
        let st = stages(plan, model).ok_or_else(|| {
            ExportError::Invalid("the stage layout does not fit the model".into())
        })?;
        let last = st.len() - 1;
        t.push_str("module_fqns_per_model_part = [\n");
        for (i, s) in st.iter().enumerate() {
            let mut names: Vec<String> = Vec::new();
            if i == 0 {
                names.push(quote("tok_embeddings"));
            }
            names.extend((s.first..s.first + s.blocks).map(|b| quote(&format!("layers.{b}"))));
            if i == last {
                names.push(quote("norm"));
                names.push(quote("output"));
            }
            t.push_str(&format!("  [{}],\n", names.join(", ")));
        }
        t.push_str("]\n");
    }
    if model.moe.is_some() {
        kv(&mut t, "expert_parallel_degree", plan.ep);
        kv(&mut t, "expert_tensor_parallel_degree", plan.moe_tp);
        let backend = match plan.dispatcher {
            Dispatcher::DeepEp => "deepep",
            _ => "standard",
        };
        kv(&mut t, "expert_parallel_comm_backend", quote(backend));
        kv(
            &mut t,
            "pipeline_parallel_expert_parallel_overlap",
            plan.ep_overlap && plan.ep > 1,
        );
    }

    t.push_str("\n[activation_checkpoint]\n");
    let mode = match plan.recompute {
        Recompute::None => "none",
        Recompute::Full => "full",
        Recompute::Selective => {
            return Err(inexpressible(
                "recompute",
                autoplan_plan::Knob::Recompute.value(plan),
                "selective mode is per-op SAC or every N-th layer (activation_checkpoint.py @ \
                 v0.2.2:L164-186)",
            ))
        }
    };
    kv(&mut t, "mode", quote(mode));

    // Compiled, as the `torchtitan` cost profile prices it (Inductor fuses the elementwise
    // chains; `torchtitan-eager` is the uncompiled default, §2.4), and as async TP needs it
    // (tensor_parallel.py @ v0.2.2:L16-25; §2.1). MXFP8 refuses compile with TP > 1 (mx.py @
    // v0.2.2:L42-53, §2.5): that plan runs eager.
    t.push_str("\n[compile]\n");
    let compile = !(precision == Precision::Mxfp8 && plan.tp > 1);
    kv(&mut t, "enable", compile);
    if compile {
        kv(&mut t, "components", "[\"model\", \"loss\"]");
    }

    // Float8 tensorwise (current scaling) and MXFP8 through the model converters (§2.5).
    match precision {
        Precision::Fp8Current => {
            t.push_str("\n[model]\nconverters = [\"quantize.linear.float8\"]\n");
            t.push_str("\n[quantize.linear.float8]\n");
            kv(&mut t, "recipe_name", quote("tensorwise"));
        }
        Precision::Mxfp8 => {
            t.push_str("\n[model]\nconverters = [\"quantize.linear.mx\"]\n");
            t.push_str("\n[quantize.linear.mx]\n");
            kv(&mut t, "recipe_name", quote("mxfp8_cublas"));
        }
        _ => {}
    }
    Ok(t)
}

/// `(data_parallel_replicate_degree, data_parallel_shard_degree)` of the plan's sharding: FSDP2
/// over the data-parallel ranks (`fsdp = dp_shard·cp`, CP folded in), HSDP groups of `G` ranks
/// as `dp_shard = G/cp` replicated `dp·cp/G` times, plain DDP as replicas (parallel_dims.py @
/// v0.2.2:L133-160; frameworks.md §2.1).
fn fsdp_degrees(plan: &Plan) -> Result<(u32, u32), &'static str> {
    let z = plan.zero;
    // With PP, FSDP2 under PyTorch's pipelining gathers and reduces once per step: the same
    // config, priced as zero=1 (`ShardModes::pp_once_per_step`).
    let fsdp = z.stage == 3 || (z.stage == 1 && plan.pp > 1);
    match (z.stage, z.group) {
        (0, _) => Ok((plan.dp, 1)),
        (_, 0) if fsdp => Ok((1, plan.dp)),
        (_, g) if fsdp => Ok((plan.dp * plan.cp / g, g / plan.cp)),
        _ => Err("torchtitan shards with FSDP2 (stage 3; stage 1 with PP) or replicates (DDP)"),
    }
}

/// The plan a torchtitan v0.2.2 job config describes, for `model` (whose batch and sequence
/// length it must carry): the inverse of [`emit`].
pub fn parse(text: &str, model: &ModelSpec) -> Result<Plan, String> {
    let doc: toml::Table = text.parse().map_err(|e| format!("not TOML: {e}"))?;
    let table = |name: &str| -> Result<toml::Table, String> {
        match doc.get(name) {
            None => Ok(toml::Table::new()),
            Some(toml::Value::Table(t)) => Ok(t.clone()),
            Some(_) => Err(format!("[{name}] is not a table")),
        }
    };
    let training = table("training")?;
    let par = table("parallelism")?;
    let ac = table("activation_checkpoint")?;
    let int = |t: &toml::Table, k: &str, default: i64| -> Result<u32, String> {
        match t.get(k) {
            None => Ok(default as u32),
            Some(toml::Value::Integer(v)) if *v >= 1 && *v <= i64::from(u32::MAX) => Ok(*v as u32),
            Some(v) => Err(format!("{k} = {v}: expected an integer ≥ 1")),
        }
    };
    let text_of = |t: &toml::Table, k: &str, default: &str| -> Result<String, String> {
        match t.get(k) {
            None => Ok(default.to_string()),
            Some(toml::Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(format!("{k} = {v}: expected a string")),
        }
    };
    let boolean = |t: &toml::Table, k: &str| -> Result<bool, String> {
        match t.get(k) {
            None => Ok(false),
            Some(toml::Value::Boolean(b)) => Ok(*b),
            Some(v) => Err(format!("{k} = {v}: expected true or false")),
        }
    };
    let mut p = Plan {
        tp: int(&par, "tensor_parallel_degree", 1)?,
        cp: int(&par, "context_parallel_degree", 1)?,
        pp: int(&par, "pipeline_parallel_degree", 1)?,
        ep: int(&par, "expert_parallel_degree", 1)?,
        moe_tp: int(&par, "expert_tensor_parallel_degree", 1)?,
        ..Plan::default()
    };
    if boolean(&training, "enable_cpu_offload")? {
        p.offload_params = true;
        p.offload_optimizer = 100;
    }
    // Sequence parallelism is applied with TP (§2.1).
    p.sp = p.tp > 1;
    p.tp_overlap = boolean(&par, "enable_async_tensor_parallel")?;
    let replicate = int(&par, "data_parallel_replicate_degree", 1)?;
    let shard = int(&par, "data_parallel_shard_degree", 1)?;
    p.dp = replicate
        .checked_mul(shard)
        .ok_or("data_parallel_replicate_degree · data_parallel_shard_degree overflows")?;
    let key = par.contains_key("fsdp_reshard_after_forward");
    let reshard = match text_of(&par, "fsdp_reshard_after_forward", "default")?.as_str() {
        "always" => true,
        "never" => false,
        "default" => p.pp <= 1,
        other => return Err(format!("fsdp_reshard_after_forward = {other:?}")),
    };
    // Under PP an FSDP stage gathers and reduces once per step (`fsdp_degrees`): zero=1.
    let fsdp = if p.pp > 1 {
        Zero::stage(1)
    } else {
        Zero {
            reshard,
            ..Zero::stage(3)
        }
    };
    // FSDP over `dp_shard·cp`, HSDP with replicas; replicas alone are DDP. With no data
    // parallelism the export names the sharding by the reshard key alone.
    p.zero = match (replicate, shard * p.cp) {
        (1, 1) if key => fsdp,
        (_, 1) => Zero::NONE,
        (1, _) => fsdp,
        (_, g) => fsdp.hsdp(g),
    };
    if p.cp > 1 {
        let m = text_of(&par, "context_parallel_rotate_method", "allgather")?;
        p.cp_comm = ROTATE
            .iter()
            .find(|(_, n)| *n == m)
            .map(|(c, _)| *c)
            .ok_or_else(|| format!("context_parallel_rotate_method = {m:?}"))?;
    }
    p.dispatcher = match text_of(&par, "expert_parallel_comm_backend", "standard")?.as_str() {
        "standard" => Dispatcher::AllToAll,
        "deepep" => Dispatcher::DeepEp,
        other => return Err(format!("expert_parallel_comm_backend = {other:?}")),
    };
    p.recompute = match text_of(&ac, "mode", "selective")?.as_str() {
        "none" => Recompute::None,
        "full" => Recompute::Full,
        other => {
            return Err(format!(
                "activation_checkpoint.mode = {other:?}: autoplan prices none and full"
            ))
        }
    };
    let g = int(&training, "global_batch_size", 1)?;
    let local = int(&training, "local_batch_size", 8)?;
    if g != model.training.global_batch {
        return Err(format!(
            "global_batch_size = {g}, the model's global batch is {}",
            model.training.global_batch
        ));
    }
    let seq = int(&training, "seq_len", 2048)?;
    if seq != model.training.seq_len {
        return Err(format!(
            "seq_len = {seq}, the model's is {}",
            model.training.seq_len
        ));
    }
    if p.pp > 1 {
        p.mbs = int(&par, "pipeline_parallel_microbatch_size", 1)?;
        if u64::from(local) * u64::from(p.dp) != u64::from(g) {
            return Err(format!(
                "local_batch_size = {local}: with PP, global_batch_size / dp = {}",
                g / p.dp
            ));
        }
        let name = text_of(&par, "pipeline_parallel_schedule", "1F1B")?;
        p.schedule = SCHEDULES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(&name))
            .map(|(s, _)| *s)
            .ok_or_else(|| format!("pipeline_parallel_schedule = {name:?}: autoplan prices 1F1B, Interleaved1F1B, DualPipeV"))?;
        p.ep_overlap = boolean(&par, "pipeline_parallel_expert_parallel_overlap")?
            && p.schedule == Schedule::DualPipe;
        let parts = match par.get("module_fqns_per_model_part") {
            Some(toml::Value::Array(a)) => a,
            _ => return Err("module_fqns_per_model_part: expected the stage contents".into()),
        };
        let counts = parts
            .iter()
            .map(|part| match part {
                toml::Value::Array(names) => Ok(names
                    .iter()
                    .filter(|n| n.as_str().is_some_and(|s| s.starts_with("layers.")))
                    .count() as u32),
                _ => Err("module_fqns_per_model_part: a list of lists".to_string()),
            })
            .collect::<Result<Vec<u32>, String>>()?;
        let per_rank = counts.len() as u32 / p.pp;
        let expected = match p.schedule {
            Schedule::Interleaved => per_rank.max(2),
            Schedule::DualPipe => 2,
            _ => 1,
        };
        if counts.len() as u64 != u64::from(p.pp) * u64::from(expected) {
            return Err(format!(
                "module_fqns_per_model_part: {} stages on pp {} under {name}",
                counts.len(),
                p.pp
            ));
        }
        p.vpp = if p.schedule == Schedule::Interleaved {
            per_rank
        } else {
            1
        };
        p = layout_from_stages(p, model, &counts).ok_or_else(|| {
            format!("module_fqns_per_model_part: {counts:?} blocks per stage is no autoplan layout")
        })?;
    } else {
        p.mbs = local;
        let per = u64::from(local) * u64::from(p.dp);
        if u64::from(g) % per != 0 {
            return Err(format!(
                "global_batch_size = {g} is not a multiple of local_batch_size·dp = {per}"
            ));
        }
    }
    Ok(p)
}

fn kv(t: &mut String, k: &str, v: impl std::fmt::Display) {
    t.push_str(&format!("{k} = {v}\n"));
}

fn quote(s: &str) -> String {
    format!("\"{s}\"")
}
