//! The training framework a plan must run in, and what each framework (and version) can run:
//! the capability table. One home for every "can framework F run this knob value" rule; the
//! search space is restricted by it (`autoplan-search`), `evaluate` refuses a plan with the
//! [`Refusal`] it gives, and the Megatron export (`megatron.rs`) refuses exactly what the
//! Megatron-Core row refuses, with the same reason.
//!
//! Sources: the reference notes' `frameworks.md` (read from the tagged framework sources; its
//! section and the framework file and tag are named at each rule). `Framework::Any` is the
//! theoretical space (every knob autoplan can price), with no rule.

// `Refusal` carries the refused plan (`Copy`, 136 bytes) so that refusing allocates nothing:
// the search refuses millions of plans; a boxed error would allocate for each.
#![allow(clippy::result_large_err)]

use autoplan_graph::{Attention, ModelSpec, Precision};

use crate::knob::{Context, Knob};
use crate::{
    CpComm, Dim, Dispatcher, MoeTpScheme, PlacementPolicy, Plan, RankOrder, Recompute,
    RecomputeModules, Schedule, TpSpTransition,
};

mod checks;
mod launch;
mod offload;
mod profile;
mod tables;

pub use profile::{AttentionKernel, CostProfile, Elementwise};

use checks::*;
pub use offload::OffloadRules;
use tables::{deepspeed, megatron, torchtitan};

/// The Megatron-Core minor versions the table covers (0.14 is the oldest release the
/// reference read in full, 0.19 the newest: frameworks.md, header table).
pub const MEGATRON_MINORS: std::ops::RangeInclusive<u8> = 14..=19;

/// The Megatron-Core version `--framework megatron-core` means (the newest in the reference,
/// `core_v0.19.0`, 2026-08-19).
pub const MEGATRON_DEFAULT_MINOR: u8 = 19;

/// A target framework (`--framework`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Framework {
    /// Megatron-LM / Megatron-Core `0.<minor>` (`pretrain_gpt.py`).
    MegatronCore { minor: u8 },
    /// torchtitan v0.2.2 (the last TOML release; frameworks.md §2).
    TorchTitan,
    /// DeepSpeed v0.19.5 (with Megatron-DeepSpeed for tensor parallelism; frameworks.md §3).
    DeepSpeed,
    /// No framework: every plan autoplan can price.
    Any,
}

impl Default for Framework {
    fn default() -> Self {
        Framework::MegatronCore {
            minor: MEGATRON_DEFAULT_MINOR,
        }
    }
}

/// What `--framework` accepts.
pub const FRAMEWORK_EXPECTED: &str =
    "megatron-core[@0.14..0.19] (alias megatron), torchtitan, deepspeed or any";

impl std::str::FromStr for Framework {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let lower = s.trim().to_ascii_lowercase();
        let (name, version) = match lower.split_once('@') {
            Some((n, v)) => (n, Some(v)),
            None => (lower.as_str(), None),
        };
        let fw = match name {
            "megatron-core" | "megatron" | "mcore" | "megatron-lm" => {
                let minor = match version {
                    None => MEGATRON_DEFAULT_MINOR,
                    Some(v) => parse_megatron_version(v)?,
                };
                return Ok(Framework::MegatronCore { minor });
            }
            "torchtitan" => Framework::TorchTitan,
            "deepspeed" | "megatron-deepspeed" => Framework::DeepSpeed,
            "any" | "none" => Framework::Any,
            _ => {
                return Err(format!(
                    "unknown framework `{s}`; expected {FRAMEWORK_EXPECTED}"
                ))
            }
        };
        match version {
            None => Ok(fw),
            Some(v) => Err(format!(
                "framework `{s}`: the table has one version of {} ({}); drop `@{v}`",
                fw.name(),
                fw
            )),
        }
    }
}

/// `0.M` or `0.M.P` with `M` in [`MEGATRON_MINORS`].
fn parse_megatron_version(v: &str) -> Result<u8, String> {
    let bad = || {
        format!(
            "Megatron-Core version `{v}`: expected 0.{}..0.{} (e.g. megatron-core@0.15)",
            MEGATRON_MINORS.start(),
            MEGATRON_MINORS.end()
        )
    };
    let v = v.strip_prefix("core_v").unwrap_or(v);
    let mut parts = v.split('.');
    let (Some("0"), Some(minor)) = (parts.next(), parts.next()) else {
        return Err(bad());
    };
    if parts.next().is_some_and(|p| p.parse::<u32>().is_err()) || parts.next().is_some() {
        return Err(bad());
    }
    let minor: u8 = minor.parse().map_err(|_| bad())?;
    if MEGATRON_MINORS.contains(&minor) {
        Ok(minor)
    } else {
        Err(bad())
    }
}

