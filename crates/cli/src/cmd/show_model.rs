//! `autoplan show --model X` (totals and a per-node table, identical blocks collapsed) and
//! `autoplan models` (the bundled library, a line each).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use autoplan_graph::{bundled_models, resolve_model, Attention, Layer, ModelSpec};

use super::Format;
use crate::fmt::{serde_name, si_count};

/// Identical nodes gathered into one row: the first node, how many, and their block indices.
struct Row {
    layer: Layer,
    count: usize,
    blocks: Vec<u32>,
}

/// Group identical nodes (same kind and accounting), in order of first appearance.
fn rows(m: &ModelSpec) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    for l in m.layers() {
        match rows.iter_mut().find(|r| r.layer.same_shape(&l)) {
            Some(r) => {
                r.count += 1;
                r.blocks.extend(l.block);
            }
            None => rows.push(Row {
                blocks: l.block.into_iter().collect(),
                layer: l,
                count: 1,
            }),
        }
    }
    rows
}

/// "3" or "3-60" or "0,2,5" for the block indices of a row.
fn block_span(blocks: &[u32]) -> String {
    match blocks {
        [] => "-".into(),
        [b] => b.to_string(),
        [first, .., last] if (*last - *first) as usize + 1 == blocks.len() => {
            format!("{first}-{last}")
        }
        // A regular stride (the windowed or full blocks of a sliding-window pattern).
        [first, second, .., last]
            if blocks.len() > 3 && blocks.windows(2).all(|w| w[1] - w[0] == second - first) =>
        {
            format!("{first},{second},…,{last}")
        }
        _ => blocks
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
    }
}

fn attention_desc(m: &ModelSpec) -> String {
    let window = match m.window {
        None => String::new(),
        Some(w) if w.full_every == 0 => format!(", sliding window {} on every block", w.tokens),
        Some(w) => format!(
            ", sliding window {} (1 block in {} full)",
            w.tokens, w.full_every
        ),
    };
    let kind = match m.attention {
        Attention::Gqa { kv_heads, head_dim } if kv_heads == m.heads => {
            format!("MHA {} heads of {head_dim}", m.heads)
        }
        Attention::Gqa { kv_heads, head_dim } => {
            format!("GQA {} heads / {kv_heads} KV heads of {head_dim}", m.heads)
        }
        Attention::Mla {
            q_lora_rank,
            kv_lora_rank,
            qk_nope_head_dim,
            qk_rope_head_dim,
            v_head_dim,
        } => format!(
            "MLA {} heads, q rank {}, kv rank {kv_lora_rank}, qk {qk_nope_head_dim}+{qk_rope_head_dim}, v {v_head_dim}",
            m.heads,
            q_lora_rank.map_or("none".to_string(), |r| r.to_string()),
        ),
    };
    kind + &window
}

pub fn run(name: &str, format: Format) -> anyhow::Result<ExitCode> {
    let m = resolve_model(name).with_context(|| format!("cannot load model `{name}`"))?;
    let mut out = std::io::stdout().lock();
    match format {
        Format::Table => table(&mut out, &m)?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &json(&m))?;
            writeln!(out)?;
        }
        Format::Csv => csv_rows(&mut out, &m)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn table(out: &mut impl Write, m: &ModelSpec) -> anyhow::Result<()> {
    let t = &m.training;
    writeln!(out, "model {} ({})", m.name, serde_name(&m.family))?;
    let blocks = match &m.moe {
        None => format!("{} blocks", m.layers),
        Some(moe) => format!(
            "{} blocks ({} dense + {} MoE: {} experts of {}, top-{}, {} shared)",
            m.layers,
            m.dense_blocks(),
            m.moe_blocks(),
            moe.experts,
            moe.expert_ffn_hidden,
            moe.top_k,
            moe.shared_experts
        ),
    };
    writeln!(out, "  {blocks}, hidden {}, vocab {}", m.hidden, m.vocab)?;
    writeln!(
        out,
        "  {}, {} MLP{}, {}, {} positions, {} embeddings{}{}{}",
        attention_desc(m),
        serde_name(&m.mlp),
        if m.dense_blocks() > 0 {
            format!(" {}", m.ffn_hidden)
        } else {
            String::new()
        },
        serde_name(&m.norm),
        serde_name(&m.positions),
        if m.tied_embeddings { "tied" } else { "untied" },
        if m.bias { ", biases" } else { "" },
        if m.embedding_norm {
            ", embedding norm"
        } else {
            ""
        },
        if m.parallel_block {
            ", parallel attention+MLP blocks"
        } else {
            ""
        }
    )?;
    writeln!(
        out,
        "  training: seq_len {}, global batch {} sequences, {}, {}",
        t.seq_len,
        t.global_batch,
        serde_name(&t.precision),
        serde_name(&t.optimizer)
    )?;
    writeln!(out)?;
    write!(
        out,
        "  total params          {:>10}",
        si_count(m.total_params())
    )?;
    if m.mtp_modules > 0 {
        write!(
            out,
            "   (+{} in {} MTP module(s))",
            si_count(m.mtp_params()),
            m.mtp_modules
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "  active params         {:>10}   ({} without the embedding table)",
        si_count(m.active_params()),
        si_count(m.active_params_excluding_embedding())
    )?;
    writeln!(
        out,
        "  forward FLOP/token    {:>10}   (×3 for a training step without recompute{})",
        si_count(m.flops_per_token()),
        if m.mtp_modules > 0 {
            format!("; MTP adds {}", si_count(m.mtp_flops_per_token()))
        } else {
            String::new()
        }
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "  {:<14} {:>7} {:>6} {:>10} {:>10} {:>12} {:>12} {:>12} {:>12}",
        "node",
        "blocks",
        "count",
        "params",
        "active",
        "GEMM FLOP/t",
        "attn FLOP/t",
        "act B/t",
        "score B/t"
    )?;
    for r in rows(m) {
        let l = &r.layer;
        writeln!(
            out,
            "  {:<14} {:>7} {:>6} {:>10} {:>10} {:>12} {:>12} {:>12} {:>12}",
            l.kind.name(),
            block_span(&r.blocks),
            r.count,
            si_count(l.params),
            si_count(l.active_params),
            si_count(l.gemm_flops_per_token),
            si_count(l.attn_core_flops_per_token),
            si_count(l.act_bytes_per_token),
            si_count(l.attn_score_bytes_per_token),
        )?;
    }
    writeln!(
        out,
        "\n  per node; /t = per token of one forward pass at seq_len {}; act/score B = bytes kept for backward (Korthikanti 2022)",
        t.seq_len
    )?;
    Ok(())
}

fn json(m: &ModelSpec) -> serde_json::Value {
    let t = &m.training;
    let nodes: Vec<serde_json::Value> = rows(m)
        .into_iter()
        .map(|r| {
            let mut v = serde_json::to_value(&r.layer).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.remove("block");
                o.insert("count".into(), r.count.into());
                o.insert("blocks".into(), r.blocks.into());
            }
            v
        })
        .collect();
    serde_json::json!({
        "name": m.name,
        "family": m.family,
        "layers": m.layers,
        "dense_blocks": m.dense_blocks(),
        "moe_blocks": m.moe_blocks(),
        "hidden": m.hidden,
        "heads": m.heads,
        "kv_heads": m.kv_heads(),
        "sliding_window": m.window.map(|w| serde_json::json!({
            "tokens": w.tokens,
            "full_attention_every": w.full_every,
            "windowed_blocks": m.windowed_blocks(),
        })),
        "vocab": m.vocab,
        "embedding_norm": m.embedding_norm,
        "parallel_block": m.parallel_block,
        "total_params": m.total_params(),
        "active_params": m.active_params(),
        "active_params_excluding_embedding": m.active_params_excluding_embedding(),
        "mtp_modules": m.mtp_modules,
        "mtp_params": m.mtp_params(),
        "flops_per_token": m.flops_per_token(),
        "mtp_flops_per_token": m.mtp_flops_per_token(),
        "training": {
            "seq_len": t.seq_len,
            "global_batch": t.global_batch,
            "precision": t.precision,
            "optimizer": t.optimizer,
        },
        "nodes": nodes,
    })
}

