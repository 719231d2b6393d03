//! Reading a CSV file whose first line names its columns (`published_runs.csv`,
//! `collectives_measured.csv`) as text records, every cell parsed by the caller through
//! [`Row`], so one bad cell is an error of that row ([`CellError`], naming the column) and never
//! of the file. Only a file without a header or without a required column is an error of the
//! file ([`TableError`]).
//!
//! Lines are physical lines of the file, 1-based, the header line 1: a quoted field that spans
//! lines counts every line it spans, and a row's line is the one it starts on.
//!
//! ```
//! use autoplan_input::table::Table;
//! let t = Table::parse("runs.csv", b"id,num_gpus\na,8\nb,\nc,8x\n", &["id"]).unwrap();
//! let rows: Vec<_> = t.rows().collect();
//! assert_eq!(rows[0].whole("num_gpus", 1).unwrap(), Some(8));
//! assert_eq!(rows[1].whole("num_gpus", 1).unwrap(), None);
//! let e = rows[2].whole("num_gpus", 1).unwrap_err();
//! assert_eq!((rows[2].line(), e.to_string()), (4, "num_gpus `8x`: not a whole number".into()));
//! ```

use std::fmt;

/// A file that cannot be read as a table at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// No header line: the file is empty.
    #[error("{file}: empty file (the first line must name the columns)")]
    Empty { file: String },
    /// A column the caller needs is not named in the header (line 1).
    #[error(
        "{file}: line 1 names no column `{column}` (its columns: {found}); is it a CSV file of \
         this schema?"
    )]
    MissingColumn {
        file: String,
        column: String,
        found: String,
    },
    /// A column named twice in the header: which of the two a row means is ambiguous.
    #[error("{file}: line 1 names column `{column}` twice")]
    DuplicateColumn { file: String, column: String },
    /// The CSV framing itself could not be read.
    #[error("{file}: line {line}: {message}")]
    Csv {
        file: String,
        line: u64,
        message: String,
    },
}

/// A cell of a row that the row needs and that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellError {
    /// The column's name, as the header writes it.
    pub column: String,
    /// The cell as written (empty for a blank cell).
    pub cell: String,
    pub kind: CellErrorKind,
    /// What is wrong with it ("not a whole number", "blank").
    pub reason: String,
}

/// Blank (the fact is not given) or present but unreadable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellErrorKind {
    Blank,
    Unreadable,
}

impl CellError {
    /// A blank cell the row needs: `why` names the missing fact ("GPU count not given").
    pub fn blank(column: &str, why: impl Into<String>) -> Self {
        CellError {
            column: column.to_string(),
            cell: String::new(),
            kind: CellErrorKind::Blank,
            reason: why.into(),
        }
    }

    /// A cell that is there but cannot be read: `reason` says why ("not a number").
    pub fn unreadable(column: &str, cell: &str, reason: impl Into<String>) -> Self {
        CellError {
            column: column.to_string(),
            cell: cell.to_string(),
            kind: CellErrorKind::Unreadable,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for CellError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            CellErrorKind::Blank => write!(f, "{} blank: {}", self.column, self.reason),
            CellErrorKind::Unreadable => {
                write!(f, "{} `{}`: {}", self.column, self.cell, self.reason)
            }
        }
    }
}

/// A CSV file read as text: its header and its records, each with the line it starts on.
#[derive(Debug, Clone)]
pub struct Table {
    file: String,
    columns: Vec<String>,
    records: Vec<(u64, csv::ByteRecord)>,
}

