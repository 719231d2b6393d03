//! `--emit megatron` through Megatron-LM's own argument checks: the top-10 plans of the README
//! case and the search golden cases (and the three), ranked for Megatron-Core 0.19,
//! exported with the model's flags, fed to `parse_args`, `validate_args` and
//! `TransformerConfig` of megatron-core 0.19.2 (`tools/megatron_check/check.py`); and 15 random
//! plans Megatron-Core runs for each of a dense, an MoE, an MLA and a GPT-3 model.
//!
//! The check needs the Python environment `.ci/run` makes (`target/megatron-venv`, from
//! `tools/megatron_check/requirements.txt`; or `AUTOPLAN_MEGATRON_PYTHON`). Without it this
//! test writes the cases, says why it skips the check, and passes: a plain `cargo test` needs
//! no Python.

mod common;

use std::path::PathBuf;

use autoplan::cluster::{resolve_cluster, GpuArch};
use autoplan::emit::{megatron, megatron_model};
use autoplan::evaluate::EvalOptions;
use autoplan::graph::resolve_model;
use autoplan::plan::Framework;
use autoplan::search::{resolve_space, search_case_for, SearchOptions, Target};

use common::cases::CASES;

/// The compute capability `torch.cuda` reports for the GPU.
fn capability(arch: GpuArch) -> [u32; 2] {
    match arch {
        GpuArch::V100 => [7, 0],
        GpuArch::A100 => [8, 0],
        GpuArch::L40s => [8, 9],
        GpuArch::Pascal => [6, 0],
        GpuArch::B200 | GpuArch::Gb200 => [10, 0],
        GpuArch::Gb300 => [10, 3],
        _ => [9, 0],
    }
}

/// What every run passes besides the model and the plan: a mock data set and the null
/// tokenizer (no files), an iteration count and a learning rate; and RoPE without its fused
/// kernel, which needs Transformer Engine ("install TE ≥ 1.4", `transformer_config.py @
/// core_v0.19.2`), absent from the check's CPU environment (its PyTorch extension builds against
/// CUDA). No plan knob depends on the fusion.
const RUN: [&str; 10] = [
    "--no-rope-fusion",
    "--mock-data",
    "--tokenizer-type",
    "NullTokenizer",
    "--train-iters",
    "10",
    "--lr",
    "1e-4",
    "--lr-decay-style",
    "constant",
];

/// One check case: the export of `plan` with the model's flags and the run's (`mnnvl`: on a
/// multi-node NVLink domain, where the flex dispatcher exports HybridEP's backend).
fn case(
    name: String,
    model: &autoplan::graph::ModelSpec,
    plan: &autoplan::plan::Plan,
    gpu: [u32; 2],
    mnnvl: bool,
) -> serde_json::Value {
    let fw = Framework::default();
    let text = megatron::emit(plan, model, fw, mnnvl)
        .unwrap_or_else(|e| panic!("{}: `{plan}` does not export: {e}", model.name));
    let mut argv = megatron_model::model_args(model)
        .unwrap_or_else(|| panic!("{}: no Megatron-LM model flags", model.name));
    argv.extend(megatron::words(&text));
    argv.extend(RUN.map(String::from));
    serde_json::json!({
        "name": name,
        "world_size": plan.gpus(),
        "gpu": gpu,
        "env": megatron::environment(&text),
        "argv": argv,
    })
}

fn cases() -> Vec<serde_json::Value> {
    let fw = Framework::default();
    let mut out = Vec::new();
    let mut rng = common::plans::Rng(0x18);
    for m in ["llama3-8b", "mixtral-8x7b", "deepseek-v2-lite", "gpt3-175b"] {
        let model = resolve_model(m).expect("bundled model");
        let mut n = 0;
        while n < 15 {
            let plan = common::plans::random_plan(&mut rng);
            let ok = u32::try_from(plan.gpus())
                .is_ok_and(|g| plan.check(&model, g).is_ok() && fw.check(&plan, &model).is_ok());
            if ok {
                n += 1;
                out.push(case(
                    format!("{m} random {plan}"),
                    &model,
                    &plan,
                    [9, 0],
                    false,
                ));
                // The same plan on an NVL72 rack (Blackwell): DeepEP's flex dispatch as
                // HybridEP's backend.
                if plan.dispatcher == autoplan::plan::Dispatcher::DeepEp && plan.ep > 1 {
                    let name = format!("{m} random {plan} on an NVL72 rack");
                    out.push(case(name, &model, &plan, [10, 0], true));
                }
            }
        }
    }
    for (m, c, s) in CASES {
        let model = resolve_model(m).expect("bundled model");
        let cluster = resolve_cluster(c).expect("bundled cluster");
        let space = resolve_space(s).expect("bundled space");
        let target = Target {
            framework: fw,
            ..Target::default()
        };
        let opts = SearchOptions {
            top_k: 10,
            exhaustive: false,
        };
        let case = search_case_for(
            &model,
            &cluster,
            EvalOptions::default(),
            target,
            &space,
            &opts,
            &(),
        )
        .unwrap_or_else(|e| panic!("{m} on {c}: {e}"));
        for (i, r) in case.outcome.plans.iter().enumerate() {
            let name = format!("{m} #{} {}", i + 1, r.plan);
            out.push(self::case(
                name,
                &model,
                &r.plan,
                capability(cluster.gpu.arch),
                cluster.multi_node_nvlink(),
            ));
        }
    }
    out
}

/// The interpreter of the check's environment, if there is one.
fn python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AUTOPLAN_MEGATRON_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let p = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/megatron-venv/bin/python"
    ));
    p.exists().then_some(p)
}

#[test]
fn megatron_exports_pass_megatrons_argument_checks() {
    let cases = cases();
    // 60 random plans, 7 of them again on an NVL72 rack (HybridEP's backend), and the top
    // 10 of the 7 search cases.
    assert_eq!(cases.len(), 70 + 60 + 7);
    let rack = cases
        .iter()
        .filter(|c| c["argv"].to_string().contains("hybridep"))
        .count();
    assert_eq!(rack, 7);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("megatron_check_cases.jsonl");
    let lines: Vec<String> = cases.iter().map(|c| c.to_string()).collect();
    std::fs::write(&file, lines.join("\n") + "\n").expect("write the cases");
    let Some(py) = python() else {
        eprintln!(
            "megatron_check: skipped Megatron's own checks: no target/megatron-venv (made by \
             .ci/run from tools/megatron_check/requirements.txt; needs Python ≥ 3.12) and no \
             AUTOPLAN_MEGATRON_PYTHON; the {} cases are in {}",
            cases.len(),
            file.display()
        );
        return;
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tools/megatron_check/check.py");
    let out = std::process::Command::new(&py)
        .arg(script)
        .arg(&file)
        .output()
        .expect("run the check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let failed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        out.status.success() && failed.is_empty(),
        "{} of {} exports fail Megatron's checks:\n{}\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("{} passed, 0 failed", cases.len())),
        "{stdout}"
    );
}
