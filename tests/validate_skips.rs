//! `validate` and `collective --validate` read any file of their schema row by row (issue 16,
//! item 1): the skipped rows of both published-runs files are pinned with their kind and column
//! (a new skip, or a skip changing kind, fails here: remove a row from the list when it becomes
//! scored), and blank, non-numeric and malformed cells skip their row with the right line and
//! column, never the file.

mod common;

use common::autoplan;
use std::path::PathBuf;

/// (row id, skip kind, column) of every skipped row of `data/published_runs.csv`, in file order.
const SKIPPED_1: &[(&str, &str, Option<&str>)] = &[
    (
        "kor22_530B_dp8_sp_selective",
        "data-missing",
        Some("global_batch"),
    ),
    (
        "kor22_530B_dp8_full_recompute",
        "data-missing",
        Some("global_batch"),
    ),
    (
        "mzoo_h100_Qwen3-Next-80B-A3B_next80b_ep32",
        "data-missing",
        Some("vocab"),
    ),
    ("tt_8b_fsdp8_eager", "data-missing", Some("seq_len")),
    ("tt_8b_fsdp8_compile_fp8", "data-missing", Some("seq_len")),
    ("tt_8b_fsdp128_eager", "data-missing", Some("seq_len")),
    ("tt_8b_fsdp128_compile_fp8", "data-missing", Some("seq_len")),
    ("tt_70b_2d", "data-missing", Some("seq_len")),
    ("tt_70b_2d_asynctp", "data-missing", Some("seq_len")),
    ("tt_405b_3d_1f1b", "data-missing", Some("seq_len")),
    (
        "tt_405b_3d_interleaved1f1b",
        "data-missing",
        Some("seq_len"),
    ),
    (
        "tt_405b_4d_cp1_seq32k",
        "data-missing",
        Some("global_batch"),
    ),
    (
        "tt_405b_4d_cp8_seq256k",
        "data-missing",
        Some("global_batch"),
    ),
];

/// The same for `data/published_runs_2.csv`: only facts the rows do not give.
const SKIPPED_2: &[(&str, &str, Option<&str>)] = &[(
    "deepseek_v2_pretrain_H800",
    "data-missing",
    Some("num_gpus"),
)];

fn data(name: &str) -> String {
    format!("{}/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn validate_json(path: &str) -> serde_json::Value {
    let (code, out, err) = autoplan(&["validate", "--runs", path, "--format", "json"]);
    assert_eq!(code, Some(0), "{path}: {err}");
    serde_json::from_str(&out).expect("json")
}

/// The ids of the rows a validation scored, in file order.
fn row_ids(v: &serde_json::Value) -> Vec<&str> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect()
}

/// The skips of a validation: (id, kind, column), and each one's line.
fn skips(v: &serde_json::Value) -> Vec<(String, String, Option<String>, u64)> {
    v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                s["kind"].as_str().unwrap().to_string(),
                s["column"].as_str().map(str::to_string),
                s["line"].as_u64().expect("every skip has a line"),
            )
        })
        .collect()
}

fn check_pinned(file: &str, pinned: &[(&str, &str, Option<&str>)]) -> serde_json::Value {
    let v = validate_json(&data(file));
    let got = skips(&v);
    let text = std::fs::read_to_string(data(file)).unwrap();
    for (id, kind, column, line) in &got {
        match pinned.iter().find(|p| p.0 == id) {
            None => panic!("{file}: new skip {id} ({kind}, {column:?})"),
            Some(p) => assert_eq!(
                (kind.as_str(), column.as_deref()),
                (p.1, p.2),
                "{file}: {id} changed"
            ),
        }
        // The line is the physical line the row starts on (the id opens it).
        let at = text.lines().nth(*line as usize - 1).unwrap_or("");
        assert!(
            at.starts_with(&format!("{id},")),
            "{id}: line {line} is {at:.40}"
        );
    }
    for p in pinned {
        assert!(
            got.iter().any(|g| g.0 == p.0),
            "{file}: {} is no longer skipped: remove it from the pinned list",
            p.0
        );
    }
    v
}

