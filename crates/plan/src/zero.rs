//! The `zero` knob's values: how the data-parallel ranks shard the model state, as frameworks
//! run it — ZeRO stages 0–3 (Rajbhandari+20 §5), FSDP with or without resharding after the
//! forward (Zhao+23 §3.2, §4.2), and HSDP (shard inside a group, replicate across groups).
//!
//! | value              | shards                               | frameworks                                                                 |
//! |--------------------|--------------------------------------|----------------------------------------------------------------------------|
//! | `0`                | nothing                              | DDP; Megatron without `--use-distributed-optimizer`                        |
//! | `1`                | optimizer state                      | Megatron distributed optimizer; DeepSpeed stage 1; Megatron-FSDP `optim`   |
//! | `2`                | + gradients                          | DeepSpeed stage 2; Megatron-FSDP `optim_grads`                             |
//! | `3`                | + parameters, resharded after fwd    | DeepSpeed stage 3; FSDP `FULL_SHARD`; FSDP2 `fully_shard`; Megatron-FSDP `optim_grads_params` |
//! | `3-noreshard`      | + parameters, kept from fwd to bwd   | FSDP2 `reshard_after_forward=False`; FSDP1 `SHARD_GRAD_OP`; Megatron `--torch-fsdp2-no-reshard-after-forward` |
//! | `STAGE:G`          | the same, inside groups of G ranks, replicated across the dp·cp/G groups | HSDP (FSDP `HYBRID_SHARD`, torchtitan `data_parallel_shard_degree=G`); with stage 1 Megatron's `--num-distributed-optimizer-instances dp·cp/G` |
//!
//! Aliases: `ddp`/`none` (0), `distributed-optimizer`/`dist-opt` (1), `fsdp`/`full-shard` (3),
//! `fsdp-noreshard`/`noreshard`/`shard-grad-op` (3-noreshard), `hsdp:G` (3:G).
//! Sources: frameworks.md (the reference notes) §1.4 (Megatron distributed optimizer and
//! Megatron-FSDP strategies), §2.1 (torchtitan's HSDP mesh and `fsdp_reshard_after_forward`),
//! §3.5 (DeepSpeed ZeRO-1/2 under gradient accumulation), §3.6 (FSDP/FSDP2).
//!
//! What each mode costs is `autoplan-evaluate`'s (`core/dp.rs`) and `autoplan-memory`'s
//! (`stage.rs`); this module only names the modes and says what they shard and when they
//! communicate.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How the data-parallel ranks shard the model state: a ZeRO stage, whether stage 3 reshards
/// its parameters after the forward, and the HSDP shard group (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Zero {
    /// 0 nothing sharded, 1 optimizer state, 2 + gradients, 3 + parameters.
    pub stage: u8,
    /// Stage 3: the parameters gathered for a micro-batch's forward are freed after it and
    /// gathered again for its backward (`true`, FSDP `reshard_after_forward=True`, DeepSpeed
    /// stage 3), or kept until its backward ends (`false`). Always `true` below stage 3.
    pub reshard: bool,
    /// HSDP: the ranks of one shard group (≥ 2, dividing the group it shards); 0 = the whole
    /// data-parallel group.
    pub group: u32,
}

impl Default for Zero {
    fn default() -> Self {
        Zero::NONE
    }
}

/// What `zero=` accepts.
pub const ZERO_EXPECTED: &str = "0, 1, 2, 3 or 3-noreshard (aliases ddp, distributed-optimizer, \
fsdp, fsdp-noreshard, shard-grad-op), optionally :G for HSDP shard groups of G ≥ 2 ranks \
(hsdp:G = 3:G)";

/// The named spellings (after lower-casing and `_` → `-`) and the mode each stands for.
const NAMES: &[(&str, Zero)] = &[
    ("0", Zero::stage(0)),
    ("none", Zero::stage(0)),
    ("ddp", Zero::stage(0)),
    ("no-shard", Zero::stage(0)),
    ("1", Zero::stage(1)),
    ("distributed-optimizer", Zero::stage(1)),
    ("dist-opt", Zero::stage(1)),
    ("optim", Zero::stage(1)),
    ("2", Zero::stage(2)),
    ("optim-grads", Zero::stage(2)),
    ("3", Zero::stage(3)),
    ("fsdp", Zero::stage(3)),
    ("full-shard", Zero::stage(3)),
    ("optim-grads-params", Zero::stage(3)),
    ("hsdp", Zero::stage(3)),
    ("3-noreshard", Zero::NORESHARD),
    ("noreshard", Zero::NORESHARD),
    ("fsdp-noreshard", Zero::NORESHARD),
    ("shard-grad-op", Zero::NORESHARD),
];

