//! Reading sweep CSVs back: whole case blocks, the point to resume from, and merging.
//!
//! A file is the header line followed by blocks; a block is the consecutive rows of one case
//! (its `plans` ranked rows, or one `infeasible` row). Blocks are appended whole, so after a
//! kill the file is whole blocks plus, at most, a torn tail: a partial last line, or the first
//! lines of a block. [`resume_point`] finds where the whole blocks end; [`merge`] accepts only
//! whole files.

use std::collections::{BTreeMap, BTreeSet};

use crate::schema::{self, col, COLUMNS, INFEASIBLE, KEY_COLUMNS, OK};
use crate::{Case, CaseKeys};

/// What is wrong with a sweep CSV. Every variant names the file (and line where there is one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsvError {
    /// The first line is not this version's header.
    #[error("{file}:1: not a sweep CSV of this schema: the header differs from `{expected}`")]
    Header { file: String, expected: String },
    /// A row that does not parse or breaks the schema.
    #[error("{file}:{line}: {reason}")]
    Row {
        file: String,
        line: usize,
        reason: String,
    },
    /// The file ends inside a row or a block (an interrupted sweep).
    #[error("{file}:{line}: the file ends inside case {case}'s rows: an interrupted sweep; finish it with `autoplan sweep --resume` first")]
    Truncated {
        file: String,
        line: usize,
        case: String,
    },
    /// A case's rows appear twice.
    #[error("{file}:{line}: case {case} appears twice (first in {first})")]
    Duplicate {
        file: String,
        line: usize,
        case: usize,
        first: String,
    },
    /// A block whose keys are not those of the spec's case with that index.
    #[error("{file}:{line}: case {case} is `{found}` but the spec's case {case} is `{expected}`: the file comes from another spec (or shard)")]
    Mismatch {
        file: String,
        line: usize,
        case: usize,
        found: String,
        expected: String,
    },
    /// Cases of the spec that no file has.
    #[error("{count} case(s) of the spec missing from the inputs, first: {first:?}")]
    Missing { count: usize, first: Vec<usize> },
}

/// The rows of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The case index (`case` column).
    pub case: usize,
    pub keys: CaseKeys,
    /// 1-based line of its first row in its file.
    pub line: usize,
    /// The rows, split into fields (in [`COLUMNS`] order).
    pub rows: Vec<Vec<String>>,
    /// The rows' exact text, `\n`-terminated.
    pub text: String,
}

impl Block {
    /// The value of `column` in row `row` (0 = best).
    pub fn field(&self, row: usize, column: &str) -> &str {
        &self.rows[row][col(column)]
    }

    /// Whether the case has plans.
    pub fn ok(&self) -> bool {
        self.field(0, "status") == OK
    }
}

/// A parsed sweep CSV of whole blocks, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepTable {
    pub file: String,
    pub blocks: Vec<Block>,
}

impl SweepTable {
    /// Parse a whole file. Errors on a torn tail (use [`resume_point`] for those).
    pub fn parse(file: &str, text: &str) -> Result<SweepTable, CsvError> {
        let scan = scan(file, text)?;
        if let Some(e) = scan.torn {
            return Err(e);
        }
        Ok(SweepTable {
            file: file.to_string(),
            blocks: scan.blocks,
        })
    }
}

/// Where an interrupted sweep file stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    /// Bytes to keep: the header and the whole blocks. The rest (a torn tail) is to be cut.
    pub keep: usize,
    /// Whether the kept part includes the header line.
    pub has_header: bool,
    /// Cases whose rows are complete.
    pub done: BTreeSet<usize>,
}