impl std::fmt::Display for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Framework::MegatronCore { minor } => write!(f, "Megatron-Core 0.{minor}"),
            Framework::TorchTitan => write!(f, "torchtitan 0.2.2"),
            Framework::DeepSpeed => write!(f, "DeepSpeed 0.19.5"),
            Framework::Any => write!(f, "any framework"),
        }
    }
}

/// Context-parallel exchanges a framework runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpModes {
    pub ring: bool,
    pub all_to_all: bool,
    pub all_gather: bool,
    pub hierarchical: bool,
}

/// Data-parallel sharding modes a framework runs (`zero=` values, `zero.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardModes {
    /// `zero=0` together with another parallel dimension (tp, cp, pp or ep > 1).
    pub ddp_with_model_parallel: bool,
    pub zero1: bool,
    pub zero2: bool,
    /// `zero=3` (resharding after the forward).
    pub zero3: bool,
    /// `zero=3-noreshard`.
    pub zero3_noreshard: bool,
    /// `zero=3-noreshard` with pp > 1 or ep > 1.
    pub noreshard_with_pp_ep: bool,
    /// `zero=2`/`3` with pp > 1.
    pub zero23_with_pp: bool,
    /// HSDP groups (`:G`) at stage 1, and at stage 3.
    pub hsdp1: bool,
    pub hsdp3: bool,
    /// With pp > 1 an FSDP stage gathers its parameters once and reduces its gradients once per
    /// step, whatever `fully_shard` was given: PyTorch's pipelining turns off resharding after
    /// the backward and the gradient sync on every backward of an FSDP stage
    /// (`torch/distributed/pipelining/stage.py` @ torch 2.15.0, `backward_maybe_with_nosync`
    /// L1129-1133) and reduces and reshards once when the schedule's step ends
    /// (`perform_reduce_grad` L1416-1447, called from `schedules.py` L1377, L1613). The
    /// sharding such a plan runs is `zero=1` (`1:G` under HSDP), and only that.
    pub pp_once_per_step: bool,
}

/// When the framework overlaps the EP all-to-all with computation (`ep_overlap=on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpOverlapRules {
    pub supported: bool,
    /// Only under this schedule (torchtitan: DualPipeV).
    pub only_schedule: Option<Schedule>,
    /// pp > 1 needs virtual pipeline stages (the interleaved schedule).
    pub pp_needs_vpp: bool,
    /// Refused with full recompute, or with `recompute_layers`.
    pub no_full_recompute: bool,
    /// Refused with the `moe` module in the selective recompute set.
    pub no_moe_recompute: bool,
    /// Refused with the all-gather dispatcher.
    pub no_all_gather_dispatcher: bool,
    /// Needs ep > 1 (an overlap over `moe_tp` only is refused).
    pub needs_ep: bool,
    /// Refused with activation recompute of any kind.
    pub no_recompute: bool,
}

/// The capability table of one framework version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    pub framework: Framework,
    pub schedules: &'static [Schedule],
    /// Interleaved needs the micro-batch count a multiple of pp (the source of the rule).
    pub interleaved_microbatches_multiple_of_pp: bool,
    pub cp: CpModes,
    pub sharding: ShardModes,
    pub ep_overlap: EpOverlapRules,
    /// TP communication overlap at all, and only with sequence parallelism.
    pub tp_overlap: bool,
    pub tp_overlap_needs_sp: bool,
    /// tp > 1 always runs sequence parallel (no `sp=off`).
    pub sp_always_with_tp: bool,
    pub selective_recompute: bool,
    /// The selective recompute modules it knows (a [`RecomputeModules`] mask).
    pub recompute_modules: u8,
    /// `recompute_layers=N` with full recompute.
    pub full_recompute_layers: bool,
    /// Uneven first/last stages.
    pub uneven_layouts: bool,
    /// Rank orders, innermost first (dims of size 1 dropped when comparing).
    pub rank_orders: &'static [[Dim; 4]],
    /// Training precisions (FP8/FP4 recipes included).
    pub precisions: &'static [Precision],
    /// Expert parallelism at all (ep or moe_tp > 1).
    pub expert_parallel: bool,
    /// `moe_tp` must be 1 or tp.
    pub moe_tp_one_or_tp: bool,
    pub moe_tp_schemes: &'static [MoeTpScheme],
    pub dispatchers: &'static [Dispatcher],
    pub transitions: &'static [TpSpTransition],
    pub balanced_placement: bool,
    /// tp may exceed the key/value heads (the heads replicated).
    pub kv_head_replication: bool,
    /// The collective library the framework's collectives run in (for the collective model:
    /// left `None` here, to be filled by the collective-library work, issue 18 item 2).
    pub library: Option<&'static str>,
    /// Offload to host memory (`framework/offload.rs`).
    pub offload: OffloadRules,
}