impl Zero {
    /// No sharding (plain data parallelism).
    pub const NONE: Zero = Zero::stage(0);
    /// FSDP without resharding after the forward.
    pub const NORESHARD: Zero = Zero {
        stage: 3,
        reshard: false,
        group: 0,
    };

    /// ZeRO stage `stage` over the whole data-parallel group (stage 3 reshards after forward).
    pub const fn stage(stage: u8) -> Zero {
        Zero {
            stage,
            reshard: true,
            group: 0,
        }
    }

    /// The same mode sharded inside groups of `group` ranks (0: the whole group).
    pub const fn hsdp(self, group: u32) -> Zero {
        Zero { group, ..self }
    }

    /// Optimizer state is sharded (stage ≥ 1).
    pub fn shards_optimizer(self) -> bool {
        self.stage >= 1
    }

    /// Gradients are sharded (stage ≥ 2), so they are reduce-scattered after every backward,
    /// not once per step: DeepSpeed stage ≥ 2 reduces "during non gradient accumulation
    /// boundaries as well", Megatron-FSDP `optim_grads*` on every backward, FSDP2 by default
    /// (frameworks.md §3.5, §1.4 "Gradient timing in Megatron-FSDP", §3.6).
    pub fn shards_grads(self) -> bool {
        self.stage >= 2
    }

    /// Parameters are sharded at rest (stage 3): gathered before each micro-batch's forward.
    pub fn shards_params(self) -> bool {
        self.stage >= 3
    }

    /// Stage 3 gathering the parameters again for the backward (resharded after the forward).
    pub fn gathers_in_backward(self) -> bool {
        self.stage >= 3 && self.reshard
    }

    /// Stage 3 keeping the whole stage's gathered parameters from the forward through the
    /// backward (FSDP2 `reshard_after_forward=False`, frameworks.md §3.6).
    pub fn keeps_gathered(self) -> bool {
        self.stage >= 3 && !self.reshard
    }

    /// The ranks a data-parallel group of `n` ranks shards over: all `n`, or the HSDP group
    /// (its greatest common divisor with `n`, for a group `Plan::check` did not size, e.g. the
    /// experts' EDP group).
    pub fn shard_size(self, n: u32) -> u32 {
        if self.group == 0 || self.stage == 0 {
            n
        } else {
            gcd(self.group, n.max(1))
        }
    }

    /// The plan-string name: `0` … `3`, `3-noreshard`, with `:G` for an HSDP group
    /// (`Display` writes it without allocating).
    pub fn name(self) -> String {
        self.to_string()
    }

    /// Parse a `zero=` value (module docs); `None` if it is not one.
    pub fn parse(v: &str) -> Option<Zero> {
        let v = v.trim().to_ascii_lowercase().replace('_', "-");
        let (mode, group) = match v.split_once(':') {
            Some((m, g)) => {
                let g: u32 = g.trim().parse().ok().filter(|&g| g >= 2)?;
                (m.trim().to_string(), g)
            }
            None => (v, 0),
        };
        let z = NAMES.iter().find(|(n, _)| *n == mode)?.1;
        if z.stage == 0 && group > 0 {
            // Nothing is sharded: there is no shard group.
            return None;
        }
        Some(z.hsdp(group))
    }

