//! Activation offload to host memory: the `offload_activations` knob, the number of
//! transformer layers of each pipeline stage whose stored activations move to host memory
//! after their forward and come back before their backward (`0` = none, `all` = every layer of
//! each stage).
//!
//! A layer count, not a fraction, because that is what the frameworks run (docs/decisions.md,
//! "Activation offload"):
//! - Megatron-Core: `--cpu-offloading-num-layers N` offloads the activations
//!   of the first `N` transformer layers through Transformer Engine's
//!   `get_cpu_offload_context(enabled, num_layers=N, model_layers, offload_activations)`
//!   (`transformer_block.py @ core_v0.19.2:L298-319`; `cpu_offload.py @ TE v2.8.0:L646-735`),
//!   with `0 ≤ N < num_layers`, no pipeline parallelism and no recompute
//!   (`transformer_config.py @ core_v0.19.2:L1707-1722`; frameworks.md §1.7);
//! - DeepSpeed: `activation_checkpointing.cpu_checkpointing` moves every checkpointed layer's
//!   input to the CPU (`checkpointing.py @ v0.19.5:L529-531, L625-627`): all layers of a stage
//!   (the switch is global), with full recompute only;
//! - torchtitan v0.2.2 has no activation offload (its only CPU offload is FSDP's
//!   `CPUOffloadPolicy`, frameworks.md §2.2).
//!
//! What autoplan prices (the memory in `autoplan-memory`'s `stage.rs`, the time in
//! `autoplan-evaluate`'s `core/offload.rs`): on each stage `min(N, blocks)` layers' stored
//! activations (at the plan's recompute level) per micro-batch in flight live in host memory,
//! one layer's worth stays in HBM for the copy in flight; each offloaded layer goes down (D2H)
//! in the forward and comes back (H2D) in the backward.

use crate::parse::{bad, norm, ParseError};
use crate::Plan;

/// `offload_activations=all`: every layer of each stage.
pub const ALL: u32 = u32::MAX;

/// What `offload_activations=` accepts.
pub const EXPECTED: &str = "a number of layers per pipeline stage (0 = none) or all";

/// Parse a layer count: an integer ≥ 0, `all`, or `off`/`none` (0).
pub fn parse(key: &'static str, v: &str) -> Result<u32, ParseError> {
    match norm(v).as_str() {
        "off" | "none" | "no" | "false" => Ok(0),
        "all" | "on" | "yes" | "true" => Ok(ALL),
        t => match t.parse::<u32>() {
            Ok(n) if n != ALL => Ok(n),
            _ => Err(bad(key, v, EXPECTED)),
        },
    }
}

/// The plan-string form: the count, or `all`.
pub fn name(n: u32) -> String {
    if n == ALL {
        "all".into()
    } else {
        n.to_string()
    }
}

impl Plan {
    /// Whether the plan offloads anything to host memory (optimizer state, parameters or
    /// activations).
    pub fn offloads(&self) -> bool {
        self.offload_optimizer > 0 || self.offload_params || self.offload_activations > 0
    }

    /// Layers of a stage of `blocks` blocks whose activations are offloaded.
    pub fn offloaded_layers(&self, blocks: u32) -> u32 {
        self.offload_activations.min(blocks)
    }

    /// Megatron-LM's activation-offload flag, `--cpu-offloading-num-layers N`: `N > 0` turns
    /// `cpu_offloading` on (`arguments.py @ core_v0.19.2:L1869-1870`; `--cpu-offloading` itself
    /// is no command-line flag, L2237), activations and not the deprecated weights by default
    /// (`model_parallel_config.py @ core_v0.19.2:L458-480`). Nothing when nothing is offloaded;
    /// the capability table refuses `all` (Megatron needs `N < num_layers`) first.
    pub(crate) fn megatron_activation_offload(&self, a: &mut Vec<String>) {
        if self.offload_activations == 0 {
            return;
        }
        a.push("--cpu-offloading-num-layers".into());
        a.push(name(self.offload_activations));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_all_round_trip() {
        for n in [0, 1, 7, 95, ALL] {
            assert_eq!(parse("offload_activations", &name(n)), Ok(n), "{n}");
        }
        assert_eq!(parse("k", "off"), Ok(0));
        for bad in ["-1", "x", "1.5", "4294967295"] {
            assert!(parse("k", bad).is_err(), "{bad}");
        }
        let p = Plan {
            offload_activations: 3,
            ..Plan::default()
        };
        assert_eq!(p.offloaded_layers(2), 2);
        assert_eq!(p.offloaded_layers(8), 3);
        let s = p.to_string();
        assert!(s.contains("offload_activations=3"), "{s}");
        assert_eq!(s.parse::<Plan>(), Ok(p));
    }
}
