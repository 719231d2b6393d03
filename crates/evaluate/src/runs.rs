//! Reading a file of the published-runs schema (`data/published_runs.csv`,
//! `published_runs_2.csv`, or any file whose header names those columns) into
//! [`PublishedRun`]s, row by row: each cell is parsed here, so a blank cell a row needs or a cell
//! that is not a number skips that row — with its id, line, column and reason — and never the
//! file. Also the facts every row must give before it can be expressed ([`missing_fact`]).
//!
//! Boundary: no file IO (the caller passes the file's bytes); the CSV framing and line numbers
//! are `autoplan_input::table`'s.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use autoplan_input::table::{number_in, CellError, CellErrorKind, Row, Table, TableError};
use serde::Serialize;

use crate::validate::{PublishedRun, RowResult, Skipped};

/// Why a row is not scored: the data does not give a fact (or gives it unreadably), or autoplan
/// cannot yet express what the row ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipKind {
    /// A cell the row needs is blank: the fact is not in the data.
    DataMissing,
    /// A cell the row needs is there but cannot be read (not a number, negative, zero, not
    /// UTF-8), or the row's fields do not match the header's columns.
    Unreadable,
    /// The data is there; autoplan lacks the GPU, model family, precision, sharding mode… the
    /// row names, or cannot run its plan.
    ToolLimit,
}

impl SkipKind {
    pub fn name(self) -> &'static str {
        match self {
            SkipKind::DataMissing => "data missing",
            SkipKind::Unreadable => "unreadable cell",
            SkipKind::ToolLimit => "tool limit",
        }
    }

    /// What the kind means, for the heading of its section in a table.
    pub fn meaning(self) -> &'static str {
        match self {
            SkipKind::DataMissing => "the row does not give a fact autoplan needs",
            SkipKind::Unreadable => "a cell the row needs cannot be read",
            SkipKind::ToolLimit => "the data is there; autoplan cannot express the row yet",
        }
    }
}

/// A file of runs: the rows read, and the rows skipped while reading.
#[derive(Debug, Clone, Default)]
pub struct RunsFile {
    /// Rows whose cells all read, each with its line.
    pub runs: Vec<PublishedRun>,
    /// Rows with a blank required cell or an unreadable cell, in file order.
    pub skipped: Vec<Skipped>,
    /// Columns the header names that are not of the schema ([`COLUMNS`]): read by nothing, so
    /// a misspelt column (`measured_tokens_per_sec`) reads as blank everywhere. Each with the
    /// schema's column it is nearest to, where one is near ([`nearest_column`]).
    pub unknown_columns: Vec<(String, Option<&'static str>)>,
}

/// Every column of the schema (`data/published_runs.csv`'s header): what a row is read from.
pub const COLUMNS: &[&str] = &[
    "id",
    "source",
    "model",
    "params_b",
    "layers",
    "hidden",
    "ffn_hidden",
    "heads",
    "kv_heads",
    "vocab",
    "seq_len",
    "moe_experts",
    "moe_topk",
    "moe_shared_experts",
    "moe_ffn_hidden",
    "gpu",
    "num_gpus",
    "gpus_per_node",
    "intra_node_link",
    "inter_node_link",
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "etp",
    "vpp",
    "sp",
    "micro_batch",
    "global_batch",
    "recompute",
    "zero_stage",
    "precision",
    "measured_tflops_per_gpu",
    "measured_mfu",
    "measured_tokens_per_s_per_gpu",
    "measured_step_time_s",
    "tflops_convention",
    "notes",
];

/// The schema's column nearest to `name`: of those within an edit distance of a third of the
/// longer name's length (a typo or a shortening: `measured_tokens_per_sec`,
/// `global_batch_size`), the one sharing the longest start, then the nearest; `None` for a
/// column of something else (`url`).
pub fn nearest_column(name: &str) -> Option<&'static str> {
    let d = |a: &str, b: &str| -> usize {
        // Levenshtein distance over bytes (the schema is ASCII).
        let (a, b) = (a.as_bytes(), b.as_bytes());
        let mut prev: Vec<usize> = (0..=b.len()).collect();
        for (i, &x) in a.iter().enumerate() {
            let mut cur = vec![i + 1; b.len() + 1];
            for (j, &y) in b.iter().enumerate() {
                cur[j + 1] = (prev[j] + usize::from(x != y))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1);
            }
            prev = cur;
        }
        prev[b.len()]
    };
    let name = name.trim().to_ascii_lowercase();
    let prefix = |c: &str| {
        name.bytes()
            .zip(c.bytes())
            .take_while(|(a, b)| a == b)
            .count()
    };
    // Of the near ones, the one sharing the longest start (`measured_tokens_per_sec` is the
    // tokens column, not the equally near TFLOP/s one), then the nearest.
    COLUMNS
        .iter()
        .map(|c| (std::cmp::Reverse(prefix(c)), d(&name, c), *c))
        .filter(|(_, dist, c)| *dist > 0 && 3 * dist <= name.len().max(c.len()))
        .min()
        .map(|(_, _, c)| c)
}

