//! MaxText's cost profile (issue 17 item 4: "Framework profiles … MaxText"): a row whose source
//! names MaxText runs under `CostProfile::MAXTEXT`, its blank cells read as MaxText's
//! `base.yml` defaults, its remat policies in Megatron's recompute modules, and the one row of
//! MaxText's A3 table that stays inside a VM priced within 10%.
//!
//! The rows (`tests/fixtures/maxtext_a3_llama2_7b.csv`) are MaxText's own published figures:
//! the Llama2-7B table of `maxtext/configs/gpu/a3/llama_2_7b/README.md` in the maxtext 0.2.5
//! wheel (`pip download --no-deps --python-version 3.12 --only-binary :all: maxtext==0.2.5`),
//! each with the mesh, batch and remat policy of its `{1,2,4,8,16}vm.sh` script and
//! `configs/gpu/models/llama2_7b.yml` (docs/validation.md, "MaxText").

mod common;

use autoplan_evaluate::validate::{row_profile, validate, PublishedRun};
use autoplan_evaluate::Evaluator;
use autoplan_plan::framework::CostProfile;
use autoplan_plan::{Recompute, RecomputeModules, Zero};
use common::{case, cluster_for};

fn fixture() -> Vec<PublishedRun> {
    let path = format!(
        "{}/tests/fixtures/maxtext_a3_llama2_7b.csv",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut rdr = csv::Reader::from_path(&path).expect("fixture");
    rdr.deserialize().map(|r| r.expect("a row")).collect()
}

fn one_vm() -> PublishedRun {
    fixture()
        .into_iter()
        .find(|r| r.id == "maxtext_a3_llama2_7b_1vm")
        .expect("1vm row")
}

#[test]
fn maxtexts_rows_run_under_its_profile_and_read_its_remat_policy() {
    let rows = fixture();
    assert_eq!(rows.len(), 5);
    for r in &rows {
        assert_eq!(row_profile(r), CostProfile::MAXTEXT, "{}", r.id);
        let c = case(r).unwrap_or_else(|s| panic!("{}: {}", r.id, s.reason));
        assert_eq!(c.framework, "maxtext");
        // `minimal_with_context`: the norms recomputed; the attention's context and every
        // dense matmul output saved (nnx_decoders.py @ maxtext 0.2.5 L1258-1287).
        assert_eq!(c.plan.recompute, Recompute::Selective, "{}", r.id);
        assert_eq!(
            c.plan.recompute_modules,
            RecomputeModules(RecomputeModules::LAYERNORM),
            "{}",
            r.id
        );
        // FSDP over the VM's 8 GPUs; across VMs, data parallelism (HSDP).
        let group = if r.num_gpus == 8 { 0 } else { 8 };
        assert_eq!(c.plan.zero, Zero::stage(3).hsdp(group), "{}", r.id);
        assert_eq!(c.plan.mbs, 4);
        // MaxText stores its weights in fp32 (`weight_dtype`): PyTorch's layout, 16 bytes a
        // parameter under Adam, sharded over the VM.
        assert!(c.options.memory.fp32_params);
    }
}

#[test]
fn the_one_vm_row_is_within_ten_percent() {
    // The row whose FSDP stays inside the VM's NVLink: nothing in it depends on the A3
    // network, which no source here gives.
    let v = validate(
        &[one_vm()],
        &|n| autoplan_graph::resolve_model(n).ok(),
        &cluster_for,
    );
    assert_eq!(v.rows.len(), 1, "{:?}", v.skipped);
    let e = v.rows[0].error;
    assert!(e.abs() < 0.10, "1 VM: {:+.1}%", e * 100.0);
    // And it fits: 80 GB, as the run did.
    assert!(v.rows[0].memory_peak_gib < 80.0);
}

#[test]
fn blank_cells_read_maxtexts_defaults() {
    // `configs/base.yml` @ maxtext 0.2.5: `remat_policy: 'full'` (L450), FSDP over the ICI
    // axis and data parallelism over DCN (L769, L783), `gradient_accumulation_steps: 1`
    // (L1098), no sequence parallelism (`ici_tensor_sequence_parallelism: 1`).
    let mut r = one_vm();
    r.num_gpus = 32;
    r.dp = Some(16);
    r.tp = Some(2);
    r.global_batch = Some(64);
    r.recompute = None;
    r.zero_stage = None;
    r.micro_batch = None;
    r.sp = None;
    let c = case(&r).unwrap_or_else(|s| panic!("{}", s.reason));
    assert_eq!(c.plan.recompute, Recompute::Full);
    // 4 DP ranks on each 8-GPU node under tp 2: shard groups of 4.
    assert_eq!(c.plan.zero, Zero::stage(3).hsdp(4));
    assert_eq!(c.plan.mbs, 4, "the per-device batch, one micro-batch");
    assert!(!c.plan.sp);
    // A whole node of TP leaves nothing to shard.
    r.tp = Some(8);
    r.dp = Some(4);
    r.global_batch = Some(16);
    let c = case(&r).unwrap_or_else(|s| panic!("{}", s.reason));
    assert_eq!(c.plan.zero, Zero::NONE);
}

#[test]
fn remat_policies_read_as_the_modules_they_recompute() {
    let with = |policy: &str| {
        let mut r = one_vm();
        r.recompute = Some(policy.to_string());
        case(&r)
    };
    let modules = |policy: &str| with(policy).expect(policy).plan.recompute_modules;
    use RecomputeModules as M;
    assert_eq!(modules("minimal"), M(M::LAYERNORM | M::CORE_ATTN));
    assert_eq!(
        modules("save_dot_with_context_except_mlp"),
        M(M::LAYERNORM | M::MLP)
    );
    assert_eq!(
        modules("save_dot_except_mlp"),
        M(M::LAYERNORM | M::CORE_ATTN | M::MLP)
    );
    assert_eq!(with("full").unwrap().plan.recompute, Recompute::Full);
    // A policy recomputing a GEMM the modules cannot name, or offloading, is refused, naming
    // the column: priced as something else it would read too fast.
    for refused in [
        "save_qkv_proj",
        "save_out_proj",
        "minimal_offloaded",
        "custom",
    ] {
        let s = with(refused).expect_err(refused);
        assert_eq!(s.column.as_deref(), Some("recompute"), "{refused}");
        assert!(s.reason.contains(refused), "{}", s.reason);
    }
    // On a MoE model every named policy recomputes the MoE layer, whose matmuls none saves.
    let mut r = one_vm();
    r.model = "Mixtral 8x7B".into();
    r.params_b = Some(46.7);
    r.recompute = Some("minimal_with_context".into());
    r.num_gpus = 64;
    r.dp = Some(64);
    r.global_batch = Some(64);
    r.micro_batch = Some(1);
    let c = case(&r).unwrap_or_else(|s| panic!("{}", s.reason));
    assert_eq!(
        c.plan.recompute_modules,
        M(M::LAYERNORM | M::MOE),
        "no dense MLP to name"
    );
}

#[test]
fn the_maxtext_profile_prices_no_plan_faster_than_megatron_core() {
    // No TP overlap, fp32 gradients: never faster than Megatron-Core for the same plan (its
    // memory is less under full sharding: 16 bytes a parameter against Megatron's 18).
    let r = one_vm();
    let c = case(&r).unwrap();
    let maxtext = Evaluator::new(&c.model, &c.cluster, c.options)
        .evaluate(&c.plan)
        .unwrap();
    let core = autoplan_evaluate::EvalOptions::default()
        .with_profile(&CostProfile::MEGATRON_CORE, c.model.training.precision);
    let mc = Evaluator::new(&c.model, &c.cluster, core)
        .evaluate(&c.plan)
        .unwrap();
    assert!(maxtext.step_time_s >= mc.step_time_s * (1.0 - 1e-12));
}
