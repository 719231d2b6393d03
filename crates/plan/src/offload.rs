//! Offload to host memory: the `offload_optimizer` knob's values (a fraction of the optimizer
//! state kept in host memory, stored as a percent so that [`Plan`] stays `Eq`-comparable and
//! `Copy`) and its Megatron-LM flags.
//!
//! Megatron-Core (0.12+, frameworks.md §1.9: `args.py @ core_v0.19.0:L2781-2790`) runs it as
//! `--optimizer-cpu-offload --optimizer-offload-fraction F`: `HybridDeviceOptimizer` splits
//! the parameters by `F` between a CPU Adam and the GPU Adam
//! (`megatron/core/optimizer/__init__.py @ core_v0.19.0:L515-541`), with
//! `--overlap-cpu-optimizer-d2h-h2d` overlapping the gradient download and parameter upload
//! with the CPU step. What it costs is the evaluator's (`autoplan-evaluate`, `core/offload.rs`);
//! which frameworks run it is the capability table's (`framework/offload.rs`).

use crate::parse::{bad, norm, ParseError};
use crate::Plan;

/// What `offload_optimizer=` accepts.
pub const EXPECTED: &str = "a fraction in [0, 1] in steps of 0.01 (0 = none, 1 = all), or off/on";

/// Parse a fraction of the optimizer state: `0`–`1` in steps of 0.01, `off` (0), `on` (1),
/// or a percent (`50%`). Returns the percent.
pub fn parse(key: &'static str, v: &str) -> Result<u8, ParseError> {
    let n = norm(v);
    match n.as_str() {
        "off" | "none" | "no" | "false" => return Ok(0),
        "on" | "all" | "full" | "yes" | "true" => return Ok(100),
        _ => {}
    }
    let (text, scale) = match n.strip_suffix('%') {
        Some(p) => (p.trim(), 1.0),
        None => (n.as_str(), 100.0),
    };
    let f: f64 = text.parse().map_err(|_| bad(key, v, EXPECTED))?;
    let pct = f * scale;
    if !pct.is_finite() || !(0.0..=100.0).contains(&pct) || (pct - pct.round()).abs() > 1e-9 {
        return Err(bad(key, v, EXPECTED));
    }
    Ok(pct.round() as u8)
}

/// The plan-string form of a percent: the fraction, shortest (`0`, `0.25`, `1`).
pub fn name(pct: u8) -> String {
    fraction_text(pct)
}

fn fraction_text(pct: u8) -> String {
    match pct {
        0 => "0".into(),
        100 => "1".into(),
        p if p % 10 == 0 => format!("0.{}", p / 10),
        p => format!("0.{p:02}"),
    }
}

impl Plan {
    /// The fraction of the optimizer state in host memory, in [0, 1].
    pub fn offload_fraction(&self) -> f64 {
        f64::from(self.offload_optimizer.min(100)) / 100.0
    }

    /// Megatron-LM's optimizer-offload flags (frameworks.md §1.9): the offload itself, its
    /// fraction, the overlapped transfers the evaluator prices, and the precision-aware
    /// optimizer `--optimizer-cpu-offload` requires (`args.py @ core_v0.19.0:L1803-1811`).
    /// Nothing when nothing is offloaded.
    pub(crate) fn megatron_offload(&self, a: &mut Vec<String>, flags: &mut Vec<String>) {
        if self.offload_optimizer == 0 {
            return;
        }
        flags.push("--optimizer-cpu-offload".into());
        a.push("--optimizer-offload-fraction".into());
        a.push(fraction_text(self.offload_optimizer.min(100)));
        flags.push("--overlap-cpu-optimizer-d2h-h2d".into());
        flags.push("--use-precision-aware-optimizer".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_round_trip() {
        for pct in 0..=100u8 {
            assert_eq!(parse("offload_optimizer", &name(pct)), Ok(pct), "{pct}");
        }
        assert_eq!(parse("k", "50%"), Ok(50));
        assert_eq!(parse("k", "on"), Ok(100));
        assert_eq!(parse("k", "off"), Ok(0));
        for bad in ["1.5", "-0.1", "0.125", "x", "nan", "inf"] {
            assert!(parse("k", bad).is_err(), "{bad}");
        }
    }
}