/// The columns a file must name (the others may be absent: their cells read as blank).
pub const REQUIRED_COLUMNS: &[&str] = &["id", "model", "gpu", "num_gpus"];

/// The measured figures a row may give; it must give one.
pub const MEASURED_COLUMNS: &[&str] = &[
    "measured_tflops_per_gpu",
    "measured_mfu",
    "measured_tokens_per_s_per_gpu",
    "measured_step_time_s",
];

/// Read `bytes`, the contents of `file` (named in errors), as runs. Only a file that has no
/// header or does not name a [`REQUIRED_COLUMNS`] column is an error.
pub fn read_runs(file: &str, bytes: &[u8]) -> Result<RunsFile, TableError> {
    let table = Table::parse(file, bytes, REQUIRED_COLUMNS)?;
    let mut out = RunsFile {
        unknown_columns: table
            .columns()
            .iter()
            .filter(|c| !COLUMNS.contains(&c.as_str()))
            .map(|c| (c.clone(), nearest_column(c)))
            .collect(),
        ..RunsFile::default()
    };
    // The line of each id read, to skip an id given twice.
    let mut lines = HashMap::new();
    for row in table.rows() {
        let line = row.line();
        // A row without a readable id is named by its line.
        let id = match row.text("id") {
            Ok(Some(id)) => id.to_string(),
            _ => format!("(line {line})"),
        };
        if let Some(why) = row.shape_error() {
            out.skipped.push(Skipped {
                id,
                reason: why,
                kind: SkipKind::Unreadable,
                line: Some(line),
                column: None,
            });
            continue;
        }
        match run_of(&row) {
            Ok(mut run) => match lines.entry(run.id.clone()) {
                // An id the file already gave: the row is scored once (the summaries count
                // rows), the later one skipped naming the first.
                Entry::Occupied(first) => {
                    out.skipped.push(Skipped {
                        reason: format!(
                            "id `{id}` is also the row on line {}: scored once",
                            first.get()
                        ),
                        kind: SkipKind::Unreadable,
                        line: Some(line),
                        column: Some("id".into()),
                        id,
                    });
                }
                Entry::Vacant(slot) => {
                    slot.insert(line);
                    run.line = line;
                    out.runs.push(run);
                }
            },
            Err(e) => out.skipped.push(cell_skip(&id, line, e)),
        }
    }
    Ok(out)
}

fn cell_skip(id: &str, line: u64, e: CellError) -> Skipped {
    Skipped {
        id: id.to_string(),
        reason: e.to_string(),
        kind: match e.kind {
            CellErrorKind::Blank => SkipKind::DataMissing,
            CellErrorKind::Unreadable => SkipKind::Unreadable,
        },
        line: Some(line),
        column: Some(e.column),
    }
}