/// Where to resume `text` (the output of an interrupted run of `cases`): checks that every
/// whole block is one of `cases` with the same keys, and finds where they end. An empty file
/// or a torn header resumes from nothing.
pub fn resume_point(file: &str, text: &str, cases: &[Case]) -> Result<Resume, CsvError> {
    let header = schema::header();
    if !text.contains('\n') && header.starts_with(text) {
        return Ok(Resume {
            keep: 0,
            has_header: false,
            done: BTreeSet::new(),
        });
    }
    let scan = scan(file, text)?;
    let by_index: BTreeMap<usize, &Case> = cases.iter().map(|c| (c.index, c)).collect();
    let mut done = BTreeSet::new();
    for b in &scan.blocks {
        check_keys(file, b, by_index.get(&b.case).copied())?;
        if !done.insert(b.case) {
            return Err(duplicate(file, b, file));
        }
    }
    Ok(Resume {
        keep: scan.keep,
        has_header: true,
        done,
    })
}

/// Merge sweep files (`(name, text)` pairs, e.g. the shards of one spec) into the canonical
/// file: the header, then every block in case order. A single file gives its canonical form.
/// With `expected` (the spec's full grid), also checks that the blocks are exactly its cases.
pub fn merge(inputs: &[(&str, &str)], expected: Option<&[Case]>) -> Result<String, CsvError> {
    let mut blocks: BTreeMap<usize, (&str, Block)> = BTreeMap::new();
    for &(file, text) in inputs {
        for b in SweepTable::parse(file, text)?.blocks {
            if let Some(c) = expected {
                check_keys(file, &b, c.get(b.case).filter(|c| c.index == b.case))?;
            }
            if let Some((first, _)) = blocks.get(&b.case) {
                return Err(duplicate(file, &b, first));
            }
            blocks.insert(b.case, (file, b));
        }
    }
    if let Some(cases) = expected {
        let missing: Vec<usize> = cases
            .iter()
            .map(|c| c.index)
            .filter(|i| !blocks.contains_key(i))
            .collect();
        if !missing.is_empty() {
            return Err(CsvError::Missing {
                count: missing.len(),
                first: missing.into_iter().take(10).collect(),
            });
        }
    }
    let mut out = schema::header();
    for (_, b) in blocks.values() {
        out.push_str(&b.text);
    }
    Ok(out)
}

fn duplicate(file: &str, b: &Block, first: &str) -> CsvError {
    CsvError::Duplicate {
        file: file.to_string(),
        line: b.line,
        case: b.case,
        first: first.to_string(),
    }
}

fn check_keys(file: &str, b: &Block, case: Option<&Case>) -> Result<(), CsvError> {
    let found = b.rows[0][..KEY_COLUMNS].join(",");
    match case {
        Some(c) if schema::key_fields(c).as_slice() == &b.rows[0][..KEY_COLUMNS] => Ok(()),
        Some(c) => Err(CsvError::Mismatch {
            file: file.to_string(),
            line: b.line,
            case: b.case,
            found,
            expected: schema::key_fields(c).join(","),
        }),
        None => Err(CsvError::Mismatch {
            file: file.to_string(),
            line: b.line,
            case: b.case,
            found,
            expected: "no such case".to_string(),
        }),
    }
}

struct Scan {
    blocks: Vec<Block>,
    /// End of the header and whole blocks.
    keep: usize,
    /// What is torn after `keep`, if anything.
    torn: Option<CsvError>,
}

