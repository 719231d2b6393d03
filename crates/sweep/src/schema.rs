//! The sweep CSV schema: the columns, and how one case becomes a block of rows.
//!
//! The schema is documented column by column in `results/README.md`; [`COLUMNS`] is the
//! single source of truth and a test checks that the README lists exactly these columns.
//!
//! **Invariant:** one record is one line. Free text (infeasibility reasons) has its line
//! breaks replaced by spaces before writing, so a file can be cut at any `\n` and stays a valid
//! CSV — that is what makes resuming after a kill safe.

use autoplan_plan::{PlacementPolicy, Plan};

use crate::{Case, Infeasible, RankedPlan};

/// The columns of a sweep CSV, in order. Changing this list changes the schema.
pub const COLUMNS: &[&str] = &[
    // Case keys.
    "case",
    "model",
    "cluster",
    "gpus",
    "seq_len",
    "global_batch",
    "space",
    "top_k",
    "framework",
    // Outcome.
    "status",
    "reason",
    "plans",
    "rank",
    // The plan.
    "tp",
    "sp",
    "cp",
    "cp_comm",
    "dp",
    "zero",
    "pp",
    "schedule",
    "vpp",
    "first_stage_layers",
    "last_stage_layers",
    "ep",
    "moe_tp",
    "edp",
    "mbs",
    "recompute",
    "recompute_layers",
    "tp_sp_transition",
    "moe_tp_scheme",
    "dispatcher",
    "algo",
    "order",
    "placement",
    "tp_overlap",
    "ep_overlap",
    // Predicted metrics.
    "step_time_s",
    "tokens_per_s",
    "tokens_per_s_per_gpu",
    "mfu",
    "memory_peak_bytes",
    "exposed_comm_s",
    "bubble_s",
    "dominant_comm",
    "dominant_comm_exposed_s",
    "dominant_collective",
];

/// Index of a column in [`COLUMNS`]. Panics on a name that is not a column: callers pass
/// literals of this crate, checked by the tests.
pub(crate) fn col(name: &str) -> usize {
    COLUMNS
        .iter()
        .position(|c| *c == name)
        .unwrap_or_else(|| panic!("`{name}` is not a sweep column"))
}

/// Columns that identify a case (everything before `status`).
pub(crate) const KEY_COLUMNS: usize = 9;
/// Columns of the plan (`tp` ..= `ep_overlap`).
pub(crate) fn plan_columns() -> std::ops::Range<usize> {
    col("tp")..col("step_time_s")
}

/// The header line, with its `\n`.
pub fn header() -> String {
    let mut s = COLUMNS.join(",");
    s.push('\n');
    s
}

/// Check every field of a row read back from a sweep CSV against its column's type: the
/// integers, the statuses, the plan values (parsed as the plan string parses them, so any
/// spelling the planner writes is accepted), the fixed-decimal metrics (finite: no `inf`,
/// `nan` or exponent, which [`render_case`] never writes), and the empty fields of an
/// `infeasible` row. The error names the column and the value; the caller adds file and line.
pub(crate) fn check_row(row: &[String]) -> Result<(), String> {
    let bad = |c: usize, expected: &str| {
        Err(format!(
            "column `{}` = {:?}: expected {expected}",
            COLUMNS[c], row[c]
        ))
    };
    let ok = match row[col("status")].as_str() {
        OK => true,
        INFEASIBLE => false,
        _ => return bad(col("status"), "`ok` or `infeasible`"),
    };
    for (c, &name) in COLUMNS.iter().enumerate() {
        let v = row[c].as_str();
        match name {
            "case" | "plans" if !is_uint(v, 0) => return bad(c, "an integer ≥ 0"),
            "gpus" | "seq_len" | "global_batch" | "top_k" if !is_uint(v, 1) => {
                return bad(c, "an integer ≥ 1")
            }
            // A name that reads as a number (`inf`, `nan`, `1e3`) names no input.
            "model" | "cluster" | "space" if v.is_empty() || v.parse::<f64>().is_ok() => {
                return bad(c, "a name")
            }
            "framework" if v.parse::<autoplan_plan::Framework>().is_err() => {
                return bad(c, "a framework as --framework takes it")
            }
            "status" => {}
            // An infeasible case's row has its reason and nothing after `plans`.
            _ if !ok && c > col("plans") && !v.is_empty() => {
                return bad(c, "an empty field (the case is infeasible)")
            }
            "reason" if ok && !v.is_empty() => return bad(c, "an empty field (the case is `ok`)"),
            _ if !ok => {}
            "rank" | "edp" if !is_uint(v, 1) => return bad(c, "an integer ≥ 1"),
            // Unset layer counts are empty.
            "first_stage_layers" | "last_stage_layers" | "recompute_layers" if v.is_empty() => {}
            _ if plan_columns().contains(&c) && name != "edp" => {
                let knob = autoplan_plan::Knob::from_key(name)
                    .unwrap_or_else(|| panic!("plan column `{name}` is not a knob"));
                if let Err(e) = knob.parse_into(&mut Plan::default(), v) {
                    return Err(format!("column `{name}` = {v:?}: {e}"));
                }
            }
            "dominant_comm" | "dominant_collective" => {}
            _ if c >= col("step_time_s") && !is_fixed(v) => {
                return bad(c, "a finite decimal number such as 12.5")
            }
            _ => {}
        }
    }
    Ok(())
}

