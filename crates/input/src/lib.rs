//! Reading autoplan's TOML inputs (models, clusters, search spaces, sweep specs) with errors that
//! name the file, line, column and field.
//!
//! Boundary: this crate knows TOML and locations, nothing about models or clusters. Domain crates
//! deserialize into their raw `*File` structs (with `#[serde(deny_unknown_fields)]`) through
//! [`Source::parse`], then validate and report impossible values with [`Source::invalid`], which
//! finds the line of the offending key.
//!
//! The principal types are [`Source`] (a file's name and text) and [`InputError`]. CSV files
//! whose first line names the columns (the measured-data files) are read by [`table`], cell by
//! cell, so a bad cell is an error of its row only.
//!
//! ```
//! use autoplan_input::Source;
//! #[derive(serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct Raw { model: Inner }
//! #[derive(serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct Inner { hidden: u64, heads: u64 }
//!
//! let src = Source::new("m.toml", "[model]\nhidden = 4097\nheads = 32\n");
//! let raw: Raw = src.parse().unwrap();
//! assert!(raw.model.hidden % raw.model.heads != 0);
//! let err = src.invalid(&["model", "hidden"], "4097", "not divisible by heads = 32");
//! assert_eq!(err.to_string(), "m.toml:2:1: model.hidden = 4097: not divisible by heads = 32");
//! ```

pub mod table;

use std::fmt;
use std::path::{Path, PathBuf};

/// A location in an input file: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Everything that can be wrong with an input file. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not valid TOML, or not the expected shape (unknown field, missing field, wrong type).
    /// `message` is the TOML parser's own, which names the field and, for an unknown field,
    /// the allowed ones.
    #[error("{}{}: {message}", file.display(), location.map(|l| format!(":{l}")).unwrap_or_default())]
    Syntax {
        file: PathBuf,
        location: Option<Location>,
        message: String,
    },
    /// Well-formed, but a value is impossible (zero bandwidth, hidden not divisible by heads...).
    #[error("{}{}: {field} = {value}: {reason}", file.display(), location.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        file: PathBuf,
        location: Option<Location>,
        /// Dotted path of the field, e.g. `model.hidden`.
        field: String,
        /// The offending value as written.
        value: String,
        /// Why it is impossible.
        reason: String,
    },
}

impl InputError {
    /// The file the error is about.
    pub fn file(&self) -> &Path {
        match self {
            InputError::Io { file, .. }
            | InputError::Syntax { file, .. }
            | InputError::Invalid { file, .. } => file,
        }
    }
}

/// A TOML input: its file name (for messages) and its text.
#[derive(Debug, Clone)]
pub struct Source {
    file: PathBuf,
    text: String,
}

impl Source {
    /// An in-memory source; `file` is only used in messages.
    pub fn new(file: impl Into<PathBuf>, text: impl Into<String>) -> Source {
        Source {
            file: file.into(),
            text: text.into(),
        }
    }

    /// Read a file from disk.
    pub fn read(path: impl AsRef<Path>) -> Result<Source, InputError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| InputError::Io {
            file: path.to_path_buf(),
            source,
        })?;
        Ok(Source::new(path, text))
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// Deserialize the whole document. Errors carry the line and column of the problem.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, InputError> {
        toml::from_str(&self.text).map_err(|e| InputError::Syntax {
            file: self.file.clone(),
            location: e.span().map(|s| self.location_of_offset(s.start)),
            message: e.message().trim().to_string(),
        })
    }

    /// An [`InputError::Invalid`] for the key at `path` (e.g. `["network", "inter_bw"]`),
    /// located at that key's line if the key is present in the text.
    pub fn invalid(
        &self,
        path: &[&str],
        value: impl fmt::Display,
        reason: impl fmt::Display,
    ) -> InputError {
        InputError::Invalid {
            file: self.file.clone(),
            location: self.locate(path),
            field: path.join("."),
            value: value.to_string(),
            reason: reason.to_string(),
        }
    }

    /// [`Source::invalid`] for a number: written short (`1e300`, not 301 digits).
    pub fn invalid_number(&self, path: &[&str], v: f64, reason: impl fmt::Display) -> InputError {
        self.invalid(path, short_number(v), reason)
    }

    /// The line and column of the key at `path`, if present. Array elements are addressed by
    /// their decimal index (`["clusters", "2", "name"]`).
    pub fn locate(&self, path: &[&str]) -> Option<Location> {
        use toml_edit::{Item, Table, TableLike};
        enum Node<'a> {
            Item(&'a Item),
            Table(&'a Table),
        }
        let doc: toml_edit::ImDocument<&str> =
            toml_edit::ImDocument::parse(self.text.as_str()).ok()?;
        let mut node = Node::Table(doc.as_table());
        let mut span = None;
        for key in path {
            let table: Option<&dyn TableLike> = match node {
                Node::Item(i) => i.as_table_like(),
                Node::Table(t) => Some(t),
            };
            if let (Ok(i), Node::Item(item)) = (key.parse::<usize>(), &node) {
                node = match item {
                    Item::ArrayOfTables(a) => {
                        let t = a.get(i)?;
                        span = t.span().or(span);
                        Node::Table(t)
                    }
                    Item::Value(toml_edit::Value::Array(a)) => {
                        let v = a.get(i)?;
                        span = v.span().or(span);
                        // Inline values deeper than this are located at the element.
                        return span.map(|s| self.location_of_offset(s.start));
                    }
                    _ => return None,
                };
                continue;
            }
            let (k, v) = table?.get_key_value(key)?;
            span = k.span().or_else(|| v.span()).or(span);
            node = Node::Item(v);
        }
        span.map(|s| self.location_of_offset(s.start))
    }

    fn location_of_offset(&self, offset: usize) -> Location {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Location { line, column }
    }
}

/// A number as an error message quotes it: as written for ordinary magnitudes (`0.96`, `80`),
/// in exponent form when it is huge or tiny (`1e300`, `5e-324`).
pub fn short_number(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-6..1e16).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Raw {
        gpu: Gpu,
    }
    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Gpu {
        hbm_gib: f64,
    }

    #[test]
    fn unknown_field_names_it_and_the_allowed_ones() {
        let src = Source::new("c.toml", "[gpu]\nhbm_gib = 80\nhbm_gb = 80\n");
        let err = src.parse::<Raw>().unwrap_err().to_string();
        assert!(err.starts_with("c.toml:3:1:"), "{err}");
        assert!(err.contains("hbm_gb") && err.contains("hbm_gib"), "{err}");
    }

    #[test]
    fn malformed_toml_gives_line_and_column() {
        let src = Source::new("c.toml", "[gpu]\nhbm_gib = = 80\n");
        let err = src.parse::<Raw>().unwrap_err().to_string();
        assert!(err.starts_with("c.toml:2:"), "{err}");
    }

    #[test]
    fn invalid_value_is_located() {
        let src = Source::new("c.toml", "# cluster\n[gpu]\n  hbm_gib = -1\n");
        let err = src.invalid(&["gpu", "hbm_gib"], -1, "must be positive");
        assert_eq!(
            err.to_string(),
            "c.toml:3:3: gpu.hbm_gib = -1: must be positive"
        );
        let err = src.invalid(&["gpu", "missing"], 0, "x");
        assert_eq!(err.to_string(), "c.toml: gpu.missing = 0: x");
    }
}