    /// The mode a published run's sharding column names (the `zero_stage` column of
    /// `data/published_runs*.csv`: `1`, `ZeRO-2`, `FSDP2 (full shard)`, `FSDP FULL_SHARD`,
    /// `Megatron-FSDP`, `FSDP (shard optimizer+grads; params not resharded after fwd)`,
    /// `HSDP (shard 8)` …). `None` for a blank or unrecognised text.
    ///
    /// Rules, in order: a cell listing what it shards as the optimizer state and the gradients
    /// and not the parameters (`shard optimizer+grads`) names ZeRO stage 2 (Rajbhandari+20 §5,
    /// P_os+g), whatever else it says of resharding (`sharded_list`); "not resharded"/"no
    /// reshard"/`SHARD_GRAD_OP` is FSDP without resharding after forward (frameworks.md
    /// §3.6); "hybrid"/"HSDP" shards inside a group, of the number the text gives, else
    /// `hybrid_group` (FSDP1 `HYBRID_SHARD` shards within a node); plain FSDP and
    /// Megatron-FSDP (whose CLI default strategy is `optim_grads_params`, frameworks.md §1.4)
    /// are stage 3; a Megatron-FSDP strategy name or a "distributed optimizer" is read as such;
    /// a first word saying there is none (`no`, `none`, `off`, `false`), or plain data
    /// parallelism named with no sharding beside it (`DDP`, `Megatron DDP`, `DP (no sharding)`;
    /// `DDP + distributed optimizer` is ZeRO-1), is no sharding; otherwise the first digit 0–3
    /// is the ZeRO stage.
    pub fn from_wording(text: &str, hybrid_group: u32) -> Option<Zero> {
        let t = text.trim().to_ascii_lowercase().replace('_', "-");
        if t.is_empty() {
            return None;
        }
        let first = t
            .split(|c: char| !c.is_ascii_alphanumeric())
            .find(|w| !w.is_empty())
            .unwrap_or("");
        if matches!(first, "no" | "none" | "off" | "false" | "disabled") {
            return Some(Zero::NONE);
        }
        // Megatron's `--use-distributed-optimizer` however it is written (its `DDP` class runs
        // under it too: `DDP + distributed optimizer` is ZeRO-1).
        let dist_opt = [
            "distributed optimizer",
            "distributed-optimizer",
            "dist-opt",
            "distopt",
        ]
        .iter()
        .any(|p| t.contains(p));
        // Plain data parallelism named (`DDP`, `Megatron DDP`, `DP (no sharding)`) and no
        // sharding beside it.
        let ddp = t
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| w == "ddp");
        let unsharded = ["no sharding", "no-shard", "not sharded", "unsharded"]
            .iter()
            .any(|p| t.contains(p));
        if (ddp || unsharded) && !dist_opt && !t.contains("zero") && !t.contains("fsdp") {
            return Some(Zero::NONE);
        }
        let hybrid = t.contains("hsdp") || t.contains("hybrid");
        let group = if hybrid {
            let digits: String = t
                .chars()
                .skip_while(|c| !c.is_ascii_digit())
                .take_while(|c| c.is_ascii_digit())
                .collect();
            digits
                .parse()
                .ok()
                .filter(|&g: &u32| g >= 2)
                .unwrap_or(hybrid_group)
        } else {
            0
        };
        if let Some((optimizer, grads, params)) = sharded_list(&t) {
            if optimizer && grads && !params {
                return Some(Zero::stage(2).hsdp(group));
            }
        }
        let noreshard = t.contains("not resharded")
            || t.contains("no reshard")
            || t.contains("noreshard")
            || t.contains("no-reshard")
            || t.contains("shard-grad-op");
        let mode = if noreshard {
            Zero::NORESHARD
        } else if t.contains("optim-grads-params") {
            Zero::stage(3)
        } else if t.contains("optim-grads") {
            Zero::stage(2)
        } else if t.contains("fsdp") || hybrid || t.contains("full-shard") {
            Zero::stage(3)
        } else if dist_opt {
            Zero::stage(1)
        } else {
            let d = t.chars().find(|c| c.is_ascii_digit())?;
            match d {
                '0'..='3' => Zero::stage(d as u8 - b'0'),
                _ => return None,
            }
        };
        Some(mode.hsdp(if mode.stage > 0 { group } else { 0 }))
    }
}

/// What a sharding cell says it shards, where it lists it after "shard"/"shards"/"sharding"
/// (`fsdp (shard optimizer+grads; …)`, `shards optimizer states and gradients`): whether the
/// list, up to the next `;`, `)` or `.`, names the optimizer, the gradients, the parameters.
/// `None` when no "shard" is followed by such a list (`full shard`, `shard 16`).
fn sharded_list(t: &str) -> Option<(bool, bool, bool)> {
    let mut found = None;
    for (i, w) in t.match_indices("shard") {
        let rest = &t[i + w.len()..];
        let rest = rest
            .strip_prefix("ing")
            .or_else(|| rest.strip_prefix('s'))
            .unwrap_or(rest);
        let Some(rest) = rest.strip_prefix(' ') else {
            continue;
        };
        let list = rest.split([';', ')', '.']).next().unwrap_or("");
        let optimizer = list.contains("optim");
        let grads = list.contains("grad");
        let params = ["param", "weight", "model"]
            .iter()
            .any(|p| list.contains(p));
        if optimizer || grads || params {
            let (o, g, p) = found.unwrap_or((false, false, false));
            found = Some((o || optimizer, g || grads, p || params));
        }
    }
    found
}

