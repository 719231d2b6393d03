//! `--framework` and `--min-headroom`, shared by `search`, `evaluate` and `sweep`.

use autoplan_plan::Framework;
use autoplan_search::Target;

use crate::fmt::GIB;

/// Which framework must run the plans, and the memory each GPU keeps free.
#[derive(clap::Args, Debug, Clone)]
pub struct TargetArgs {
    /// The framework the plans must run in: megatron-core or megatron-core@VERSION for 0.14
    /// to 0.19 (default: Megatron-Core 0.19), torchtitan (0.2.2), deepspeed (0.19.5), or any
    /// (every plan autoplan can price).
    /// A plan the framework cannot run is never ranked, and `evaluate` refuses it with the
    /// rule and its source (docs/frameworks.md).
    #[arg(long, default_value = "megatron-core", value_parser = parse_framework)]
    pub framework: Framework,
    /// GiB of HBM each GPU keeps free beyond the plan's predicted peak (default 2; the memory
    /// model already holds a 3 GiB reserve): plans with less are not ranked, and `evaluate`
    /// warns. 0 ranks everything that fits.
    #[arg(long, value_name = "GIB", default_value_t = 2.0)]
    pub min_headroom: f64,
}

fn parse_framework(s: &str) -> Result<Framework, String> {
    s.parse()
}

impl TargetArgs {
    /// The search's target; an error for a negative or non-finite headroom.
    pub fn target(&self) -> anyhow::Result<Target> {
        anyhow::ensure!(
            self.min_headroom.is_finite() && self.min_headroom >= 0.0,
            "--min-headroom {}: expected a number of GiB ≥ 0",
            self.min_headroom
        );
        Ok(Target {
            framework: self.framework,
            min_headroom_bytes: self.min_headroom * GIB,
        })
    }
}
