//! The dense MLP and MoE nodes of a block (GELU or SwiGLU; routed and shared experts).

use super::{Gemm, Layer, LayerKind, TpSplit, B16};
use crate::ModelSpec;

impl ModelSpec {
    /// Weight matrices of one MLP of hidden size `f`: gated (SwiGLU: gate, up `h×f`, down
    /// `f×h`) or ungated (GELU: fc1 `h×f`, fc2 `f×h`).
    pub(super) fn mlp_matrices(&self, f: u64) -> u64 {
        let h = self.hidden as u64;
        (self.mlp.input_matrices() + 1) * h * f
    }

    pub(super) fn mlp_bias(&self, f: u64) -> f64 {
        if !self.bias {
            return 0.0;
        }
        let h = self.hidden as u64;
        (self.mlp.input_matrices() * f + h) as f64
    }

    /// Bytes stored for backward per token passing through one MLP of width `f`, input
    /// excluded: GELU stores its input and output (Korthikanti: 8sbh + 8sbh at f = 4h);
    /// SwiGLU stores gate and up outputs and the product (down input).
    pub(super) fn mlp_inner_act(&self, f: u64) -> f64 {
        B16 * f as f64 * (self.mlp.input_matrices() + 1) as f64
    }

    pub(super) fn push_mlp_gemms(&self, l: &mut Layer, f: u64, count: u32, rows_per_token: f64) {
        let h = self.hidden as u64;
        let (first, down): (&[&'static str], _) = match self.mlp.input_matrices() {
            2 => (&["gate", "up"], "down"),
            _ => (&["fc1"], "fc2"),
        };
        for &name in first {
            l.gemms.push(Gemm {
                name,
                in_features: h,
                out_features: f,
                count,
                rows_per_token,
                split: TpSplit::Column,
                owns_weights: true,
            });
        }
        l.gemms.push(Gemm {
            name: down,
            in_features: f,
            out_features: h,
            count,
            rows_per_token,
            split: TpSplit::Row,
            owns_weights: true,
        });
    }

    /// Parameters of one dense MLP node (matrices, biases, pre-norm) of width `ffn_hidden`.
    pub fn dense_mlp_params(&self) -> f64 {
        let f = self.ffn_hidden as u64;
        self.mlp_matrices(f) as f64 + self.mlp_bias(f) + self.norm_params(self.hidden)
    }

    /// The dense MLP node of one block.
    pub fn dense_mlp_layer(&self, block: u32) -> Layer {
        let f = self.ffn_hidden as u64;
        let hf = self.hidden as f64;
        let mut l = Layer::empty(LayerKind::DenseMlp, Some(block), self.hidden);
        self.push_mlp_gemms(&mut l, f, 1, 1.0);
        l.params = self.dense_mlp_params();
        l.active_params = l.params;
        l.finish_gemm_flops();
        // Norm input + fc1 input (2sbh each) + inner + dropout mask (sbh): 21·h at f = 4h GELU.
        // In a parallel block the norm's input is the block input the attention node also
        // reads: counted here as the norm's traffic, stored once by the memory crate
        // (`dense_mlp` there).
        l.act_bytes_per_token =
            2.0 * B16 * hf + self.mlp_inner_act(f) + if self.dropout() { hf } else { 0.0 };
        // A parallel block sums the MLP's partial output with the attention's and reduces the
        // sum once (GPT-NeoX `gpt_j_residual`, Black+22 §2.1: "a single all-reduce"); the MLP's
        // own input-gradient reduction (Megatron's `f`) stays.
        l.tp_fwd_allreduce_elems_per_token = if self.parallel_block { 0.0 } else { hf };
        l.tp_bwd_allreduce_elems_per_token = hf;
        l
    }

    /// Parameters of ONE routed expert (0 without MoE).
    pub fn routed_expert_params(&self) -> f64 {
        self.moe.as_ref().map_or(0.0, |m| {
            let f = m.expert_ffn_hidden as u64;
            self.mlp_matrices(f) as f64 + self.mlp_bias(f)
        })
    }

    /// Parameters of all shared experts of one MoE block.
    pub fn shared_experts_params(&self) -> f64 {
        self.moe.as_ref().map_or(0.0, |m| {
            let f = m.shared_ffn_hidden as u64;
            m.shared_experts as f64 * (self.mlp_matrices(f) as f64 + self.mlp_bias(f))
        })
    }

    /// Router (gate) parameters of one MoE block: `h × experts`, no bias.
    pub fn router_params(&self) -> f64 {
        self.moe
            .as_ref()
            .map_or(0.0, |m| self.hidden as f64 * m.experts as f64)
    }

    /// The MoE node of one block: pre-norm, router, routed experts, shared experts.
    pub fn moe_layer(&self, block: u32) -> Layer {
        let mut l = Layer::empty(LayerKind::Moe, Some(block), self.hidden);
        let Some(m) = &self.moe else {
            return l;
        };
        let h = self.hidden as u64;
        let hf = h as f64;
        let k = m.expected_experts_per_token();
        l.experts = m.experts;
        l.expert_params = self.routed_expert_params();
        l.push_gemm("router", h, m.experts as u64, TpSplit::Replicated);
        self.push_mlp_gemms(
            &mut l,
            m.expert_ffn_hidden as u64,
            m.experts,
            k / m.experts as f64,
        );
        for _ in 0..m.shared_experts {
            self.push_mlp_gemms(&mut l, m.shared_ffn_hidden as u64, 1, 1.0);
        }
        let fixed =
            self.norm_params(self.hidden) + self.router_params() + self.shared_experts_params();
        l.params = fixed + m.experts as f64 * l.expert_params;
        l.active_params = fixed + m.top_k as f64 * l.expert_params;
        l.finish_gemm_flops();
        // Norm input and output (router and shared-expert input), fp32 router logits, then per
        // routed copy its permuted input and the expert's inner activations, and the shared
        // experts' inner activations.
        l.act_bytes_per_token = 2.0 * B16 * hf
            + 4.0 * m.experts as f64
            + k * (B16 * hf + self.mlp_inner_act(m.expert_ffn_hidden as u64))
            + m.shared_experts as f64 * self.mlp_inner_act(m.shared_ffn_hidden as u64)
            + if self.dropout() { hf } else { 0.0 };
        l.tp_fwd_allreduce_elems_per_token = hf;
        l.tp_bwd_allreduce_elems_per_token = hf;
        l.ep_dispatch_elems_per_token = hf * k;
        l
    }
}