impl Table {
    /// Read `bytes` (the contents of `file`, named in errors) as a table whose first line names
    /// the columns; `required` columns must be among them. Blank lines are skipped; a UTF-8
    /// byte-order mark is ignored.
    pub fn parse(file: &str, bytes: &[u8], required: &[&str]) -> Result<Table, TableError> {
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        // Flexible: a row with too few or too many fields is that row's error (see
        // [`Row::shape_error`]), not the file's.
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(bytes);
        let line_of = |byte: u64| -> u64 {
            let end = (byte as usize).min(bytes.len());
            1 + bytes[..end].iter().filter(|&&b| b == b'\n').count() as u64
        };
        let mut records = Vec::new();
        let mut rec = csv::ByteRecord::new();
        loop {
            let start = rdr.position().byte();
            match rdr.read_byte_record(&mut rec) {
                Ok(false) => break,
                Ok(true) => {
                    // The reader's position is before the blank lines it skips: the record
                    // starts at the first byte after them.
                    let mut at = rec.position().map_or(start, |p| p.byte()) as usize;
                    while at < bytes.len() && matches!(bytes[at], b'\n' | b'\r') {
                        at += 1;
                    }
                    records.push((line_of(at as u64), rec.clone()));
                }
                Err(e) => {
                    return Err(TableError::Csv {
                        file: file.to_string(),
                        line: line_of(start),
                        message: e.to_string(),
                    })
                }
            }
        }
        if records.is_empty() {
            return Err(TableError::Empty {
                file: file.to_string(),
            });
        }
        let (_, header) = records.remove(0);
        let columns: Vec<String> = header
            .iter()
            .map(|c| String::from_utf8_lossy(c).trim().to_string())
            .collect();
        for (i, c) in columns.iter().enumerate() {
            if !c.is_empty() && columns[..i].contains(c) {
                return Err(TableError::DuplicateColumn {
                    file: file.to_string(),
                    column: c.clone(),
                });
            }
        }
        for &r in required {
            if !columns.iter().any(|c| c == r) {
                let mut found = columns.join(",");
                if found.len() > 120 {
                    let cut = (0..=120).rev().find(|&i| found.is_char_boundary(i));
                    found.truncate(cut.unwrap_or(0));
                    found.push('…');
                }
                return Err(TableError::MissingColumn {
                    file: file.to_string(),
                    column: r.to_string(),
                    found,
                });
            }
        }
        Ok(Table {
            file: file.to_string(),
            columns,
            records,
        })
    }

    /// The file's name as given to [`Table::parse`].
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The columns the header names, in order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Whether the header names `column`.
    pub fn has(&self, column: &str) -> bool {
        self.columns.iter().any(|c| c == column)
    }

    /// The rows after the header, in file order.
    pub fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        self.records.iter().map(move |(line, rec)| Row {
            table: self,
            line: *line,
            rec,
        })
    }
}

/// One row of a [`Table`]; cells by column name.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    table: &'a Table,
    line: u64,
    rec: &'a csv::ByteRecord,
}

impl<'a> Row<'a> {
    /// The physical line the row starts on (the header is line 1).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Why the row's fields cannot be matched to the columns: more or fewer fields than the
    /// header names (a missing or extra comma, or a quote left open). `None` when they match.
    pub fn shape_error(&self) -> Option<String> {
        let (n, m) = (self.rec.len(), self.table.columns.len());
        (n != m).then(|| {
            format!(
                "{n} fields where the header names {m} columns (a missing or extra comma, or an \
                 unclosed quote): its cells cannot be matched to the columns"
            )
        })
    }

    /// The cell of `column` as written, trimmed; `None` when blank, when it is one of the
    /// spellings tables use for "no value" ([`NOT_GIVEN`]: `n/a`, `-`, `unknown`, …), or when
    /// the column is absent. Not UTF-8: an unreadable cell.
    pub fn text(&self, column: &str) -> Result<Option<&'a str>, CellError> {
        let Some(i) = self.table.columns.iter().position(|c| c == column) else {
            return Ok(None);
        };
        let raw = self.rec.get(i).unwrap_or(b"");
        let s = std::str::from_utf8(raw).map_err(|_| {
            CellError::unreadable(
                column,
                &String::from_utf8_lossy(raw),
                "not UTF-8 text (is the file a CSV file?)",
            )
        })?;
        let s = s.trim();
        Ok((!s.is_empty() && !not_given(s)).then_some(s))
    }

    /// A numeric cell's text: as [`Row::text`], and Python's `None` (what `str(None)` writes
    /// for a missing number) is blank too; in a text column `none` is a value (no recompute,
    /// no ZeRO), so only the numeric readers take it as blank.
    pub fn numeric_text(&self, column: &str) -> Result<Option<&'a str>, CellError> {
        Ok(self
            .text(column)?
            .filter(|s| !s.eq_ignore_ascii_case("none")))
    }

    /// The cell as text, blank as "".
    pub fn string(&self, column: &str) -> Result<String, CellError> {
        Ok(self.text(column)?.unwrap_or("").to_string())
    }

    /// A whole number of at least `min`, or `None` when blank.
    /// Written plainly (`8192`), with thousands grouped by commas (`1,024`) or with a zero
    /// fraction (`8192.0`, as a spreadsheet or pandas writes an integer column holding blanks);
    /// `8192.5` is not whole.
    pub fn whole(&self, column: &str, min: u32) -> Result<Option<u32>, CellError> {
        let Some(s) = self.numeric_text(column)? else {
            return Ok(None);
        };
        let bad = |why: String| Err(CellError::unreadable(column, s, why));
        let digits = ungrouped(s);
        if digits.starts_with('-') && digits[1..].trim().parse::<f64>().is_ok() {
            return bad("negative".into());
        }
        let digits = match digits.split_once('.') {
            Some((int, frac)) if !int.is_empty() && frac.bytes().all(|b| b == b'0') => int,
            _ => &digits,
        };
        match digits.parse::<u64>() {
            Ok(v) if v < u64::from(min) => bad(format!("must be at least {min}")),
            Ok(v) => match u32::try_from(v) {
                Ok(v) => Ok(Some(v)),
                Err(_) => bad(format!("over {}", u32::MAX)),
            },
            Err(_) => bad("not a whole number".into()),
        }
    }

    /// A finite number above zero (`positive`) or at least zero, or `None` when blank.
    pub fn number(&self, column: &str, positive: bool) -> Result<Option<f64>, CellError> {
        let Some(s) = self.numeric_text(column)? else {
            return Ok(None);
        };
        number_in(column, s, s, positive).map(Some)
    }
}