/// Decimal digits only, at least `min`, and within `u32` (every count of the schema is one).
fn is_uint(v: &str, min: u32) -> bool {
    !v.is_empty()
        && v.bytes().all(|b| b.is_ascii_digit())
        && v.parse::<u32>().is_ok_and(|n| n >= min)
}

/// `[-]digits[.digits]`, as [`fixed`] writes, and finite as an `f64` (a thousand digits
/// would parse to infinity).
fn is_fixed(v: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let body = v.strip_prefix('-').unwrap_or(v);
    let shape = match body.split_once('.') {
        Some((i, f)) => digits(i) && digits(f),
        None => digits(body),
    };
    shape && v.parse::<f64>().is_ok_and(f64::is_finite)
}

/// Status of a case.
pub const OK: &str = "ok";
/// Status of a case no plan fits (or an invalid combination).
pub const INFEASIBLE: &str = "infeasible";

/// The key fields of a case, as they appear in its rows.
pub(crate) fn key_fields(case: &Case) -> [String; KEY_COLUMNS] {
    [
        case.index.to_string(),
        case.model.clone(),
        case.cluster.clone(),
        case.gpus.to_string(),
        case.seq_len.to_string(),
        case.global_batch.to_string(),
        case.space.clone(),
        case.top_k.to_string(),
        case.framework.clone(),
    ]
}

/// The rows of one finished case, as CSV text ending in `\n`: one row per ranked plan (at
/// most `top_k`), or a single `infeasible` row with the reason. An empty plan list counts as
/// infeasible ("no plan").
pub fn render_case(case: &Case, outcome: &Result<Vec<RankedPlan>, Infeasible>) -> String {
    let keys = key_fields(case);
    let mut w = writer();
    let plans = match outcome {
        Ok(p) => &p[..p.len().min(case.top_k as usize)],
        Err(_) => &[][..],
    };
    if plans.is_empty() {
        let reason = match outcome {
            Err(e) => one_line(&e.reason),
            Ok(_) => "the planner returned no plan".to_string(),
        };
        let mut row: Vec<String> = keys.to_vec();
        row.extend([INFEASIBLE.to_string(), reason, "0".into(), String::new()]);
        row.resize(COLUMNS.len(), String::new());
        write(&mut w, &row);
    }
    for (r, p) in plans.iter().enumerate() {
        let mut row: Vec<String> = keys.to_vec();
        row.extend([
            OK.to_string(),
            String::new(),
            plans.len().to_string(),
            (r + 1).to_string(),
        ]);
        plan_fields(&p.plan, &mut row);
        let m = &p.metrics;
        row.extend([
            fixed(m.step_time_s, 6),
            fixed(m.tokens_per_s, 1),
            fixed(m.tokens_per_s_per_gpu, 2),
            fixed(m.mfu, 4),
            fixed(m.memory_peak_bytes, 0),
            fixed(m.exposed_comm_s, 6),
            fixed(m.bubble_s, 6),
            one_line(&m.dominant_comm),
            fixed(m.dominant_comm_exposed_s, 6),
            one_line(&m.dominant_collective),
        ]);
        debug_assert_eq!(row.len(), COLUMNS.len());
        write(&mut w, &row);
    }
    finish(w)
}

fn writer() -> csv::Writer<Vec<u8>> {
    csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new())
}

fn write(w: &mut csv::Writer<Vec<u8>>, row: &[String]) {
    // Writing to a Vec cannot fail.
    w.write_record(row).expect("in-memory CSV write");
}

fn finish(w: csv::Writer<Vec<u8>>) -> String {
    let bytes = w.into_inner().expect("in-memory CSV flush");
    String::from_utf8(bytes).expect("CSV of UTF-8 fields is UTF-8")
}

