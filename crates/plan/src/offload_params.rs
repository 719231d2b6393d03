//! Parameter offload to host memory: the `offload_params` knob (`on`/`off`).
//!
//! Where the frameworks run it (frameworks.md):
//! - DeepSpeed ZeRO-Infinity: `zero_optimization.offload_param {device: "cpu", pin_memory}`,
//!   **stage 3 only** (§3.3, `deepspeed/runtime/zero/offload_config.py @ v0.19.5`);
//! - torchtitan: `[training] enable_cpu_offload`, FSDP's `CPUOffloadPolicy`, which keeps the
//!   parameters, gradients and optimizer state on the CPU together (§2.2,
//!   `job_config.py @ v0.2.2:L242-308`);
//! - Megatron-Core: no parameter-offload flag in the notes (§1.9 has optimizer offload only).
//!
//! What autoplan prices (the memory in `autoplan-memory`'s `stage.rs`, the time in
//! `autoplan-evaluate`'s `core/offload.rs`): the ZeRO-3 shard of the 16-bit parameters and of
//! the gradients lives in host memory; each gather first brings the shard up (H2D) and each
//! reduce-scatter's shard goes down (D2H), every micro-batch. So the knob needs
//! - a ZeRO stage that shards the parameters (`zero=3`, `3-noreshard`): the shard is what
//!   moves, and
//! - the whole optimizer on the host (`offload_optimizer=1`): with the parameters and their
//!   gradients in host memory the CPU steps them (FSDP `CPUOffloadPolicy` runs the optimizer
//!   on the CPU, §2.2; ZeRO-Infinity's configurations offload both). A GPU step of a
//!   host-resident shard is a schedule autoplan does not price.

use crate::{Invalid, Plan};

impl Plan {
    /// `offload_params` against what it is priced with (module docs).
    pub(crate) fn check_offload_params(&self) -> Result<(), Invalid> {
        if !self.offload_params {
            return Ok(());
        }
        if !self.zero.shards_params() {
            return Err(Invalid::OffloadParams {
                needs: "a ZeRO stage that shards the parameters (zero=3 or 3-noreshard): \
                        the parameter shard is what moves to host memory",
            });
        }
        if self.offload_optimizer < 100 {
            return Err(Invalid::OffloadParams {
                needs: "offload_optimizer=1: with the parameters and their gradients in host \
                        memory the CPU runs the whole optimizer step",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Plan, Zero};

    #[test]
    fn needs_a_parameter_shard_and_the_whole_optimizer_on_the_host() {
        let ok = Plan {
            dp: 8,
            zero: Zero::stage(3),
            offload_optimizer: 100,
            offload_params: true,
            ..Plan::default()
        };
        assert!(ok.check_offload_params().is_ok());
        for bad in [
            Plan {
                zero: Zero::stage(2),
                ..ok
            },
            Plan {
                offload_optimizer: 50,
                ..ok
            },
        ] {
            assert!(bad.check_offload_params().is_err(), "{bad}");
        }
        let s = ok.to_string();
        assert!(s.contains("offload_params=on"), "{s}");
        assert_eq!(s.parse::<Plan>(), Ok(ok));
    }
}
