//! α-β matrices measured as seed 004 §4.1.2 describes: the arithmetic, and the CSV format.

/// A bad α-β measurement or matrix file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MatrixError {
    #[error("{file}:{line}: {field} = {value:?}: {reason}")]
    Field {
        file: String,
        line: usize,
        field: String,
        value: String,
        reason: String,
    },
    #[error("{file}: {reason}")]
    Shape { file: String, reason: String },
    #[error(
        "timings T1 = {t1} s (k = {k} messages of {bytes} B), T2 = {t2} s (one of k·M B): {reason}"
    )]
    Timings {
        k: u32,
        bytes: f64,
        t1: f64,
        t2: f64,
        reason: &'static str,
    },
}

/// Seed 004 §4.1.2: from `t1`, the time of `k` back-to-back messages of `bytes` bytes
/// (`T1 = k(α + M/β)`), and `t2`, the time of one message of `k·bytes` (`T2 = α + kM/β`),
/// return `(α seconds, β bytes/s)`: `α = (T1 − T2)/(k − 1)`, `1/β = (T2 − α)/(kM)`.
///
/// ```
/// use autoplan_placement::alpha_beta_from_timings;
/// // α = 10 µs, β = 1 GB/s, M = 1 MB, k = 4: T1 = 4(10e-6 + 1e-3), T2 = 10e-6 + 4e-3.
/// let (a, b) = alpha_beta_from_timings(4, 1e6, 4.0 * (10e-6 + 1e-3), 10e-6 + 4e-3).unwrap();
/// assert!((a - 10e-6).abs() < 1e-12 && (b - 1e9).abs() < 1.0);
/// ```
pub fn alpha_beta_from_timings(
    k: u32,
    bytes: f64,
    t1: f64,
    t2: f64,
) -> Result<(f64, f64), MatrixError> {
    let err = |reason| MatrixError::Timings {
        k,
        bytes,
        t1,
        t2,
        reason,
    };
    if k < 2 {
        return Err(err("need k >= 2 messages to separate α from β"));
    }
    let ok = |x: f64| x.is_finite() && x > 0.0;
    if !(ok(bytes) && ok(t1) && ok(t2)) {
        return Err(err("sizes and times must be finite and > 0"));
    }
    let alpha = (t1 - t2) / (k as f64 - 1.0);
    if alpha < 0.0 {
        return Err(err(
            "T1 < T2: k small messages were faster than one large one (noise?)",
        ));
    }
    let inv_beta = (t2 - alpha) / (k as f64 * bytes);
    if inv_beta <= 0.0 {
        return Err(err("T2 is not larger than α: no bandwidth term"));
    }
    Ok((alpha, 1.0 / inv_beta))
}