/// `text`, part of the cell `cell` of `column` (the cell less a unit or sign it carries), as a
/// finite number above zero (`positive`) or at least zero; an error names the whole cell.
/// Thousands may be grouped by commas (`1,315.6`), and a measured figure marked approximate
/// (`~150`, `≈150`) is that figure: the tables it comes from round it anyway.
pub fn number_in(column: &str, cell: &str, text: &str, positive: bool) -> Result<f64, CellError> {
    let bad = |why: &str| Err(CellError::unreadable(column, cell, why));
    let text = text
        .strip_prefix('~')
        .or_else(|| text.strip_prefix('≈'))
        .map_or(text, str::trim_start);
    match ungrouped(text).parse::<f64>() {
        Ok(v) if !v.is_finite() => bad("not a finite number"),
        Ok(v) if v < 0.0 => bad("negative"),
        Ok(v) if positive && v == 0.0 => bad("must be above zero"),
        Ok(v) => Ok(v),
        Err(_) => bad("not a number"),
    }
}

/// Cell spellings that state no value, read as a blank cell (case ignored): what tables write
/// for a figure not reported or not applicable. A required cell so written is missing data, as
/// a blank one; an optional one takes its default, as a blank one does.
pub const NOT_GIVEN: &[&str] = &[
    "n/a",
    "na",
    "nan",
    "null",
    "-",
    "–",
    "—",
    "?",
    "unknown",
    "not stated",
    "not given",
    "not reported",
    "not available",
];

fn not_given(s: &str) -> bool {
    NOT_GIVEN.iter().any(|m| s.eq_ignore_ascii_case(m))
}

