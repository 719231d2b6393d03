//! Predicting the rows of `collectives_measured.csv` (measured NCCL / DeepEP collective
//! bandwidths and latencies). Parsing the CSV is the caller's (the CLI and the tests); this
//! module maps one row's hardware and algorithm to a model instance and compares.
//!
//! Comparison: rows with a `busbw_gbps` compare bus bandwidth (nccl-tests convention,
//! [`Collective::busbw_factor`]) and must be within 20%; rows with only `time_us`
//! (small-message latencies) compare time and must be within 30%.

use autoplan_cluster::{Cluster, GroupPlacement};

use crate::{calibration, AlgoMode, Algorithm, Collective, CostModel, Protocol};

/// One row of `collectives_measured.csv`, with its optional cells as `Option`; deserializes
/// straight from the CSV's header names.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct MeasuredRow {
    pub id: String,
    pub hardware: String,
    pub collective: String,
    pub algorithm_used: String,
    pub ranks: Option<u32>,
    pub nodes: Option<u32>,
    pub gpus_per_node: Option<u32>,
    pub bytes: Option<f64>,
    pub busbw_gbps: Option<f64>,
    pub time_us: Option<f64>,
    #[serde(default)]
    pub notes: String,
}

/// What a row is compared on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Bus bandwidth, tolerance 20%.
    Busbw,
    /// Time, tolerance 30%.
    Time,
}

impl Metric {
    /// Allowed relative error.
    pub fn tolerance(self) -> f64 {
        match self {
            Metric::Busbw => 0.20,
            Metric::Time => 0.30,
        }
    }
}

/// A row the model expresses, with its prediction.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub id: String,
    pub cluster: String,
    pub collective: Collective,
    pub group: GroupPlacement,
    pub bytes: f64,
    pub mode: AlgoMode,
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    pub metric: Metric,
    /// Measured value: GB/s for busbw, µs for time.
    pub measured: f64,
    /// Predicted value, same unit.
    pub predicted: f64,
    /// How the bytes were obtained when the row has none.
    pub bytes_note: Option<&'static str>,
}

impl Prediction {
    /// Signed relative error (predicted − measured) / measured.
    pub fn error(&self) -> f64 {
        (self.predicted - self.measured) / self.measured
    }
    /// Within the metric's tolerance.
    pub fn passes(&self) -> bool {
        self.error().abs() <= self.metric.tolerance()
    }
}

/// Why a row cannot be expressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unexpressible {
    pub id: String,
    pub reason: String,
    /// The blank column the row needs, where a blank cell is the reason (the data lacks the
    /// fact); `None` where the model cannot express what the row gives.
    pub blank: Option<&'static str>,
}

/// The reference machine of a `hardware` cell, built from [`calibration`]'s presets.
pub fn hardware_cluster(hardware: &str, nodes: u32) -> Option<Cluster> {
    let h = hardware.to_ascii_uppercase();
    if h.contains("H800") {
        Some(calibration::hgx_h800(nodes))
    } else if h.contains("H100") {
        Some(calibration::dgx_h100(nodes))
    } else if h.contains("A100") {
        Some(calibration::dgx_a100(nodes))
    } else {
        None
    }
}

fn collective_of(cell: &str) -> Option<Collective> {
    let c = cell.to_ascii_lowercase();
    let name = c.split_whitespace().next().unwrap_or("");
    Some(match name {
        "allreduce" => Collective::AllReduce,
        "allgather" => Collective::AllGather,
        "reducescatter" => Collective::ReduceScatter,
        "alltoall" => Collective::AllToAll,
        "broadcast" => Collective::Broadcast,
        "reduce" => Collective::Reduce,
        "sendrecv" => Collective::SendRecv,
        _ => return None,
    })
}

/// How the row's algorithm cell maps to a mode: "nccl-default…" → NCCL's tuner; "ring …"
/// forced → ring; DeepEP's kernels (pairwise intra-node, NVLink-forwarded RDMA across nodes)
/// are not NCCL's → the cheapest of the seeds' full menu (library `any`).
fn mode_of(cell: &str) -> Option<AlgoMode> {
    let c = cell.to_ascii_lowercase();
    if c.starts_with("nccl-default") {
        Some(AlgoMode::NcclTuner)
    } else if c.starts_with("ring") {
        Some(AlgoMode::Fixed(Algorithm::Ring))
    } else if c.starts_with("deepep") {
        Some(AlgoMode::Any)
    } else {
        None
    }
}

/// DeepEP's benchmark message (collectives.md §4.5, the rows' notes): 4096 tokens of hidden
/// 7168 to top-8 experts, 1 byte (FP8) per element for dispatch, 2 (BF16) for combine; the
/// per-rank send buffer.
fn deepep_bytes(row: &MeasuredRow) -> Option<(f64, &'static str)> {
    if !row
        .algorithm_used
        .to_ascii_lowercase()
        .starts_with("deepep")
    {
        return None;
    }
    let tokens_x_hidden_x_topk = 4096.0 * 7168.0 * 8.0;
    if row.collective.contains("combine") {
        Some((
            tokens_x_hidden_x_topk * 2.0,
            "DeepEP benchmark: 4096 tokens x 7168 hidden x top-8 x 2 B (BF16 combine)",
        ))
    } else {
        Some((
            tokens_x_hidden_x_topk,
            "DeepEP benchmark: 4096 tokens x 7168 hidden x top-8 x 1 B (FP8 dispatch)",
        ))
    }
}