/// Split `text` into the header and whole blocks, and describe any torn tail.
fn scan(file: &str, text: &str) -> Result<Scan, CsvError> {
    let header = schema::header();
    if !text.starts_with(&header) {
        return Err(CsvError::Header {
            file: file.to_string(),
            expected: header.trim_end().to_string(),
        });
    }
    let mut blocks: Vec<Block> = Vec::new();
    let mut keep = header.len();
    // The block being read: its rows and start offset.
    let mut open: Option<(Block, usize)> = None;
    let mut offset = header.len();
    let mut line_no = 1;
    let torn_at = |line: usize, case: String| CsvError::Truncated {
        file: file.to_string(),
        line,
        case,
    };
    while offset < text.len() {
        line_no += 1;
        let Some(len) = text[offset..].find('\n') else {
            // A partial last line: the write of its block was cut.
            let case = text[offset..]
                .split(',')
                .next()
                .unwrap_or_default()
                .to_string();
            let at = open.as_ref().map_or(line_no, |(b, _)| b.line);
            return Ok(Scan {
                blocks,
                keep,
                torn: Some(torn_at(at, case)),
            });
        };
        let line = &text[offset..offset + len + 1];
        let row = parse_row(file, line_no, line)?;
        schema::check_row(&row).map_err(|reason| row_error(file, line_no, &reason))?;
        let case: usize = row[0].parse().map_err(|_| CsvError::Row {
            file: file.to_string(),
            line: line_no,
            reason: format!("case = {:?}: not a case index", row[0]),
        })?;
        match &mut open {
            Some((b, _)) if b.case == case => {
                if b.rows[0][..KEY_COLUMNS] != row[..KEY_COLUMNS] {
                    return Err(row_error(
                        file,
                        line_no,
                        "keys differ from the case's first row",
                    ));
                }
                b.rows.push(row);
            }
            Some((b, _)) => {
                return Err(torn_in_middle(file, b));
            }
            None => {
                open = Some((
                    Block {
                        case,
                        keys: keys_of(file, line_no, &row)?,
                        line: line_no,
                        rows: vec![row],
                        text: String::new(),
                    },
                    offset,
                ));
            }
        }
        offset += len + 1;
        let (b, start) = open.as_mut().expect("a block is open");
        if block_complete(file, b)? {
            b.text = text[*start..offset].to_string();
            keep = offset;
            blocks.push(open.take().expect("a block is open").0);
        }
    }
    let torn = open.map(|(b, _)| torn_at(b.line, b.case.to_string()));
    Ok(Scan { blocks, keep, torn })
}

fn torn_in_middle(file: &str, b: &Block) -> CsvError {
    row_error(
        file,
        b.line,
        &format!(
            "case {} has {} of its rows, then another case starts: the file was edited or corrupted",
            b.case,
            b.rows.len()
        ),
    )
}

fn row_error(file: &str, line: usize, reason: &str) -> CsvError {
    CsvError::Row {
        file: file.to_string(),
        line,
        reason: reason.to_string(),
    }
}

fn parse_row(file: &str, line_no: usize, line: &str) -> Result<Vec<String>, CsvError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(line.as_bytes());
    let mut record = csv::StringRecord::new();
    let read = reader
        .read_record(&mut record)
        .map_err(|e| row_error(file, line_no, &e.to_string()))?;
    if !read || record.len() != COLUMNS.len() {
        return Err(row_error(
            file,
            line_no,
            &format!("{} fields, the schema has {}", record.len(), COLUMNS.len()),
        ));
    }
    Ok(record.iter().map(str::to_string).collect())
}

fn keys_of(file: &str, line: usize, row: &[String]) -> Result<CaseKeys, CsvError> {
    let num = |name: &str| -> Result<u32, CsvError> {
        row[col(name)].parse().map_err(|_| {
            row_error(
                file,
                line,
                &format!("{name} = {:?}: not a count", row[col(name)]),
            )
        })
    };
    Ok(CaseKeys {
        model: row[col("model")].clone(),
        cluster: row[col("cluster")].clone(),
        gpus: num("gpus")?,
        seq_len: num("seq_len")?,
        global_batch: num("global_batch")?,
        space: row[col("space")].clone(),
    })
}