/// Megatron's default rank order `tp-cp-ep-dp-pp`, and `tp-cp-ep-pp-dp` under
/// `--use-tp-pp-dp-mapping` (`parallel_state.py @ core_v0.19.0:L617`,
/// `training/initialize.py @ core_v0.19.0:L388`; frameworks.md §1.1).
const MEGATRON_ORDERS: &[[Dim; 4]] = &[
    [Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp],
    [Dim::Tp, Dim::Cp, Dim::Pp, Dim::Dp],
];
const DEFAULT_ORDER: &[[Dim; 4]] = &[[Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp]];

/// Every schedule autoplan prices.
const ALL_SCHEDULES: &[Schedule] = &[
    Schedule::OneF1B,
    Schedule::Interleaved,
    Schedule::ZeroBubble,
    Schedule::DualPipe,
];

impl Framework {
    /// The name without the version (`megatron-core`, `torchtitan`, `deepspeed`, `any`).
    pub fn name(self) -> &'static str {
        match self {
            Framework::MegatronCore { .. } => "megatron-core",
            Framework::TorchTitan => "torchtitan",
            Framework::DeepSpeed => "deepspeed",
            Framework::Any => "any",
        }
    }

    /// The `--framework` spelling that gives this framework back.
    pub fn spec(self) -> String {
        match self {
            Framework::MegatronCore { minor } => format!("megatron-core@0.{minor}"),
            other => other.name().to_string(),
        }
    }

    /// The capability table of this framework version.
    pub fn capabilities(self) -> Capabilities {
        match self {
            Framework::MegatronCore { minor } => megatron(self, minor),
            Framework::TorchTitan => torchtitan(self),
            Framework::DeepSpeed => deepspeed(self),
            Framework::Any => Capabilities {
                framework: self,
                schedules: ALL_SCHEDULES,
                interleaved_microbatches_multiple_of_pp: false,
                cp: CpModes {
                    ring: true,
                    all_to_all: true,
                    all_gather: true,
                    hierarchical: true,
                },
                sharding: ShardModes {
                    ddp_with_model_parallel: true,
                    zero1: true,
                    zero2: true,
                    zero3: true,
                    zero3_noreshard: true,
                    noreshard_with_pp_ep: true,
                    zero23_with_pp: true,
                    hsdp1: true,
                    hsdp3: true,
                    pp_once_per_step: false,
                },
                ep_overlap: EpOverlapRules {
                    supported: true,
                    only_schedule: None,
                    pp_needs_vpp: false,
                    no_full_recompute: false,
                    no_moe_recompute: false,
                    no_all_gather_dispatcher: false,
                    needs_ep: false,
                    no_recompute: false,
                },
                tp_overlap: true,
                tp_overlap_needs_sp: false,
                sp_always_with_tp: false,
                selective_recompute: true,
                recompute_modules: RecomputeModules::ALL.0,
                full_recompute_layers: true,
                uneven_layouts: true,
                rank_orders: &[],
                precisions: &[],
                expert_parallel: true,
                moe_tp_one_or_tp: false,
                moe_tp_schemes: &[MoeTpScheme::ScatterGather, MoeTpScheme::GroupAllToAll],
                dispatchers: &[
                    Dispatcher::AllToAll,
                    Dispatcher::AllGather,
                    Dispatcher::DeepEp,
                ],
                transitions: &[TpSpTransition::AllReduceSlice, TpSpTransition::AllToAll],
                balanced_placement: true,
                kv_head_replication: true,
                library: None,
                offload: OffloadRules::ANY,
            },
        }
    }

    /// Whether the framework runs `plan` for `model`; the first rule it breaks otherwise.
    /// Knobs that cannot matter for the plan ([`Knob::matters`]) are not judged. Does not
    /// allocate (the search calls it for every plan it scores).
    pub fn check(self, plan: &Plan, model: &ModelSpec) -> Result<(), Refusal> {
        let ctx = Context::new(plan, model.moe.is_some());
        let refuse = |knob: Knob, reason: &'static str, source: &'static str| Refusal {
            framework: self,
            knob,
            plan: *plan,
            reason,
            source,
            precision: None,
        };
        if self == Framework::Any {
            return launch::check_any(plan, model, &ctx, &refuse);
        }
        let c = self.capabilities();
        // The precision first: it refuses every plan of the model.
        if !c.precisions.is_empty() && !c.precisions.contains(&model.training.precision) {
            return Err(Refusal {
                precision: Some(model.training.precision),
                ..refuse(Knob::Tp, c.precision_reason(), c.precision_source())
            });
        }
        check_schedule(&c, plan, model, &ctx, &refuse)?;
        check_data_parallel(&c, plan, &ctx, &refuse)?;
        check_tensor(&c, plan, model, &ctx, &refuse)?;
        check_recompute(&c, plan, &refuse)?;
        check_experts(&c, plan, &ctx, &refuse)?;
        check_order(&c, plan, &ctx, &refuse)?;
        offload::check_offload(&c, plan, model.layers, &refuse)?;
        match self {
            Framework::TorchTitan => launch::check_torchtitan(plan, model, &ctx, &refuse),
            Framework::DeepSpeed => launch::check_deepspeed(plan, model, &refuse),
            Framework::MegatronCore { .. } => launch::check_megatron(plan, model, &ctx, &refuse),
            Framework::Any => Ok(()),
        }
    }
}