/// One row's cells. Sizes and degrees are whole numbers of at least 1 (a zero-GPU run, a
/// zero-layer model or `tp = 0` is not a run); shared experts may be 0; measured figures are
/// above zero (the error is relative to them).
fn run_of(r: &Row) -> Result<PublishedRun, CellError> {
    let w = |c: &str| r.whole(c, 1);
    let id = r
        .text("id")?
        .ok_or_else(|| CellError::blank("id", "the row has no id"))?;
    Ok(PublishedRun {
        id: id.to_string(),
        source: r.string("source")?,
        model: r.string("model")?,
        params_b: at_most(r, "params_b", 1e6, "more than a million billion parameters")?,
        layers: w("layers")?,
        hidden: w("hidden")?,
        ffn_hidden: w("ffn_hidden")?,
        heads: w("heads")?,
        kv_heads: w("kv_heads")?,
        vocab: w("vocab")?,
        seq_len: seq_len(r)?,
        moe_experts: w("moe_experts")?,
        moe_topk: w("moe_topk")?,
        moe_shared_experts: r.whole("moe_shared_experts", 0)?,
        moe_ffn_hidden: w("moe_ffn_hidden")?,
        gpu: r.string("gpu")?,
        num_gpus: w("num_gpus")?
            .ok_or_else(|| CellError::blank("num_gpus", "GPU count not given"))?,
        gpus_per_node: w("gpus_per_node")?,
        intra_node_link: r.text("intra_node_link")?.map(str::to_string),
        inter_node_link: r.text("inter_node_link")?.map(str::to_string),
        tp: w("tp")?,
        pp: w("pp")?,
        dp: w("dp")?,
        cp: w("cp")?,
        ep: w("ep")?,
        etp: w("etp")?,
        vpp: w("vpp")?,
        sp: r.text("sp")?.map(str::to_string),
        micro_batch: w("micro_batch")?,
        global_batch: w("global_batch")?,
        recompute: r.text("recompute")?.map(str::to_string),
        zero_stage: r.text("zero_stage")?.map(str::to_string),
        precision: r.text("precision")?.map(str::to_string),
        measured_tflops_per_gpu: at_most(
            r,
            "measured_tflops_per_gpu",
            1e5,
            "more than 100,000 TFLOP/s on one GPU",
        )?,
        measured_mfu: mfu(r)?,
        measured_tokens_per_s_per_gpu: at_most(
            r,
            "measured_tokens_per_s_per_gpu",
            1e9,
            "more than a billion tokens/s on one GPU",
        )?,
        measured_step_time_s: at_most(
            r,
            "measured_step_time_s",
            1e7,
            "more than 10^7 s (116 days) per step",
        )?,
        tflops_convention: r.text("tflops_convention")?.map(str::to_string),
        notes: r.text("notes")?.map(str::to_string),
        line: 0,
    })
}

/// A number above zero and at most `max`: beyond it the cell cannot be the figure its column
/// names (`why`), and is unreadable rather than scored.
fn at_most(r: &Row, column: &str, max: f64, why: &str) -> Result<Option<f64>, CellError> {
    match r.number(column, true)? {
        Some(v) if v > max => Err(CellError::unreadable(
            column,
            r.text(column)?.unwrap_or(""),
            why,
        )),
        v => Ok(v),
    }
}

