//! Short names of the knob values as space files write them (for tables and sweep CSVs).

use std::fmt;

use autoplan_plan::knob::{DISPATCHERS, MOE_TP_SCHEMES, SCHEDULES, TRANSITIONS};
use autoplan_plan::{AlgoMode, CpComm, Dispatcher, MoeTpScheme, Plan, Schedule, TpSpTransition};

/// Short names of the knob values, as written in space files (for tables).
pub fn schedule_name(s: Schedule) -> &'static str {
    SCHEDULES.file_name(s)
}

/// The plan's recompute as written in space files (`selective:layernorm+moe_act` for a module
/// set other than the default).
pub fn recompute_name(p: &Plan) -> String {
    autoplan_plan::parse::recompute_label(p.recompute, p.recompute_modules)
}

pub fn cp_comm_name(c: CpComm) -> String {
    autoplan_plan::knob::cp_comm_name(c)
}

pub fn tp_sp_name(t: TpSpTransition) -> &'static str {
    TRANSITIONS.file_name(t)
}

pub fn moe_tp_scheme_name(m: MoeTpScheme) -> &'static str {
    MOE_TP_SCHEMES.file_name(m)
}

pub fn dispatcher_name(d: Dispatcher) -> &'static str {
    DISPATCHERS.file_name(d)
}

/// `cheapest`, `nccl-like`, `nccl-tuner` or the fixed algorithm's name.
pub struct AlgoName(pub AlgoMode);

impl fmt::Display for AlgoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            AlgoMode::Cheapest => f.write_str("cheapest"),
            AlgoMode::NcclLike => f.write_str("nccl-like"),
            AlgoMode::NcclTuner => f.write_str("nccl-tuner"),
            AlgoMode::Any => f.write_str("any"),
            AlgoMode::Fixed(a) => write!(f, "{a}"),
        }
    }
}