/// Parse an α-β matrix for `p` GPUs from CSV text with header `src,dst,alpha_us,bw_gbps`
/// (α in µs, β in GB/s = 1e9 bytes/s, converted here to seconds and s/byte; read by the csv
/// crate: quoted fields, blank lines and `#` comment lines allowed). Every ordered
/// pair `src != dst` of `0..p` must appear exactly once. Returns row-major `(alpha, inv_beta)`.
pub fn parse_alpha_beta_csv(
    file: &str,
    text: &str,
    p: usize,
) -> Result<(Vec<f64>, Vec<f64>), MatrixError> {
    let field = |line: usize, field: &str, value: &str, reason: &str| MatrixError::Field {
        file: file.to_string(),
        line,
        field: field.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let rows =
        crate::csvrows::rows(text).map_err(|(line, reason)| field(line, "row", "", &reason))?;
    let mut rows = rows.into_iter();
    match rows.next() {
        Some((_, h)) if h.iter().eq(["src", "dst", "alpha_us", "bw_gbps"]) => {}
        Some((ln, h)) => {
            return Err(field(
                ln,
                "header",
                &crate::csvrows::joined(&h),
                "expected `src,dst,alpha_us,bw_gbps`",
            ))
        }
        None => {
            return Err(MatrixError::Shape {
                file: file.to_string(),
                reason: "empty file".to_string(),
            })
        }
    }
    let mut alpha = vec![0.0; p * p];
    let mut inv_beta = vec![0.0; p * p];
    let mut seen = vec![0usize; p * p];
    for (ln, row) in rows {
        let f: Vec<&str> = row.iter().collect();
        if f.len() != 4 {
            return Err(field(
                ln,
                "row",
                &crate::csvrows::joined(&row),
                "expected 4 fields",
            ));
        }
        let gpu = |name: &str, v: &str| -> Result<usize, MatrixError> {
            let g: usize = v
                .parse()
                .map_err(|_| field(ln, name, v, "not a GPU index"))?;
            if g >= p {
                return Err(field(
                    ln,
                    name,
                    v,
                    &format!("GPU index out of range 0..{p}"),
                ));
            }
            Ok(g)
        };
        let (s, d) = (gpu("src", f[0])?, gpu("dst", f[1])?);
        if s == d {
            return Err(field(ln, "dst", f[1], "a GPU does not send to itself"));
        }
        let a: f64 = f[2]
            .parse()
            .map_err(|_| field(ln, "alpha_us", f[2], "not a number"))?;
        if !(a.is_finite() && a >= 0.0) {
            return Err(field(ln, "alpha_us", f[2], "must be finite and >= 0"));
        }
        let b: f64 = f[3]
            .parse()
            .map_err(|_| field(ln, "bw_gbps", f[3], "not a number"))?;
        if !(b.is_finite() && b > 0.0) {
            return Err(field(ln, "bw_gbps", f[3], "must be finite and > 0"));
        }
        let k = s * p + d;
        if seen[k] != 0 {
            return Err(field(
                ln,
                "dst",
                f[1],
                &format!("pair {s}->{d} already given on line {}", seen[k]),
            ));
        }
        seen[k] = ln;
        alpha[k] = a * 1e-6;
        inv_beta[k] = 1.0 / (b * 1e9);
    }
    for s in 0..p {
        for d in 0..p {
            if s != d && seen[s * p + d] == 0 {
                return Err(MatrixError::Shape {
                    file: file.to_string(),
                    reason: format!(
                        "pair {s}->{d} missing ({p} GPUs need all {} ordered pairs)",
                        p * (p - 1)
                    ),
                });
            }
        }
    }
    Ok((alpha, inv_beta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_converts_units() {
        let t = "src,dst,alpha_us,bw_gbps\n0,1,5,100\n1,0,7,50\n";
        let (a, ib) = parse_alpha_beta_csv("m.csv", t, 2).unwrap();
        assert!((a[1] - 5e-6).abs() < 1e-18 && (a[2] - 7e-6).abs() < 1e-18);
        assert!((ib[1] - 1e-11).abs() < 1e-24 && (ib[2] - 2e-11).abs() < 1e-24);
    }

    #[test]
    fn errors_name_line_and_field() {
        let e =
            parse_alpha_beta_csv("m.csv", "src,dst,alpha_us,bw_gbps\n0,1,5,0\n", 2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "m.csv:2: bw_gbps = \"0\": must be finite and > 0"
        );
        let e =
            parse_alpha_beta_csv("m.csv", "src,dst,alpha_us,bw_gbps\n0,1,5,1\n", 2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "m.csv: pair 1->0 missing (2 GPUs need all 2 ordered pairs)"
        );
        let e =
            parse_alpha_beta_csv("m.csv", "src,dst,alpha_us,bw_gbps\n0,2,5,1\n", 2).unwrap_err();
        assert!(e.to_string().starts_with("m.csv:2: dst"), "{e}");
        let t = "# measured\nsrc,dst,alpha_us,bw_gbps\n0,1,5,100\n\n1,0,7\n";
        let e = parse_alpha_beta_csv("m.csv", t, 2).unwrap_err();
        assert_eq!(e.to_string(), "m.csv:5: row = \"1,0,7\": expected 4 fields");
        let t = "src,dst,alpha_us,bw_gbps\n0,1,\"5\",\"1,5\"\n";
        let e = parse_alpha_beta_csv("m.csv", t, 2).unwrap_err();
        assert_eq!(e.to_string(), "m.csv:2: bw_gbps = \"1,5\": not a number");
    }

    #[test]
    fn timings_reject_noise() {
        assert!(alpha_beta_from_timings(4, 1e6, 1e-3, 2e-3).is_err());
        assert!(alpha_beta_from_timings(1, 1e6, 1e-3, 1e-3).is_err());
    }
}
