//! What the evaluator prices, per class of layer: the weight matrices and per-token figures of
//! each kind of layer, precomputed from the graph once per model ([`Class`]), and the named
//! index of each class ([`ClassId`]).

use autoplan_graph::{LayerKind, ModelSpec, TpSplit};

/// The classes of layer the evaluator prices, in the order of `Evaluator::classes` (an array
/// indexed by `id as usize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClassId {
    Emb = 0,
    Attn = 1,
    Mlp = 2,
    Moe = 3,
    Norm = 4,
    Head = 5,
    Ce = 6,
    Mtp = 7,
}

/// Number of classes (the length of the per-class arrays).
pub(super) const NCLASS: usize = 8;

impl ClassId {
    /// Every class, in index order.
    pub(super) const ALL: [ClassId; NCLASS] = [
        ClassId::Emb,
        ClassId::Attn,
        ClassId::Mlp,
        ClassId::Moe,
        ClassId::Norm,
        ClassId::Head,
        ClassId::Ce,
        ClassId::Mtp,
    ];

    /// The graph's layer kind of the class.
    pub(super) const fn layer_kind(self) -> LayerKind {
        match self {
            ClassId::Emb => LayerKind::Embedding,
            ClassId::Attn => LayerKind::Attention,
            ClassId::Mlp => LayerKind::DenseMlp,
            ClassId::Moe => LayerKind::Moe,
            ClassId::Norm => LayerKind::FinalNorm,
            ClassId::Head => LayerKind::LmHead,
            ClassId::Ce => LayerKind::CrossEntropy,
            ClassId::Mtp => LayerKind::Mtp,
        }
    }

    /// A transformer block's part (one per block, or per MTP module): what recompute repeats.
    #[inline]
    pub(super) const fn is_block(self) -> bool {
        matches!(
            self,
            ClassId::Attn | ClassId::Mlp | ClassId::Moe | ClassId::Mtp
        )
    }
}

/// One weight matrix in the form the hot path needs.
#[derive(Debug, Clone, Copy)]
pub(super) struct G {
    pub(super) in_f: f64,
    pub(super) out_f: f64,
    pub(super) count: f64,
    pub(super) rows_per_token: f64,
    pub(super) split: TpSplit,
    /// A routed expert (sharded over `ep` and `moe_tp`, tokens arrive by dispatch).
    pub(super) expert: bool,
    /// Its input is a norm's output that Megatron-Core computes inside the GEMM's module,
    /// Transformer Engine's `LayerNormLinear` (`gpt_layer_specs.py` @ core 0.19.2,
    /// `get_gpt_layer_with_transformer_engine_submodules`: GQA's `linear_qkv` and a dense MLP's
    /// `linear_fc1`; MLA's `linear_q_up_proj` / `linear_kv_up_proj` behind its q/kv latent
    /// norms), so the norm kernel can quantize its own output (`compute.rs::gemm_fwd_parts`).
    /// A MoE layer's `pre_mlp_layernorm` is a module of its own: its GEMMs are not.
    pub(super) norm_fed: bool,
}

/// One kind of layer, precomputed from the graph (all blocks of a kind are identical).
#[derive(Debug, Clone)]
pub(super) struct Class {
    pub(super) kind: LayerKind,
    pub(super) gemms: Vec<G>,
    /// MLA's up-projections `q_b`, `kv_b` (`mla_up_proj` recompute); empty otherwise.
    pub(super) up_proj: Vec<G>,
    /// The shared experts' GEMMs (`shared_experts` recompute); empty otherwise.
    pub(super) shared: Vec<G>,
    pub(super) attn_core: f64,
    /// Q + K + V + O elements per token (attention-core HBM traffic and Ulysses all-to-alls).
    pub(super) q_elems: f64,
    pub(super) o_elems: f64,
    pub(super) act: f64,
    pub(super) score: f64,
    /// What the profile's unfused elementwise ops add (set by `Evaluator::new`: it depends
    /// on the options; zero when every chain is fused).
    pub(super) unfused: super::UnfusedBytes,
    pub(super) tp_fwd: f64,
    pub(super) tp_bwd: f64,
    pub(super) cp_kv: f64,
    pub(super) ep_elems: f64,
    pub(super) non_expert_params: f64,
    pub(super) expert_params: f64,
    /// Weights of the GEMMs every TP rank holds whole (MLA's down-projections, the MoE
    /// router): under SP each rank computes their gradient on its own rows.
    pub(super) replicated_params: f64,
}