impl fmt::Display for Zero {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.keeps_gathered() {
            f.write_str("3-noreshard")?;
        } else {
            write!(f, "{}", self.stage)?;
        }
        if self.group > 0 {
            write!(f, ":{}", self.group)?;
        }
        Ok(())
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for z in [
            Zero::stage(0),
            Zero::stage(1),
            Zero::stage(2),
            Zero::stage(3),
            Zero::NORESHARD,
            Zero::stage(1).hsdp(8),
            Zero::stage(2).hsdp(4),
            Zero::stage(3).hsdp(8),
            Zero::NORESHARD.hsdp(16),
        ] {
            assert_eq!(Zero::parse(&z.name()), Some(z), "{}", z.name());
        }
        assert_eq!(Zero::parse("FSDP"), Some(Zero::stage(3)));
        assert_eq!(Zero::parse("shard_grad_op"), Some(Zero::NORESHARD));
        assert_eq!(Zero::parse("hsdp:8"), Some(Zero::stage(3).hsdp(8)));
        for bad in ["4", "3:1", "3:0", "0:8", "3:x", "zero", ""] {
            assert_eq!(Zero::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn published_wording() {
        let w = |s| Zero::from_wording(s, 8);
        // Llama 3's cell lists what it shards: optimizer state and gradients, so ZeRO-2.
        assert_eq!(
            w("FSDP (shard optimizer+grads; params not resharded after fwd)"),
            Some(Zero::stage(2))
        );
        assert_eq!(
            w("FSDP, shards optimizer states and gradients"),
            Some(Zero::stage(2))
        );
        assert_eq!(
            w("FSDP (shard optimizer + grads + params)"),
            Some(Zero::stage(3))
        );
        assert_eq!(
            w("FSDP (params not resharded after fwd)"),
            Some(Zero::NORESHARD)
        );
        assert_eq!(
            w("HSDP (sharding optimizer+gradients, 8)"),
            Some(Zero::stage(2).hsdp(8))
        );
        assert_eq!(w("FSDP2 (full shard)"), Some(Zero::stage(3)));
        assert_eq!(w("FSDP FULL_SHARD"), Some(Zero::stage(3)));
        assert_eq!(w("Megatron-FSDP"), Some(Zero::stage(3)));
        assert_eq!(w("ZeRO-1"), Some(Zero::stage(1)));
        assert_eq!(w("1"), Some(Zero::stage(1)));
        assert_eq!(w("ZeRO stage 2"), Some(Zero::stage(2)));
        assert_eq!(w("HSDP (shard 16)"), Some(Zero::stage(3).hsdp(16)));
        assert_eq!(w("FSDP HYBRID_SHARD"), Some(Zero::stage(3).hsdp(8)));
        assert_eq!(w("SHARD_GRAD_OP"), Some(Zero::NORESHARD));
        assert_eq!(w(""), None);
        assert_eq!(w("unknown"), None);
        for none in [
            "no",
            "None",
            "off",
            "DDP",
            "DDP (torch)",
            "0",
            "ZeRO-0",
            "Megatron DDP",
            "PyTorch DDP",
            "DP (no sharding)",
            "NO_SHARD",
        ] {
            assert_eq!(w(none), Some(Zero::NONE), "{none}");
        }
        for dist_opt in [
            "dist-opt",
            "distributed optimizer",
            "DDP + distributed optimizer",
            "--use-distributed-optimizer",
        ] {
            assert_eq!(w(dist_opt), Some(Zero::stage(1)), "{dist_opt}");
        }
    }

    #[test]
    fn shard_size_is_the_group_or_all() {
        assert_eq!(Zero::stage(3).shard_size(64), 64);
        assert_eq!(Zero::stage(3).hsdp(8).shard_size(64), 8);
        assert_eq!(Zero::stage(3).hsdp(8).shard_size(4), 4);
        assert_eq!(Zero::stage(3).hsdp(8).shard_size(12), 4);
    }
}