/// `s` without the commas of thousands grouping (`1,024` → `1024`, `1,315.6` → `1315.6`):
/// only a leading group of one to three digits followed by groups of exactly three is
/// grouping; anything else (`1,24`, `8,4`: a list, or a decimal comma) is returned as written
/// and fails to parse.
fn ungrouped(s: &str) -> std::borrow::Cow<'_, str> {
    let unsigned = s.strip_prefix(['-', '+']).unwrap_or(s);
    let int = unsigned.split_once('.').map_or(unsigned, |(i, _)| i);
    let mut groups = int.split(',');
    let first = groups.next().unwrap_or("");
    let digits = |g: &str| g.bytes().all(|b| b.is_ascii_digit());
    let grouped = int.contains(',')
        && (1..=3).contains(&first.len())
        && digits(first)
        && groups.all(|g| g.len() == 3 && digits(g));
    if grouped {
        std::borrow::Cow::Owned(s.replace(',', ""))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_count_quoted_newlines_and_blank_lines() {
        let text = "id,note,n\n\"a\",\"two\nlines\",1\n\nb,x,2\r\nc,\"q\"\"\n\",3\n";
        let t = Table::parse("f.csv", text.as_bytes(), &["id", "n"]).unwrap();
        let got: Vec<(u64, String)> = t
            .rows()
            .map(|r| (r.line(), r.string("id").unwrap()))
            .collect();
        assert_eq!(
            got,
            [(2, "a".into()), (5, "b".into()), (6, "c".into())].to_vec()
        );
    }

    #[test]
    fn missing_column_empty_file_and_duplicates_are_file_errors() {
        let e = Table::parse("f.csv", b"name,value\nx,1\n", &["id"]).unwrap_err();
        assert!(
            e.to_string().contains("f.csv: line 1 names no column `id`"),
            "{e}"
        );
        let e = Table::parse("f.csv", b"", &["id"]).unwrap_err();
        assert_eq!(
            e,
            TableError::Empty {
                file: "f.csv".into()
            }
        );
        let e = Table::parse("f.csv", b"id,a,a\n", &["id"]).unwrap_err();
        assert!(e.to_string().contains("column `a` twice"), "{e}");
        // Binary bytes: the header names no `id`.
        let e = Table::parse("f.bin", &[0xff, 0xfe, 0, 1, b'\n', 7], &["id"]).unwrap_err();
        assert!(matches!(e, TableError::MissingColumn { .. }), "{e}");
    }

    #[test]
    fn cells_parse_or_say_why() {
        let t = Table::parse(
            "f.csv",
            b"\xEF\xBB\xBFid,n,x\na,-3,1.5\nb,0,-2\nc,1e3,inf\nd,99999999999,0\ne,2\n",
            &["id"],
        )
        .unwrap();
        let r: Vec<Row> = t.rows().collect();
        assert_eq!(r[0].whole("n", 0).unwrap_err().reason, "negative");
        assert_eq!(r[0].number("x", true).unwrap(), Some(1.5));
        assert_eq!(r[1].whole("n", 1).unwrap_err().reason, "must be at least 1");
        assert_eq!(r[1].whole("n", 0).unwrap(), Some(0));
        assert_eq!(r[1].number("x", false).unwrap_err().reason, "negative");
        assert_eq!(r[2].whole("n", 1).unwrap_err().reason, "not a whole number");
        assert_eq!(
            r[2].number("x", true).unwrap_err().reason,
            "not a finite number"
        );
        assert!(r[3].whole("n", 1).unwrap_err().reason.starts_with("over"));
        assert_eq!(
            r[3].number("x", true).unwrap_err().reason,
            "must be above zero"
        );
        assert_eq!(r[3].number("x", false).unwrap(), Some(0.0));
        assert!(r[4]
            .shape_error()
            .unwrap()
            .starts_with("2 fields where the header names 3"));
        assert_eq!(r[4].text("x").unwrap(), None);
        assert_eq!(r[4].text("absent").unwrap(), None);
        let bad = Table::parse("f.csv", b"id,n\n\xff\xfe,1\n", &["id"]).unwrap();
        let e = bad.rows().next().unwrap().text("id").unwrap_err();
        assert_eq!(e.kind, CellErrorKind::Unreadable);
    }

    #[test]
    fn numbers_as_tables_write_them_and_cells_that_state_none() {
        let t = Table::parse(
            "f.csv",
            "id,n,x,t\n\
             a,\"1,024\",\"1,315.6\",none\n\
             b,8192.0,~150,N/A\n\
             c,8192.5,≈ 0.43,-\n\
             d,\"1,24\",\"8,4\",unknown\n\
             e,None,NaN,—\n\
             f,\"12,345,678\",.5,x\n"
                .as_bytes(),
            &["id"],
        )
        .unwrap();
        let r: Vec<Row> = t.rows().collect();
        // Thousands grouping, a zero fraction, an approximate figure.
        assert_eq!(r[0].whole("n", 1).unwrap(), Some(1024));
        assert_eq!(r[0].number("x", true).unwrap(), Some(1315.6));
        assert_eq!(r[1].whole("n", 1).unwrap(), Some(8192));
        assert_eq!(r[1].number("x", true).unwrap(), Some(150.0));
        assert_eq!(r[2].number("x", true).unwrap(), Some(0.43));
        assert_eq!(r[5].whole("n", 1).unwrap(), Some(12_345_678));
        assert_eq!(r[5].number("x", true).unwrap(), Some(0.5));
        // Not whole; not grouping (a list, a decimal comma): unreadable, not guessed.
        assert_eq!(r[2].whole("n", 1).unwrap_err().reason, "not a whole number");
        assert_eq!(r[3].whole("n", 1).unwrap_err().reason, "not a whole number");
        assert_eq!(r[3].number("x", true).unwrap_err().reason, "not a number");
        // Spellings of "no value" are blank; `none` only where the column holds a number.
        for row in &r[1..5] {
            assert_eq!(row.text("t").unwrap(), None, "line {}", row.line());
        }
        assert_eq!(r[0].text("t").unwrap(), Some("none"));
        assert_eq!(r[4].whole("n", 1).unwrap(), None);
        assert_eq!(r[4].number("x", true).unwrap(), None);
        assert_eq!(r[5].text("t").unwrap(), Some("x"));
        // A grouped negative number is named negative.
        let neg = Table::parse(
            "f.csv",
            "id,n,x\na,\"-1,024\",\"-1,315.6\"\n".as_bytes(),
            &["id"],
        )
        .unwrap();
        let neg = neg.rows().next().unwrap();
        assert_eq!(neg.whole("n", 0).unwrap_err().reason, "negative");
        assert_eq!(neg.number("x", false).unwrap_err().reason, "negative");
    }
}
