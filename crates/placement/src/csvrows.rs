//! CSV text as the trace and α-β matrix parsers read it: one row per line, each line read by
//! the csv crate (fields separated by commas, RFC 4180 quoting so `"1,5"` is one field, every
//! field trimmed); blank lines and lines starting with `#` skipped. Rows may have any number
//! of fields: each parser checks its own and names the line.

/// The non-blank, non-comment rows of `text`, each with its 1-based line number. A line the
/// csv crate cannot read gives `(line, reason)`.
pub(crate) fn rows(text: &str) -> Result<Vec<(usize, csv::StringRecord)>, (usize, String)> {
    let mut builder = csv::ReaderBuilder::new();
    builder
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All);
    let mut rows = Vec::new();
    for (k, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut record = csv::StringRecord::new();
        match builder
            .from_reader(trimmed.as_bytes())
            .read_record(&mut record)
        {
            Ok(true) => rows.push((k + 1, record)),
            Ok(false) => {}
            Err(e) => return Err((k + 1, e.to_string())),
        }
    }
    Ok(rows)
}

/// A row as text for error messages (its fields joined by commas).
pub(crate) fn joined(record: &csv::StringRecord) -> String {
    record.iter().collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_quotes_blanks_and_comments() {
        let text = "# head\n a , b \n\n   \n  # indented\n\"1,5\",x\n\r\nlast,\" q \"\n";
        let got: Vec<(usize, Vec<String>)> = rows(text)
            .unwrap()
            .into_iter()
            .map(|(l, r)| (l, r.iter().map(str::to_string).collect()))
            .collect();
        let want: Vec<(usize, Vec<String>)> = [
            (2, vec!["a", "b"]),
            (6, vec!["1,5", "x"]),
            (8, vec!["last", "q"]),
        ]
        .into_iter()
        .map(|(l, f)| (l, f.into_iter().map(str::to_string).collect()))
        .collect();
        assert_eq!(got, want);
    }
}