#[test]
fn published_runs_skips_are_pinned() {
    let v = check_pinned("published_runs.csv", SKIPPED_1);
    // 58 scored: Nemotron-4 340B and GPT-OSS-120B, which give no recompute and do not fit
    // without, with the least that fits; mcore08_h100_weak_1.7B, built within its published
    // size's rounding (1.745B for "1.7") as Megatron counts it, untied; torchtitan's 32K row,
    // priced with the FlashAttention-2 kernel its SDPA ran.
    assert_eq!(v["rows"].as_array().unwrap().len(), 58);
    assert!(v["best_plan"].as_array().unwrap().is_empty());
}

#[test]
fn published_runs_2_skips_are_pinned_and_the_row_without_degrees_is_searched() {
    let v = check_pinned("published_runs_2.csv", SKIPPED_2);
    // mcore08_h100_strong_177B_96gpu gives no tp, pp, dp: scored against the best plan the
    // search finds for its model, 96 GPUs, global batch 1152 and sequence 4096, not in the MAPE.
    let best = v["best_plan"].as_array().unwrap();
    assert_eq!(best.len(), 1, "{best:?}");
    let b = &best[0];
    assert_eq!(b["id"], "mcore08_h100_strong_177B_96gpu");
    assert_eq!(b["line"], 2);
    assert!(b["plan"].as_str().unwrap().starts_with("tp="), "{b}");
    assert!(b["error"].as_f64().unwrap().is_finite(), "{b}");
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["id"] != b["id"]));
    // Table: its own section, and the summary counts it apart.
    let (code, out, err) = autoplan(&["validate", "--runs", &data("published_runs_2.csv")]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("best plan found vs the experts' run"), "{out}");
    assert!(
        out.contains("line 5    num_gpus blank: GPU count not given"),
        "{out}"
    );
    assert!(out.contains("best plan found 1, skipped"), "{out}");
}