/// `seq_len`: a whole number of tokens, or in the binary thousands sequence lengths are
/// written in (`8K` = 8192, `128k` = 131072, `1M` = 1048576: context lengths are powers of two,
/// Llama 3's "128K" being 131,072, Dubey+24 Table 4).
fn seq_len(r: &Row) -> Result<Option<u32>, CellError> {
    const COLUMN: &str = "seq_len";
    let Some(cell) = r.numeric_text(COLUMN)? else {
        return Ok(None);
    };
    let lower = cell.to_ascii_lowercase();
    let scaled = [("k", 1u64 << 10), ("m", 1 << 20)]
        .iter()
        .find_map(|(unit, scale)| {
            let n = lower.strip_suffix(unit)?.trim_end();
            (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .then(|| n.parse::<u64>().ok().and_then(|n| n.checked_mul(*scale)))
        });
    match scaled {
        Some(Some(0)) => Err(CellError::unreadable(COLUMN, cell, "must be at least 1")),
        Some(v) => v
            .and_then(|v| u32::try_from(v).ok())
            .map(Some)
            .ok_or_else(|| CellError::unreadable(COLUMN, cell, format!("over {}", u32::MAX))),
        None => r.whole(COLUMN, 1),
    }
}

/// `measured_mfu`: a share of the peak, as a fraction (0.433) or a percent that says so
/// (`43.3%`). A bare number above 1 is neither (a percent without its sign, or another
/// figure): unreadable, not read as a guess.
fn mfu(r: &Row) -> Result<Option<f64>, CellError> {
    const COLUMN: &str = "measured_mfu";
    let Some(cell) = r.numeric_text(COLUMN)? else {
        return Ok(None);
    };
    let (text, percent) = match cell.strip_suffix('%') {
        Some(t) => (t.trim_end(), true),
        None => (cell, false),
    };
    let v = number_in(COLUMN, cell, text, true)?;
    let share = if percent { v / 100.0 } else { v };
    if share > 1.0 {
        return Err(CellError::unreadable(
            COLUMN,
            cell,
            if percent {
                "above 100%: an MFU is a share of the peak"
            } else {
                "above 1: an MFU is a share of the peak, a fraction (0.433) or a percent with its \
             sign (43.3%)"
            },
        ));
    }
    Ok(Some(share))
}

/// The first fact row `r` must give and does not: the GPU, the model (a name, or its shape),
/// the sequence length, the global batch, a measured figure. `None` when all are given. Checked
/// before the row is expressed, so a row lacking data is reported as such even where autoplan
/// could not express it either.
pub fn missing_fact(r: &PublishedRun) -> Option<Skipped> {
    let blank = |column: &str, why: &str| {
        Some(Skipped {
            id: r.id.clone(),
            reason: CellError::blank(column, why).to_string(),
            kind: SkipKind::DataMissing,
            line: Some(r.line),
            column: Some(column.to_string()),
        })
    };
    let shape = r.layers.is_some() && r.hidden.is_some() && r.heads.is_some() && r.vocab.is_some();
    if r.gpu.trim().is_empty() {
        blank("gpu", "GPU not given")
    } else if r.model.trim().is_empty() && !shape {
        blank(
            "model",
            "model not given, nor its shape (layers, hidden, heads, vocab)",
        )
    } else if r.seq_len.is_none() {
        blank("seq_len", "sequence length not given")
    } else if r.global_batch.is_none() {
        blank("global_batch", "global batch not given")
    } else if r.measured_tflops_per_gpu.is_none()
        && r.measured_mfu.is_none()
        && r.measured_tokens_per_s_per_gpu.is_none()
        && r.measured_step_time_s.is_none()
    {
        blank(
            &MEASURED_COLUMNS.join("|"),
            "measured throughput not given (TFLOP/s, MFU, tokens/s or step time)",
        )
    } else {
        None
    }
}

/// Whether the row gives any of its parallel degrees (tp, pp, dp). A row giving none is
/// scored against the plan the search finds for it ([`BestPlan`]), not against its own.
pub fn degrees_given(r: &PublishedRun) -> bool {
    r.tp.is_some() || r.pp.is_some() || r.dp.is_some()
}

/// A row that gives no parallel degrees, scored with the best plan the search finds for its
/// model, cluster, GPU count, global batch and sequence: how close the best plan autoplan finds
/// comes to what the experts ran. Not in the MAPE.
#[derive(Debug, Clone, Serialize)]
pub struct BestPlan {
    /// The row scored with the plan found (`plan` is that plan).
    #[serde(flatten)]
    pub row: RowResult,
    pub line: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "id,model,layers,hidden,heads,vocab,seq_len,gpu,num_gpus,tp,pp,dp,\
                          global_batch,measured_mfu,notes\n";

    fn read(rows: &str) -> RunsFile {
        read_runs("t.csv", format!("{HEADER}{rows}").as_bytes()).unwrap()
    }

    #[test]
    fn an_id_given_twice_is_scored_once() {
        let f = read(
            "a,llama3-8b,,,,,8192,H100,8,1,1,8,64,0.4,\n\
             b,llama3-8b,,,,,8192,H100,8,1,1,8,64,0.4,\n\
             a,llama3-8b,,,,,4096,H100,8,1,1,8,64,0.4,\n",
        );
        let ids: Vec<_> = f.runs.iter().map(|r| (r.id.as_str(), r.seq_len)).collect();
        assert_eq!(ids, [("a", Some(8192)), ("b", Some(8192))]);
        let s = &f.skipped[0];
        assert_eq!(
            (s.id.as_str(), s.line, s.column.as_deref(), s.kind),
            ("a", Some(4), Some("id"), SkipKind::Unreadable)
        );
        assert_eq!(s.reason, "id `a` is also the row on line 2: scored once");
    }

    #[test]
    fn a_sequence_length_in_binary_thousands() {
        let f = read(
            "a,llama3-8b,,,,,8K,H100,8,1,1,8,64,0.4,\n\
             b,llama3-8b,,,,,128k,H100,8,1,1,8,64,0.4,\n\
             c,llama3-8b,,,,,1M,H100,8,1,1,8,64,0.4,\n\
             d,llama3-8b,,,,,8192,H100,8,1,1,8,64,0.4,\n\
             e,llama3-8b,,,,,8.5K,H100,8,1,1,8,64,0.4,\n\
             f,llama3-8b,,,,,0K,H100,8,1,1,8,64,0.4,\n\
             g,llama3-8b,,,,,9999999M,H100,8,1,1,8,64,0.4,\n\
             h,llama3-8b,,,,,18446744073709551615M,H100,8,1,1,8,64,0.4,\n",
        );
        let seqs: Vec<_> = f.runs.iter().map(|r| (r.id.as_str(), r.seq_len)).collect();
        assert_eq!(
            seqs,
            [
                ("a", Some(8192)),
                ("b", Some(131_072)),
                ("c", Some(1_048_576)),
                ("d", Some(8192)),
            ]
        );
        let bad: Vec<_> = f
            .skipped
            .iter()
            .map(|s| (s.id.as_str(), s.reason.as_str()))
            .collect();
        assert_eq!(
            bad,
            [
                ("e", "seq_len `8.5K`: not a whole number"),
                ("f", "seq_len `0K`: must be at least 1"),
                ("g", "seq_len `9999999M`: over 4294967295"),
                ("h", "seq_len `18446744073709551615M`: over 4294967295"),
            ]
        );
    }

    #[test]
    fn columns_of_no_rule_are_listed_with_the_nearest_one() {
        let f = read_runs(
            "t.csv",
            b"id,model,gpu,num_gpus,measured_tokens_per_sec,global_batch_size,url,notes\n",
        )
        .unwrap();
        assert_eq!(
            f.unknown_columns,
            [
                (
                    "measured_tokens_per_sec".to_string(),
                    Some("measured_tokens_per_s_per_gpu")
                ),
                ("global_batch_size".to_string(), Some("global_batch")),
                ("url".to_string(), None),
            ]
        );
        // The schema's own header: nothing unknown.
        let f = read_runs("t.csv", (COLUMNS.join(",") + "\n").as_bytes()).unwrap();
        assert!(f.unknown_columns.is_empty());
    }

    #[test]
    fn a_blank_needed_cell_skips_its_row_with_line_and_column() {
        let f = read(
            "a,llama3-8b,,,,,8192,H100,,1,1,8,64,0.4,\n\
             b,llama3-8b,,,,,8192,H100,8,1,1,8,64,0.4,\"two\nlines\"\n\
             c,llama3-8b,,,,,8192,H100,8x,1,1,8,64,0.4,\n\
             d,llama3-8b,,,,,8192,H100,8,1,1,8,64,-0.4,\n\
             e,llama3-8b,,,,,8192,H100,8,1,1,8,64,0.4\n\
             f,llama3-8b,,,,,8192,H100,8,0,1,8,64,0.4,\n",
        );
        assert_eq!(f.runs.len(), 1);
        assert_eq!((f.runs[0].id.as_str(), f.runs[0].line), ("b", 3));
        let got: Vec<_> = f
            .skipped
            .iter()
            .map(|s| (s.id.as_str(), s.line, s.column.as_deref(), s.kind))
            .collect();
        assert_eq!(
            got,
            [
                ("a", Some(2), Some("num_gpus"), SkipKind::DataMissing),
                ("c", Some(5), Some("num_gpus"), SkipKind::Unreadable),
                ("d", Some(6), Some("measured_mfu"), SkipKind::Unreadable),
                ("e", Some(7), None, SkipKind::Unreadable),
                ("f", Some(8), Some("tp"), SkipKind::Unreadable),
            ]
        );
        assert_eq!(f.skipped[0].reason, "num_gpus blank: GPU count not given");
        assert_eq!(f.skipped[1].reason, "num_gpus `8x`: not a whole number");
        assert_eq!(f.skipped[2].reason, "measured_mfu `-0.4`: negative");
        assert_eq!(f.skipped[4].reason, "tp `0`: must be at least 1");
    }

    #[test]
    fn an_mfu_is_a_fraction_or_a_signed_percent_and_figures_are_bounded() {
        let f = read(
            "a,llama3-8b,,,,,8192,H100,8,1,1,8,64,43.3%,\n\
             b,llama3-8b,,,,,8192,H100,8,1,1,8,64,43.3,\n\
             c,llama3-8b,,,,,8192,H100,8,1,1,8,64,140%,\n\
             d,llama3-8b,,,,,8192,H100,8,1,1,8,64,1e308,\n\
             e,llama3-8b,,,,,8192,H100,8,1,1,8,64,0.433,\n",
        );
        let mfus: Vec<_> = f
            .runs
            .iter()
            .map(|r| (r.id.as_str(), r.measured_mfu))
            .collect();
        assert_eq!(mfus, [("a", Some(0.433)), ("e", Some(0.433))]);
        let why: Vec<_> = f.skipped.iter().map(|s| s.reason.as_str()).collect();
        assert!(
            why[0].starts_with("measured_mfu `43.3`: above 1"),
            "{why:?}"
        );
        assert!(
            why[1].starts_with("measured_mfu `140%`: above 100%"),
            "{why:?}"
        );
        assert!(
            why[2].starts_with("measured_mfu `1e308`: above 1"),
            "{why:?}"
        );
        let f = read_runs(
            "t.csv",
            "id,model,params_b,seq_len,gpu,num_gpus,global_batch,measured_tflops_per_gpu\n\
             a,llama3-8b,1e300,8192,H100,8,64,400\n\
             b,llama3-8b,8,8192,H100,8,64,1e20\n\
             c,llama3-8b,8,8192,H100,8,64,400\n"
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(f.runs.len(), 1);
        let why: Vec<_> = f.skipped.iter().map(|s| s.reason.as_str()).collect();
        assert_eq!(
            why,
            [
                "params_b `1e300`: more than a million billion parameters",
                "measured_tflops_per_gpu `1e20`: more than 100,000 TFLOP/s on one GPU"
            ]
        );
    }

    #[test]
    fn missing_facts_name_their_column() {
        let f = read(
            "a,llama3-8b,,,,,,H100,8,1,1,8,64,0.4,\n\
             b,llama3-8b,,,,,8192,H100,8,1,1,8,,0.4,\n\
             c,llama3-8b,,,,,8192,H100,8,1,1,8,64,,\n\
             d,,,,,,8192,H100,8,1,1,8,64,0.4,\n\
             e,,32,4096,32,128256,8192,,8,1,1,8,64,0.4,\n\
             f,,32,4096,32,128256,8192,H100,8,,,,64,0.4,\n",
        );
        let cols: Vec<_> = f
            .runs
            .iter()
            .map(|r| missing_fact(r).and_then(|s| s.column))
            .collect();
        assert_eq!(
            cols,
            [
                Some("seq_len".to_string()),
                Some("global_batch".into()),
                Some(MEASURED_COLUMNS.join("|")),
                Some("model".into()),
                Some("gpu".into()),
                None,
            ]
        );
        assert!(!degrees_given(&f.runs[5]) && degrees_given(&f.runs[0]));
        let s = missing_fact(&f.runs[1]).unwrap();
        assert_eq!(
            (s.reason.as_str(), s.line),
            ("global_batch blank: global batch not given", Some(3))
        );
    }

    #[test]
    fn a_file_without_a_required_column_is_an_error_naming_it() {
        let e = read_runs("t.csv", b"id,model,gpu\na,b,c\n").unwrap_err();
        assert!(e.to_string().contains("no column `num_gpus`"), "{e}");
    }
}