/// Predict one row on the reference machines of [`calibration`], or say why it cannot be
/// expressed.
pub fn predict(row: &MeasuredRow) -> Result<Prediction, Unexpressible> {
    predict_on(row, hardware_cluster)
}

/// Predict one row on the machine `machine(hardware, nodes)` returns for its `hardware` cell
/// (e.g. a bundled cluster), or say why it cannot be expressed.
pub fn predict_on(
    row: &MeasuredRow,
    machine: impl Fn(&str, u32) -> Option<Cluster>,
) -> Result<Prediction, Unexpressible> {
    let no = |reason: String| Unexpressible {
        id: row.id.clone(),
        reason,
        blank: None,
    };
    let blank = |column: &'static str, reason: &str| Unexpressible {
        id: row.id.clone(),
        reason: format!("{column} blank: {reason}"),
        blank: Some(column),
    };
    let op = collective_of(&row.collective)
        .ok_or_else(|| no(format!("collective {:?} not modelled", row.collective)))?;
    let mode = mode_of(&row.algorithm_used)
        .ok_or_else(|| no(format!("algorithm {:?} not mapped", row.algorithm_used)))?;
    let ppn = row
        .gpus_per_node
        .ok_or_else(|| blank("gpus_per_node", "GPUs per node not given"))?;
    let nodes = row
        .nodes
        .ok_or_else(|| blank("nodes", "node count not given"))?;
    let ranks = match row.ranks {
        Some(r) => r,
        None => nodes
            .checked_mul(ppn)
            .ok_or_else(|| no(format!("{nodes} nodes × {ppn} GPUs overflows")))?,
    };
    if ranks == 0 || nodes == 0 || ranks % nodes != 0 {
        return Err(no(format!(
            "ranks {ranks} not a whole number per node over {nodes} nodes"
        )));
    }
    let cluster = machine(&row.hardware, nodes).ok_or_else(|| {
        no(format!(
            "no reference machine for hardware {:?}",
            row.hardware
        ))
    })?;
    let group = GroupPlacement {
        size: ranks,
        ranks_per_node: ranks / nodes,
        nodes,
    };
    let (bytes, bytes_note) = match (row.bytes, deepep_bytes(row)) {
        (Some(b), _) => (b, None),
        (None, Some((b, note))) => (b, Some(note)),
        (None, None) => return Err(blank("bytes", "message size not given")),
    };
    let model = CostModel::new(&cluster);
    let c = model.collective(op, group, bytes, mode);
    let (metric, measured, predicted) = match (row.busbw_gbps, row.time_us) {
        (Some(bw), _) => {
            let busbw = bytes * op.busbw_factor(ranks) / c.time / 1e9;
            (Metric::Busbw, bw, busbw)
        }
        (None, Some(t)) => (Metric::Time, t, c.time * 1e6),
        (None, None) => {
            return Err(blank(
                "busbw_gbps|time_us",
                "neither busbw nor time measured",
            ))
        }
    };
    Ok(Prediction {
        id: row.id.clone(),
        cluster: cluster.name,
        collective: op,
        group,
        bytes,
        mode,
        algorithm: c.algorithm,
        protocol: c.protocol,
        metric,
        measured,
        predicted,
        bytes_note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(hardware: &str, collective: &str, algorithm: &str) -> MeasuredRow {
        MeasuredRow {
            id: "x".into(),
            hardware: hardware.into(),
            collective: collective.into(),
            algorithm_used: algorithm.into(),
            ranks: Some(8),
            nodes: Some(1),
            gpus_per_node: Some(8),
            bytes: Some(1e9),
            busbw_gbps: Some(200.0),
            time_us: None,
            notes: String::new(),
        }
    }

    #[test]
    fn unexpressible_rows_say_why() {
        let e = predict(&row("8xB200 NVSwitch", "allreduce", "nccl-default")).unwrap_err();
        assert!(e.reason.contains("no reference machine"), "{e:?}");
        let e = predict(&row("8xA100", "hypercube", "nccl-default")).unwrap_err();
        assert!(e.reason.contains("not modelled"), "{e:?}");
        let e = predict(&row("8xA100", "allreduce", "collnet")).unwrap_err();
        assert!(e.reason.contains("not mapped"), "{e:?}");
        let mut r = row("8xA100", "allreduce", "nccl-default");
        r.ranks = Some(12);
        r.nodes = Some(8);
        assert!(predict(&r).is_err());
        let mut r = row("8xA100", "allreduce", "nccl-default");
        r.busbw_gbps = None;
        assert!(predict(&r).unwrap_err().reason.contains("neither"));
    }

    #[test]
    fn busbw_row_uses_the_nccl_tests_factor() {
        // 8×A100 all-reduce of 1 GB under NCCL's tuner: ring; busbw = S·2(n−1)/n / t.
        let p = predict(&row("8xA100", "allreduce", "nccl-default")).unwrap();
        let model = CostModel::new(&calibration::dgx_a100(1));
        let g = GroupPlacement {
            size: 8,
            ranks_per_node: 8,
            nodes: 1,
        };
        let t = model
            .collective(Collective::AllReduce, g, 1e9, AlgoMode::NcclTuner)
            .time;
        assert!((p.predicted - 1e9 * 1.75 / t / 1e9).abs() < 1e-9);
        assert_eq!(p.metric, Metric::Busbw);
    }
}