fn csv_rows(out: &mut impl Write, m: &ModelSpec) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "model",
        "node",
        "blocks",
        "count",
        "params",
        "active_params",
        "gemm_flops_per_token",
        "attn_core_flops_per_token",
        "act_bytes_per_token",
        "attn_score_bytes_per_token",
        "tp_fwd_allreduce_elems_per_token",
        "tp_bwd_allreduce_elems_per_token",
        "cp_kv_elems_per_token",
        "ep_dispatch_elems_per_token",
    ])?;
    for r in rows(m) {
        let l = &r.layer;
        w.write_record([
            m.name.clone(),
            l.kind.name().to_string(),
            block_span(&r.blocks),
            r.count.to_string(),
            l.params.to_string(),
            l.active_params.to_string(),
            l.gemm_flops_per_token.to_string(),
            l.attn_core_flops_per_token.to_string(),
            l.act_bytes_per_token.to_string(),
            l.attn_score_bytes_per_token.to_string(),
            l.tp_fwd_allreduce_elems_per_token.to_string(),
            l.tp_bwd_allreduce_elems_per_token.to_string(),
            l.cp_kv_elems_per_token.to_string(),
            l.ep_dispatch_elems_per_token.to_string(),
        ])?;
    }
    w.flush()?;
    Ok(())
}

pub fn list() -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<18} {:<10} {:>10} {:>10}",
        "model", "family", "total", "active"
    )?;
    for (name, _) in bundled_models() {
        let m = resolve_model(name).with_context(|| format!("bundled model `{name}`"))?;
        writeln!(
            out,
            "{:<18} {:<10} {:>10} {:>10}",
            name,
            serde_name(&m.family),
            si_count(m.total_params()),
            si_count(m.active_params())
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_blocks_collapse_into_one_row() {
        let m = resolve_model("deepseek-v3").unwrap();
        let r = rows(&m);
        let kinds: Vec<(&str, usize, String)> = r
            .iter()
            .map(|r| (r.layer.kind.name(), r.count, block_span(&r.blocks)))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("embedding", 1, "-".into()),
                ("attention", 61, "0-60".into()),
                ("dense-mlp", 3, "0-2".into()),
                ("moe", 58, "3-60".into()),
                ("final-norm", 1, "-".into()),
                ("lm-head", 1, "-".into()),
                ("cross-entropy", 1, "-".into()),
                ("mtp", 1, "0".into()),
            ]
        );
        let total: f64 = r
            .iter()
            .filter(|r| r.layer.kind.name() != "mtp")
            .map(|r| r.count as f64 * r.layer.params)
            .sum();
        assert!((total / m.total_params() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn json_has_numeric_totals() {
        let v = json(&resolve_model("mixtral-8x7b").unwrap());
        assert!(v["total_params"].as_f64().unwrap() > 46e9);
        assert!(v["active_params"].as_f64().unwrap() > 12e9);
        assert_eq!(v["nodes"][2]["count"].as_u64(), Some(32));
    }

    #[test]
    fn si_suffixes() {
        assert_eq!(si_count(671.026e9), "671.03B");
        assert_eq!(si_count(1.5e12), "1.50T");
        assert_eq!(si_count(12.0), "12");
    }
}
