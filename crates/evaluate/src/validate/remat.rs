//! MaxText's remat policies as a published row's `recompute` cell names them (`minimal`,
//! `minimal_with_context`, `save_dot_except_mlp`, …), read into Megatron-Core's recompute
//! modules, the vocabulary the plan prices.
//!
//! A policy is a `jax.checkpoint` policy that saves the outputs of the named matmuls and
//! recomputes every other activation of the decoder layer in the backward
//! (`Decoder.get_remat_policy` and `minimal_policy`, `maxtext/layers/nnx_decoders.py` @ maxtext
//! 0.2.5 L1258-1385; the names tag the outputs of the attention's `query_proj`/`key_proj`/
//! `value_proj`/`qkv_proj`, its `context` (the attention kernel's output) and `out_proj`, and a
//! dense MLP's `mlpwi_0`/`mlpwi_1`/`mlpwo`). What a policy recomputes, in Megatron's modules:
//! the norms always (no policy saves a norm's output: `layernorm`); the attention core where
//! `context` is not saved (`core_attn`); the dense MLP where its `mlpwi` outputs are not saved
//! (`mlp`); a MoE layer whole, whose `moe_mlpwi_*`/`moe_mlpwo` no named policy saves (`moe`).
//! Two approximations, both on the slow side: under the minimal policies the activation
//! function's output, recomputed by the run, is kept in the memory model (Megatron's modules
//! have no dense activation of their own); under `save_dot_except_mlpwi` the saved `mlpwo`
//! output is recomputed with the rest of the MLP. Policies whose recompute includes a GEMM
//! the modules cannot name (`save_qkv_proj`, `save_out_proj`: the other attention
//! projections) would be priced too fast and are refused, as are the offloading ones (which
//! tensors went to host memory is not priced).

use autoplan_graph::ModelSpec;
use autoplan_plan::{Recompute, RecomputeModules};

/// How one policy reads: `Ok((context saved, dense MLP's fc1 outputs saved))` for a selective
/// policy, `Err(why)` for one that is refused.
type Reading = Result<(bool, bool), &'static str>;

/// MaxText's policy names (`configs/base.yml` @ maxtext 0.2.5 L447-450 lists them) and how each
/// reads. `full` is not here: it is the cell `full`, every block recomputed whole.
const POLICIES: [(&str, Reading); 13] = [
    ("minimal_with_context", Ok((true, true))),
    ("minimal_with_context_and_quantization", Ok((true, true))),
    // `minimal_flash`: the deprecated name of `minimal_with_context` (nnx_decoders.py L1284-1287).
    ("minimal_flash", Ok((true, true))),
    ("minimal_with_quantization", Ok((false, true))),
    ("minimal", Ok((false, true))),
    ("save_dot_with_context_except_mlp", Ok((true, false))),
    ("save_dot_except_mlpwi", Ok((false, false))),
    ("save_dot_except_mlp", Ok((false, false))),
    (
        "save_qkv_proj",
        Err(
            "saves only the QKV projections, so the run recomputes the attention's output \
             projection, a GEMM Megatron's recompute modules cannot name",
        ),
    ),
    (
        "save_out_proj",
        Err(
            "saves only the output projection, so the run recomputes the QKV projections, \
             GEMMs Megatron's recompute modules cannot name",
        ),
    ),
    (
        "qkv_proj_offloaded",
        Err("offloads the QKV projections to host memory, which is not priced"),
    ),
    (
        "minimal_offloaded",
        Err("offloads the saved matmul outputs to host memory, which is not priced"),
    ),
    (
        "custom",
        Err(
            "names its saved, offloaded and recomputed tensors in the run's configuration, \
             which the row does not give",
        ),
    ),
];

/// The MaxText policy a `recompute` cell names (lower case), as a whole word (`remat_policy:
/// minimal_with_context`, `minimal (MaxText)`), the longest name first; `None` where it names
/// none.
fn policy(cell: &str) -> Option<(&'static str, Reading)> {
    let c = cell.to_ascii_lowercase().replace('-', "_");
    let words: Vec<&str> = c
        .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    POLICIES
        .iter()
        .filter(|(name, _)| words.contains(name))
        .max_by_key(|(name, _)| name.len())
        .copied()
}

/// The recompute a cell naming a MaxText policy means: selective (its modules are
/// [`remat_modules`]'), or why the policy is refused; `None` where the cell names no policy.
pub(crate) fn remat_recompute(cell: &str) -> Option<Result<Recompute, String>> {
    let (name, reading) = policy(cell)?;
    Some(match reading {
        Ok(_) => Ok(Recompute::Selective),
        Err(why) => Err(format!(
            "recompute `{}`: MaxText's remat policy `{name}` {why}",
            cell.trim()
        )),
    })
}

/// The recompute modules of the MaxText policy a cell names, for `model` (a module naming a
/// part the model lacks is left out: the dense MLP of an all-MoE model, the MoE layer of a
/// dense one); `None` where the cell names no policy or a refused one.
pub(crate) fn remat_modules(cell: &str, model: &ModelSpec) -> Option<RecomputeModules> {
    let (_, Ok((context, mlpwi))) = policy(cell)? else {
        return None;
    };
    let mut m = RecomputeModules::LAYERNORM;
    if !context {
        m |= RecomputeModules::CORE_ATTN;
    }
    if !mlpwi && model.dense_blocks() > 0 {
        m |= RecomputeModules::MLP;
    }
    if model.moe.is_some() {
        m |= RecomputeModules::MOE;
    }
    Some(RecomputeModules(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_read_by_name_longest_first() {
        assert_eq!(
            policy("minimal_with_context").unwrap().0,
            "minimal_with_context"
        );
        assert_eq!(policy("remat_policy: minimal").unwrap().0, "minimal");
        assert_eq!(
            policy("Minimal-With-Context").unwrap().0,
            "minimal_with_context"
        );
        assert_eq!(
            policy("save_dot_except_mlpwi").unwrap().0,
            "save_dot_except_mlpwi"
        );
        assert!(policy("selective").is_none());
        assert!(policy("full").is_none());
        assert!(policy("minimalist").is_none());
        assert!(matches!(remat_recompute("custom"), Some(Err(_))));
        assert!(matches!(
            remat_recompute("minimal_flash"),
            Some(Ok(Recompute::Selective))
        ));
    }
}