/// A fixed number of decimals: stable text for the same f64, no exponent, no `-0`.
fn fixed(x: f64, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    if s.starts_with('-') && s[1..].bytes().all(|b| b == b'0' || b == b'.') {
        s[1..].to_string()
    } else {
        s
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

/// Knob values by the names the search-space files use (`1f1b`, `selective`, `tp-cp-dp-pp`,
/// ...), so a value read in a sweep can be pasted into a space file or a `--fix`.
fn plan_fields(p: &Plan, row: &mut Vec<String>) {
    use autoplan_search::space as names;
    let opt = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_default();
    row.extend([
        p.tp.to_string(),
        p.sp.to_string(),
        p.cp.to_string(),
        names::cp_comm_name(p.cp_comm),
        p.dp.to_string(),
        p.zero.name(),
        p.pp.to_string(),
        names::schedule_name(p.schedule).to_string(),
        p.vpp.to_string(),
        opt(p.first_stage_layers),
        opt(p.last_stage_layers),
        p.ep.to_string(),
        p.moe_tp.to_string(),
        p.edp().to_string(),
        p.mbs.to_string(),
        names::recompute_name(p),
        opt(p.recompute_layers),
        names::tp_sp_name(p.tp_sp_transition).to_string(),
        names::moe_tp_scheme_name(p.moe_tp_scheme).to_string(),
        names::dispatcher_name(p.dispatcher).to_string(),
        names::AlgoName(p.algo).to_string(),
        names::order_name(p.order),
        placement(&p.placement),
        p.tp_overlap.to_string(),
        p.ep_overlap.to_string(),
    ]);
}

/// `contiguous`, or `balanced:N` (N redundant expert slots per GPU).
fn placement(p: &PlacementPolicy) -> String {
    match p {
        PlacementPolicy::Contiguous => "contiguous".to_string(),
        PlacementPolicy::Balanced { redundant } => format!("balanced:{redundant}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoplan_plan::{AlgoMode, Algorithm, Schedule};

    #[test]
    fn knob_names_are_those_of_space_files() {
        let p = Plan {
            schedule: Schedule::OneF1B,
            algo: AlgoMode::Fixed(Algorithm::Ring),
            placement: PlacementPolicy::Balanced { redundant: 2 },
            ..Plan::default()
        };
        let mut row = Vec::new();
        plan_fields(&p, &mut row);
        let at = |c: &str| row[col(c) - col("tp")].as_str();
        assert_eq!(at("schedule"), "1f1b");
        assert_eq!(at("algo"), "ring");
        assert_eq!(at("order"), "tp-cp-dp-pp");
        assert_eq!(at("placement"), "balanced:2");
        assert_eq!(at("recompute"), "none");
        assert_eq!(row.len(), plan_columns().len());
    }

    #[test]
    fn fixed_never_prints_negative_zero() {
        assert_eq!(fixed(-0.0, 3), "0.000");
        assert_eq!(fixed(-0.00001, 3), "0.000");
        assert_eq!(fixed(-1.5, 1), "-1.5");
        assert_eq!(fixed(1234.5678, 2), "1234.57");
    }

    #[test]
    fn results_readme_lists_every_column() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../results/README.md");
        let readme = std::fs::read_to_string(path).unwrap();
        let documented: Vec<&str> = readme
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .collect();
        assert_eq!(documented, COLUMNS, "results/README.md's column table");
    }

    #[test]
    fn read_back_fields_are_checked_against_their_column() {
        let golden = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../results/golden/small.csv"
        );
        let text = std::fs::read_to_string(golden).unwrap();
        let mut rows = csv::Reader::from_reader(text.as_bytes());
        let rows: Vec<Vec<String>> = rows
            .records()
            .map(|r| r.unwrap().iter().map(str::to_string).collect())
            .collect();
        let ok = rows.iter().find(|r| r[col("status")] == OK).unwrap();
        let infeasible = rows
            .iter()
            .find(|r| r[col("status")] == INFEASIBLE)
            .unwrap();
        for r in [ok, infeasible] {
            assert_eq!(check_row(r), Ok(()));
        }
        let bad = |row: &Vec<String>, c: &str, v: &str| {
            let mut r = row.clone();
            r[col(c)] = v.to_string();
            let err = check_row(&r).unwrap_err();
            assert!(err.starts_with(&format!("column `{c}` = {v:?}: ")), "{err}");
        };
        for v in [
            "inf",
            "-inf",
            "Infinity",
            "nan",
            "NaN",
            "1e3",
            "",
            ".5",
            "1.",
            &"9".repeat(400),
        ] {
            bad(ok, "step_time_s", v);
            bad(ok, "dominant_comm_exposed_s", v);
        }
        for (c, v) in [
            ("cp_comm", "nan"),
            ("schedule", "inf"),
            ("tp", "0"),
            ("sp", "maybe"),
            ("edp", "-1"),
            ("rank", "0"),
            ("plans", "-2"),
            ("placement", "balanced:x"),
            ("order", "tp-tp-dp-pp"),
            ("gpus", "4294967296"),
            ("top_k", "+2"),
            ("status", "OK"),
            ("reason", "why"),
            ("model", ""),
        ] {
            bad(ok, c, v);
        }
        bad(infeasible, "tp", "1");
        bad(infeasible, "step_time_s", "0.5");
        // Unset layer counts are empty; the text columns take any text.
        let mut r = ok.clone();
        r[col("dominant_collective")] = "nan".into();
        r[col("first_stage_layers")] = "3".into();
        assert_eq!(check_row(&r), Ok(()));
    }

    #[test]
    fn columns_are_unique_and_grouped() {
        let mut sorted = COLUMNS.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), COLUMNS.len());
        assert_eq!(COLUMNS[KEY_COLUMNS], "status");
        assert_eq!(plan_columns().len(), 25);
    }
}