/// A temp file under the test target directory.
fn temp(name: &str, text: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Rows of `published_runs.csv` with one cell changed (`(column, value)`), as CSV text with
/// the file's header.
fn runs_file(rows: &[(&str, &[(&str, &str)])]) -> String {
    let mut rdr = csv::Reader::from_path(data("published_runs.csv")).unwrap();
    let header = rdr.headers().unwrap().clone();
    let records: Vec<csv::StringRecord> = rdr.records().map(|r| r.unwrap()).collect();
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&header).unwrap();
    for (id, changes) in rows {
        let rec = records.iter().find(|r| &r[0] == *id).expect(id);
        let cells: Vec<String> = header
            .iter()
            .zip(rec.iter())
            .map(|(h, c)| {
                changes
                    .iter()
                    .find(|(k, _)| *k == h)
                    .map_or(c.to_string(), |(_, v)| v.to_string())
            })
            .collect();
        w.write_record(&cells).unwrap();
    }
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

#[test]
fn blank_non_numeric_and_malformed_cells_skip_their_row_only() {
    let ok = "nar21_t1_1.7B";
    let mut text = runs_file(&[
        (ok, &[]),
        // A note over two lines: the next rows' lines count both.
        ("nar21_t1_3.6B", &[("notes", "first\nsecond")]),
        ("nar21_t1_7.5B", &[("num_gpus", "")]),
        ("nar21_t1_18B", &[("tp", "eight")]),
        ("nar21_t1_39B", &[("measured_tflops_per_gpu", "fast")]),
        ("nar21_t1_76B", &[("global_batch", "-512")]),
        ("nar21_t1_145B", &[("seq_len", "")]),
        // A precision its GPU cannot train in: MXFP8 is Blackwell's.
        (
            "bridge2511_h100_LLAMA3_70B_64gpu_fp8",
            &[("precision", "mxfp8")],
        ),
    ]);
    // A row cut short (a lost comma's worth of fields), on line 11.
    text.push_str("cut_row,GPT,GPT 1.7B,1.7,24\n");
    let path = temp("validate_bad_cells.csv", &text);
    let v = validate_json(path.to_str().unwrap());
    assert_eq!(row_ids(&v), [ok, "nar21_t1_3.6B"]);
    let got: Vec<(String, String, Option<String>, u64)> = skips(&v);
    let want = [
        ("nar21_t1_7.5B", "data-missing", Some("num_gpus"), 5),
        ("nar21_t1_18B", "unreadable", Some("tp"), 6),
        (
            "nar21_t1_39B",
            "unreadable",
            Some("measured_tflops_per_gpu"),
            7,
        ),
        ("nar21_t1_76B", "unreadable", Some("global_batch"), 8),
        ("nar21_t1_145B", "data-missing", Some("seq_len"), 9),
        (
            "bridge2511_h100_LLAMA3_70B_64gpu_fp8",
            "unreadable",
            Some("precision"),
            10,
        ),
        ("cut_row", "unreadable", None, 11),
    ];
    let want: Vec<(String, String, Option<String>, u64)> = want
        .iter()
        .map(|(i, k, c, l)| (i.to_string(), k.to_string(), c.map(str::to_string), *l))
        .collect();
    assert_eq!(got, want);
    let reasons: Vec<&str> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons[0], "num_gpus blank: GPU count not given");
    assert_eq!(reasons[1], "tp `eight`: not a whole number");
    assert_eq!(reasons[2], "measured_tflops_per_gpu `fast`: not a number");
    assert_eq!(reasons[3], "global_batch `-512`: negative");
    assert_eq!(reasons[4], "seq_len blank: sequence length not given");
    assert!(
        reasons[5].starts_with("training precision mxfp8 needs a Blackwell GPU"),
        "{}",
        reasons[5]
    );
    assert!(
        reasons[6].contains("fields where the header names"),
        "{}",
        reasons[6]
    );
    // The table names the line and the column too.
    let (code, out, _) = autoplan(&["validate", "--runs", path.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("nar21_t1_18B") && out.contains("line 6    tp `eight`: not a whole number"),
        "{out}"
    );
}

#[test]
fn a_file_that_is_not_of_the_schema_is_one_error_naming_file_and_column() {
    let path = temp(
        "validate_no_gpu_column.csv",
        "id,model,num_gpus\na,llama3-8b,8\n",
    );
    let (code, _, err) = autoplan(&["validate", "--runs", path.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("validate_no_gpu_column.csv") && err.contains("no column `gpu`"),
        "{err}"
    );
    let path = temp("validate_binary.csv", "\u{0}\u{1}PK\u{3}\u{4}\n\u{7f}\n");
    let (code, _, err) = autoplan(&["validate", "--runs", path.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no column `id`"), "{err}");
    // Every row skipped: printed, then exit 2 saying nothing was scored.
    let path = temp(
        "validate_all_skipped.csv",
        &runs_file(&[("nar21_t1_1.7B", &[("num_gpus", "")])]),
    );
    let (code, out, err) = autoplan(&["validate", "--runs", path.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(out.contains("num_gpus blank") && err.contains("no row could be scored"));
}

#[test]
fn collective_validate_skips_bad_sizes_per_row() {
    let text = std::fs::read_to_string(data("collectives_measured.csv")).unwrap();
    let mut lines: Vec<String> = text.lines().take(7).map(str::to_string).collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = header.iter().position(|h| *h == "bytes").unwrap();
    let set = |line: &str, value: &str| {
        let mut cells: Vec<String> = line.split(',').map(str::to_string).collect();
        cells[col] = value.to_string();
        cells.join(",")
    };
    lines[2] = set(&lines[2], "8GiB");
    lines[3] = set(&lines[3], "n/a");
    lines[4] = set(&lines[4], "-5");
    lines[5] = set(&lines[5], "");
    let path = temp("coll_bad_sizes.csv", &(lines.join("\n") + "\n"));
    let (code, out, err) = autoplan(&[
        "collective",
        "--validate",
        path.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 2, "{v}");
    let got: Vec<(String, u64, String, String)> = v["not_expressible"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().into(),
                s["line"].as_u64().unwrap(),
                s["column"].as_str().unwrap_or("").into(),
                s["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want = [
        (
            "c02",
            3,
            "bytes",
            "bytes `8GiB`: not a number of bytes (write 8589934592)",
        ),
        // A cell stating no value is blank (`autoplan_input::table::NOT_GIVEN`).
        ("c03", 4, "bytes", "bytes blank: message size not given"),
        ("c04", 5, "bytes", "bytes `-5`: negative"),
        ("c05", 6, "bytes", "bytes blank: message size not given"),
    ];
    let want: Vec<(String, u64, String, String)> = want
        .iter()
        .map(|(i, l, c, r)| (i.to_string(), *l, c.to_string(), r.to_string()))
        .collect();
    assert_eq!(got, want);
    let (code, out, _) = autoplan(&["collective", "--validate", path.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("c02   skipped (unreadable cell, line 3): bytes `8GiB`"),
        "{out}"
    );
    assert!(
        out.contains("4 skipped (data missing 2, unreadable 2, tool limit 0)"),
        "{out}"
    );
    // A header without the columns: one error naming the file and the column.
    let path = temp("coll_no_header.csv", "a,b\n1,2\n");
    let (code, _, err) = autoplan(&["collective", "--validate", path.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("coll_no_header.csv") && err.contains("no column `id`"),
        "{err}"
    );
}

/// A column of no rule (a misspelt measured figure reads as blank in every row) is named on
/// stderr with the schema's column it is nearest to; the rows are still scored.
#[test]
fn a_misspelt_column_is_named() {
    let text = runs_file(&[("nar21_t1_1.7B", &[])]).replacen(
        "measured_step_time_s",
        "measured_step_time_sec",
        1,
    );
    let path = temp("validate_misspelt_column.csv", &text);
    let (code, out, err) = autoplan(&["validate", "--runs", path.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("nar21_t1_1.7B"), "{out}");
    assert!(
        err.contains(
            "column `measured_step_time_sec` is not one autoplan reads (ignored); did you mean \
             `measured_step_time_s`?"
        ),
        "{err}"
    );
}

/// The schema's columns (`runs::COLUMNS`, what a column is checked against) are both files'
/// headers, in order.
#[test]
fn the_schema_is_the_published_files_header() {
    for f in ["published_runs.csv", "published_runs_2.csv"] {
        let text = std::fs::read_to_string(data(f)).unwrap();
        let header = text.lines().next().unwrap().trim_start_matches('\u{feff}');
        assert_eq!(header, autoplan_evaluate::runs::COLUMNS.join(","), "{f}");
    }
}

/// An id the file gives twice is scored once: the later row is skipped naming the first's line.
#[test]
fn a_repeated_id_is_scored_once() {
    let ok = "nar21_t1_1.7B";
    let text = runs_file(&[
        (ok, &[]),
        ("nar21_t1_3.6B", &[]),
        (ok, &[("measured_tflops_per_gpu", "150")]),
    ]);
    let path = temp("validate_repeated_id.csv", &text);
    let v = validate_json(path.to_str().unwrap());
    assert_eq!(row_ids(&v), [ok, "nar21_t1_3.6B"]);
    assert_eq!(
        skips(&v),
        [(
            ok.to_string(),
            "unreadable".to_string(),
            Some("id".to_string()),
            4
        )]
    );
    assert_eq!(
        v["skipped"][0]["reason"].as_str(),
        Some("id `nar21_t1_1.7B` is also the row on line 2: scored once")
    );
}