/// Whether `b` holds all its rows; an error if its rows contradict each other.
fn block_complete(file: &str, b: &Block) -> Result<bool, CsvError> {
    let last = b.rows.len() - 1;
    let line = b.line + last;
    let row = &b.rows[last];
    let plans: usize = row[col("plans")].parse().map_err(|_| {
        row_error(
            file,
            line,
            &format!("plans = {:?}: not a count", row[col("plans")]),
        )
    })?;
    match row[col("status")].as_str() {
        INFEASIBLE if plans == 0 && last == 0 => Ok(true),
        OK if plans > 0 => {
            if row[col("rank")] != (last + 1).to_string() {
                return Err(row_error(
                    file,
                    line,
                    &format!("rank = {:?}, expected {}", row[col("rank")], last + 1),
                ));
            }
            if row[col("plans")] != b.rows[0][col("plans")] || last >= plans {
                return Err(row_error(file, line, "more rows than the case's `plans`"));
            }
            Ok(last + 1 == plans)
        }
        s => Err(row_error(
            file,
            line,
            &format!("status = {s:?} with plans = {plans}: expected `ok` with plans ≥ 1 or `infeasible` with plans = 0, alone"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::SyntheticPlanner;
    use crate::{run, SweepSpec};
    use autoplan_input::Source;

    const SPEC: &str = r#"top_k = 3
models = ["m1", "m22"]
seq_lens = [1024, 4096]
global_batches = [8, 64]
spaces = ["s"]
[[clusters]]
name = "c"
gpus = [4, 16]
"#;

    fn cases() -> Vec<Case> {
        SweepSpec::parse(Source::new("s.toml", SPEC))
            .unwrap()
            .cases(|_| unreachable!())
            .unwrap()
    }

    /// Run `cases` skipping `done`, appending to `out` (completion order), then canonicalize.
    fn sweep(cases: &[Case], out: &mut String, threads: usize) -> String {
        sweep_with(cases, out, threads, 300)
    }

    fn sweep_with(cases: &[Case], out: &mut String, threads: usize, delay_us: u64) -> String {
        run(
            cases,
            &SyntheticPlanner {
                max_delay_us: delay_us,
            },
            threads,
            |_, rows| {
                out.push_str(&rows);
                Ok::<_, std::convert::Infallible>(std::ops::ControlFlow::Continue(()))
            },
        )
        .unwrap();
        merge(&[("out.csv", out.as_str())], None).unwrap()
    }

    fn full() -> String {
        sweep(&cases(), &mut schema::header(), 1)
    }

    #[test]
    fn canonical_file_is_in_case_order_and_whole() {
        let text = full();
        let t = SweepTable::parse("f", &text).unwrap();
        assert_eq!(t.blocks.len(), 16);
        assert!(t.blocks.iter().enumerate().all(|(i, b)| b.case == i));
        // Both outcomes and quoting are exercised.
        assert!(t.blocks.iter().any(|b| !b.ok()));
        assert!(t.blocks.iter().any(|b| b.rows.len() == 2));
        assert!(text.contains("\"global batch 8 < 16 GPUs, \"\"no DP split\"\" at any degree\""));
        assert_eq!(merge(&[("f", &text)], Some(&cases())).unwrap(), text);
    }

    #[test]
    fn threads_do_not_change_the_file() {
        let one = full();
        for threads in [2, 3] {
            let mut raw = schema::header();
            let out = sweep(&cases(), &mut raw, threads);
            assert_eq!(out, one, "{threads} threads");
        }
    }

    #[test]
    fn resume_from_every_cut_gives_the_uninterrupted_file() {
        let all = cases();
        let full = full();
        // The completion-order file of a 2-thread run, cut at every byte.
        let mut raw = schema::header();
        sweep(&all, &mut raw, 2);
        // Every byte of the header and the first block, every line boundary ±1, and a
        // stride through the rest (every byte of the whole file takes ~20 s).
        let first_block = raw.match_indices('\n').nth(3).map_or(raw.len(), |(i, _)| i);
        let mut cuts: BTreeSet<usize> = (0..=first_block)
            .chain((0..raw.len()).step_by(11))
            .collect();
        for (i, _) in raw.match_indices('\n') {
            cuts.extend([i, i + 1, i + 2]);
        }
        cuts.insert(raw.len());
        for cut in cuts.into_iter().filter(|&c| c <= raw.len()) {
            let text = &raw[..cut];
            let r = resume_point("out.csv", text, &all).unwrap();
            assert!(r.keep <= cut);
            let mut kept = text[..r.keep].to_string();
            if !r.has_header {
                kept = schema::header();
            }
            let rest: Vec<Case> = all
                .iter()
                .filter(|c| !r.done.contains(&c.index))
                .cloned()
                .collect();
            assert_eq!(
                sweep_with(&rest, &mut kept, 1, 0),
                full,
                "cut at byte {cut}"
            );
        }
    }

    #[test]
    fn shards_merge_to_the_unsharded_file() {
        let all = cases();
        let full = full();
        for n in 1..5 {
            let shards: Vec<String> = (1..=n)
                .map(|k| {
                    let mine = crate::Shard::new(k, n).unwrap().select(&all);
                    sweep(&mine, &mut schema::header(), 2)
                })
                .collect();
            let inputs: Vec<(&str, &str)> =
                shards.iter().map(|s| ("shard", s.as_str())).rev().collect();
            assert_eq!(merge(&inputs, Some(&all)).unwrap(), full, "{n} shards");
            if n > 1 {
                let err = merge(&inputs[1..], Some(&all)).unwrap_err();
                assert!(matches!(err, CsvError::Missing { .. }), "{err}");
                let twice = [inputs[0], inputs[0]];
                let err = merge(&twice, None).unwrap_err();
                assert!(matches!(err, CsvError::Duplicate { line: 2, .. }), "{err}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// A kill at any byte, resumed with any thread count, gives the uninterrupted file; and
        /// the shards of any slicing, merged in any order, give it too.
        #[test]
        fn any_cut_or_slicing_gives_the_canonical_file(
            cut in 0.0f64..=1.0,
            threads in 1usize..4,
            n in 1u32..6,
            rotate in 0usize..6,
        ) {
            let all = cases();
            let full = full();
            let mut raw = schema::header();
            sweep_with(&all, &mut raw, 2, 100);
            let cut = ((raw.len() as f64 * cut) as usize).min(raw.len());
            let text = &raw[..cut];
            let r = resume_point("out.csv", text, &all).unwrap();
            let mut kept = if r.has_header { text[..r.keep].to_string() } else { schema::header() };
            let rest: Vec<Case> = all.iter().filter(|c| !r.done.contains(&c.index)).cloned().collect();
            proptest::prop_assert_eq!(&sweep_with(&rest, &mut kept, threads, 0), &full);

            let mut shards: Vec<String> = (1..=n)
                .map(|k| sweep_with(&crate::Shard::new(k, n).unwrap().select(&all), &mut schema::header(), threads, 0))
                .collect();
            shards.rotate_left(rotate % n as usize);
            let inputs: Vec<(&str, &str)> = shards.iter().map(|s| ("shard", s.as_str())).collect();
            proptest::prop_assert_eq!(&merge(&inputs, Some(&all)).unwrap(), &full);
        }
    }

    #[test]
    fn torn_and_foreign_files_are_refused_with_their_line() {
        let full = full();
        let cut = &full[..full.len() - 5];
        let err = SweepTable::parse("f.csv", cut).unwrap_err();
        assert!(matches!(err, CsvError::Truncated { .. }), "{err}");
        assert!(err.to_string().contains("--resume"), "{err}");
        let err = SweepTable::parse("f.csv", "a,b\n1,2\n").unwrap_err();
        assert!(
            err.to_string().starts_with("f.csv:1: not a sweep CSV"),
            "{err}"
        );
        // A row of another spec: resume refuses to mix them.
        let other = full.replace(",m1,", ",mX,");
        let err = resume_point("f.csv", &other, &cases()).unwrap_err();
        assert!(
            err.to_string().starts_with("f.csv:2: case 0 is `0,mX,"),
            "{err}"
        );
        // A block whose rows were deleted in the middle.
        let mut lines: Vec<&str> = full.lines().collect();
        let two = lines.iter().position(|l| l.contains(",ok,,2,2,")).unwrap();
        lines.remove(two);
        let edited = lines.join("\n") + "\n";
        let err = SweepTable::parse("f.csv", &edited).unwrap_err();
        assert!(matches!(err, CsvError::Row { .. }), "{err}");
    }
}