impl Framework {
    /// [`Framework::check`] on a cluster whose NVLink domain spans several nodes (`mnnvl`: an
    /// NVL72 rack of 4-GPU trays; `false` is `check` itself). There autoplan prices the EP
    /// dispatch inside the domain over NVLink, which Megatron-Core's `flex` dispatcher runs
    /// with its HybridEP backend, "the only backend that supports multi-node NVLink"
    /// (`--moe-flex-dispatcher-backend hybridep`, from 0.16; frameworks.md §1.6): before 0.16
    /// its DeepEP backend would cross the trays over the network, so the plan is refused; so is
    /// torchtitan's, whose EP backends are `standard` and `deepep` only (frameworks.md §2.1,
    /// `expert_parallel_comm_backend`). Refused on the whole cluster, an EP group inside one
    /// tray included (a tray's four GPUs are one NVLink node to DeepEP too): a conservative
    /// reading.
    pub fn check_on(self, plan: &Plan, model: &ModelSpec, mnnvl: bool) -> Result<(), Refusal> {
        self.check(plan, model)?;
        // Its rules are DeepEP's on a multi-node NVLink domain: no other plan builds anything.
        if !mnnvl || plan.dispatcher != Dispatcher::DeepEp {
            return Ok(());
        }
        let deepep = Knob::Dispatcher.matters(&Context::new(plan, model.moe.is_some()));
        match self {
            Framework::TorchTitan if deepep => Err(Refusal {
                framework: self,
                knob: Knob::Dispatcher,
                plan: *plan,
                reason: "dispatch through a multi-node NVLink domain with DeepEP (its backend \
                         crosses the trays over the network, which autoplan does not price)",
                source: "expert_parallel_comm_backend standard|deepep, no HybridEP, \
                         job_config.py @ v0.2.2:L311-484; frameworks.md §2.1",
                precision: None,
            }),
            Framework::MegatronCore { minor } if deepep && minor < 16 => Err(Refusal {
                framework: self,
                knob: Knob::Dispatcher,
                plan: *plan,
                reason: "dispatch through a multi-node NVLink domain with the flex \
                         dispatcher (its DeepEP backend crosses the trays over the network, \
                         which autoplan does not price)",
                source: "--moe-flex-dispatcher-backend hybridep, the backend for multi-node \
                         NVLink, from 0.16; frameworks.md §1.6",
                precision: None,
            }),
            _ => Ok(()),
        }
    }
}

impl Capabilities {
    fn precision_reason(&self) -> &'static str {
        "train in this precision"
    }

    fn precision_source(&self) -> &'static str {
        match self.framework {
            Framework::MegatronCore { .. } => {
                "--fp8-recipe / --fp4-format choices, transformer_config.py; frameworks.md §1.8"
            }
            Framework::TorchTitan => {
                "quantize.linear.float8 recipes tensorwise/rowwise and mx mxfp8, \
                 job_config.py @ v0.2.2:L730-835; frameworks.md §2.5"
            }
            _ => "precision keys bf16/fp16, precision_config.py @ v0.19.5; frameworks.md §3.2",
        }
    }
}

/// Why a framework cannot run a plan: the knob, the rule (as "cannot …") and its source.
/// `Copy`, no heap: the search meets millions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Refusal {
    pub framework: Framework,
    /// The knob the rule is about.
    pub knob: Knob,
    /// The plan refused (to print the knob's value).
    pub plan: Plan,
    /// What the framework cannot do, as it follows "cannot".
    pub reason: &'static str,
    /// The framework source (file, version, lines) or the reference section.
    pub source: &'static str,
    /// The model precision, for a precision refusal.
    pub precision: Option<Precision>,
}

impl Refusal {
    /// "`Megatron-Core 0.15 cannot overlap EP with pp > 1 without virtual pipeline stages`".
    pub fn message(&self) -> String {
        format!("{} cannot {}", self.framework, self.reason)
    }

    /// The `key=value` the rule is about.
    pub fn setting(&self) -> String {
        match self.precision {
            Some(p) => format!("precision={}", p.name()),
            None => format!("{}={}", self.knob.key(), self.knob.value(&self.plan)),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cannot {} ({}; {})",
            self.framework,
            self.reason,
            self.setting(),
            self.source
        )
    }
}

impl std::error::Error for Refusal {}