impl Class {
    fn of(model: &ModelSpec, l: &autoplan_graph::Layer) -> Class {
        let heads = model.heads as f64;
        let has_attn = l.attn_core_flops_per_token > 0.0;
        let mla = matches!(model.attention, autoplan_graph::Attention::Mla { .. });
        let g_of = |g: &autoplan_graph::Gemm| G {
            in_f: g.in_features as f64,
            out_f: g.out_features as f64,
            count: g.count as f64,
            rows_per_token: g.rows_per_token,
            split: g.split,
            expert: g.count > 1 && l.experts > 0,
            norm_fed: match (l.kind, g.name) {
                (LayerKind::Attention, "q" | "k" | "v") => !mla,
                (LayerKind::Attention, "q_b" | "kv_b") => mla,
                (LayerKind::DenseMlp, "gate" | "up" | "fc1") => true,
                _ => false,
            },
        };
        let gemms = fuse_shared_input(l.gemms.iter().map(g_of));
        let replicated_params = gemms
            .iter()
            .filter(|g| !g.expert && g.split == TpSplit::Replicated)
            .map(|g| g.in_f * g.out_f * g.count)
            .sum();
        let shared = if l.experts > 0 {
            gemms
                .iter()
                .filter(|g| !g.expert && g.split != TpSplit::Replicated)
                .copied()
                .collect()
        } else {
            Vec::new()
        };
        Class {
            kind: l.kind,
            gemms,
            up_proj: l
                .gemms
                .iter()
                .filter(|g| matches!(g.name, "q_b" | "kv_b"))
                .map(g_of)
                .collect(),
            shared,
            attn_core: l.attn_core_flops_per_token,
            q_elems: if has_attn {
                heads * model.head_dim() as f64
            } else {
                0.0
            },
            o_elems: if has_attn {
                heads * model.v_head_dim() as f64
            } else {
                0.0
            },
            act: l.act_bytes_per_token,
            score: l.attn_score_bytes_per_token,
            unfused: super::UnfusedBytes::default(),
            tp_fwd: l.tp_fwd_allreduce_elems_per_token,
            tp_bwd: l.tp_bwd_allreduce_elems_per_token,
            cp_kv: l.cp_kv_elems_per_token,
            ep_elems: l.ep_dispatch_elems_per_token,
            non_expert_params: l.non_expert_params(),
            expert_params: l.experts as f64 * l.expert_params,
            replicated_params,
        }
    }

    /// A class the model does not have: no work, no parameters.
    fn empty(kind: LayerKind) -> Class {
        Class {
            kind,
            gemms: Vec::new(),
            up_proj: Vec::new(),
            shared: Vec::new(),
            attn_core: 0.0,
            q_elems: 0.0,
            o_elems: 0.0,
            act: 0.0,
            score: 0.0,
            unfused: super::UnfusedBytes::default(),
            tp_fwd: 0.0,
            tp_bwd: 0.0,
            cp_kv: 0.0,
            ep_elems: 0.0,
            non_expert_params: 0.0,
            expert_params: 0.0,
            replicated_params: 0.0,
        }
    }

    /// The MLP class an MTP module repeats: its MoE layer's if it has experts.
    pub(super) fn mtp_mlp(&self) -> ClassId {
        if self.expert_params > 0.0 {
            ClassId::Moe
        } else {
            ClassId::Mlp
        }
    }

    /// The shared experts run tensor-parallel (a MoE layer with TP-split non-expert GEMMs).
    pub(super) fn has_tp_shared_experts(&self) -> bool {
        self.gemms
            .iter()
            .any(|g| !g.expert && g.split != TpSplit::Replicated)
    }
}

/// The classes of `model`, indexed by [`ClassId`]; the ones the model lacks are empty.
pub(super) fn classes_of(model: &ModelSpec) -> Vec<Class> {
    let layers = model.layers();
    let mut classes: Vec<Class> = ClassId::ALL
        .iter()
        .map(|&id| {
            let k = id.layer_kind();
            layers
                .iter()
                .find(|l| l.kind == k)
                .map_or(Class::empty(k), |l| Class::of(model, l))
        })
        .collect();
    // Sliding-window blocks share the attention class at the model's mean attention-core
    // work: exact for a stage holding whole periods of the window pattern, within one
    // block's difference otherwise.
    classes[ClassId::Attn as usize].attn_core = model.mean_attn_core_flops_per_token();
    classes
}

/// The MTP class's GEMMs are its projection followed by exactly those of the attention,
/// MLP/MoE and head classes (so their times can be reused).
pub(super) fn mtp_reuses(classes: &[Class]) -> bool {
    let mtp = &classes[ClassId::Mtp as usize];
    let mlp = mtp.mtp_mlp() as usize;
    !mtp.gemms.is_empty()
        && mtp.gemms.len()
            == 1 + classes[ClassId::Attn as usize].gemms.len()
                + classes[mlp].gemms.len()
                + classes[ClassId::Head as usize].gemms.len()
}

/// The GEMMs as the framework launches them: consecutive column-parallel matrices that read the
/// same input are one GEMM with their output features concatenated — Megatron-Core's fused
/// `linear_qkv` (q, k, v of MHA/GQA) and `linear_fc1` (SwiGLU's gate and up, per expert too).
/// The graph lists them apart because their parameters and TP splits are separate facts; one
/// launch of the sum has the larger GEMM's efficiency.
fn fuse_shared_input(gemms: impl Iterator<Item = G>) -> Vec<G> {
    let mut out: Vec<G> = Vec::new();
    for g in gemms {
        match out.last_mut() {
            Some(p)
                if p.split == TpSplit::Column
                    && g.split == TpSplit::Column
                    && p.in_f == g.in_f
                    && p.count == g.count
                    && p.rows_per_token == g.rows_per_token
                    && p.expert == g.expert
                    && p.norm_fed == g.norm_fed =>
            {
                p.out_f += g.out_f;
            }
            _ => out.push(g),
        }
    }
    out
}
