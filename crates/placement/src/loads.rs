//! Token loads of one MoE layer: synthetic (uniform, Zipf, seeded) or parsed from a trace
//! (CSV or JSON text; the CLI reads the file).
//!
//! Trace formats (one layer):
//!
//! * CSV with a header, either `expert,tokens` (per-expert totals, spread evenly over the
//!   source GPUs) or `source,expert,tokens` (tokens each source GPU routes to each expert;
//!   missing pairs are 0). Blank lines and lines starting with `#` are skipped; fields may be
//!   quoted (read by the csv crate).
//! * JSON, either `{"experts": [t0, t1, ...]}` (totals) or `{"tokens": [[...], ...]}`
//!   (one row of E numbers per source GPU).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Token loads before they meet an EP group size.
#[derive(Debug, Clone, PartialEq)]
pub enum Loads {
    /// Tokens routed to each expert, summed over all source GPUs; spread evenly over sources.
    Totals(Vec<f64>),
    /// `tokens[i][e]`: tokens source GPU `i` routes to expert `e`.
    Matrix(Vec<Vec<f64>>),
}

/// A load trace that does not fit the problem, or text that is not a trace.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadsError {
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
}

impl Loads {
    /// Number of experts the loads describe.
    pub fn experts(&self) -> usize {
        match self {
            Loads::Totals(t) => t.len(),
            Loads::Matrix(m) => m.first().map_or(0, Vec::len),
        }
    }

    /// Row-major `ep x experts` demand matrix for an EP group of `ep` GPUs. `origin` names the
    /// loads in errors.
    pub fn demand(&self, ep: usize, experts: usize, origin: &str) -> Result<Vec<f64>, LoadsError> {
        let shape = |reason: String| LoadsError::Shape {
            file: origin.to_string(),
            reason,
        };
        match self {
            Loads::Totals(t) => {
                if t.len() != experts {
                    return Err(shape(format!(
                        "{} experts in the loads, {} requested",
                        t.len(),
                        experts
                    )));
                }
                let mut d = Vec::with_capacity(ep * experts);
                for _ in 0..ep {
                    d.extend(t.iter().map(|x| x / ep as f64));
                }
                Ok(d)
            }
            Loads::Matrix(m) => {
                if m.len() != ep {
                    return Err(shape(format!(
                        "{} source GPUs in the loads, EP group has {}",
                        m.len(),
                        ep
                    )));
                }
                if let Some((i, r)) = m.iter().enumerate().find(|(_, r)| r.len() != experts) {
                    return Err(shape(format!(
                        "source {i} has {} experts, {} requested",
                        r.len(),
                        experts
                    )));
                }
                Ok(m.iter().flatten().copied().collect())
            }
        }
    }
}

/// Every expert receives `total / experts` tokens.
pub fn uniform(experts: usize, total: f64) -> Loads {
    Loads::Totals(vec![total / experts.max(1) as f64; experts])
}

/// Zipf-skewed loads: the expert of popularity rank k (1-based) gets tokens ∝ k^(−s); `total`
/// tokens in all. Which expert has which rank is a seeded random permutation (ChaCha8), so
/// hot experts are not adjacent in the contiguous placement by accident.
pub fn zipf(experts: usize, s: f64, total: f64, seed: u64) -> Loads {
    let w: Vec<f64> = (1..=experts).map(|k| (k as f64).powf(-s)).collect();
    let z: f64 = w.iter().sum();
    let mut perm: Vec<usize> = (0..experts).collect();
    perm.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let mut t = vec![0.0; experts];
    for (k, &e) in perm.iter().enumerate() {
        t[e] = total * w[k] / z;
    }
    Loads::Totals(t)
}

/// Seed 004 §4.1.3's worked example: 8 experts whose loads are 210 312 200 198 415 150 189
/// 250 tokens *from each GPU* (the thesis multiplies each load by the 6 GPUs on other
/// servers), on 8 GPUs.
pub fn thesis_example() -> Loads {
    let per_source = [210.0, 312.0, 200.0, 198.0, 415.0, 150.0, 189.0, 250.0];
    Loads::Matrix(vec![per_source.to_vec(); 8])
}

fn number(file: &str, line: usize, field: &str, text: &str) -> Result<f64, LoadsError> {
    let err = |reason: &str| LoadsError::Field {
        file: file.to_string(),
        line,
        field: field.to_string(),
        value: text.to_string(),
        reason: reason.to_string(),
    };
    let v: f64 = text.trim().parse().map_err(|_| err("not a number"))?;
    if !(v.is_finite() && (0.0..=MAX_TOKENS).contains(&v)) {
        return Err(err("must be a finite number in [0, 2^53]"));
    }
    Ok(v)
}

/// A source GPU or expert id: an integer in `0..max` (the instance's bounds, [`MAX_EP`] and
/// [`MAX_EXPERTS`]): the parser allocates a `sources × experts` matrix from the largest ids.
///
/// [`MAX_EP`]: crate::MAX_EP
/// [`MAX_EXPERTS`]: crate::MAX_EXPERTS
fn index(
    file: &str,
    line: usize,
    field: &str,
    text: &str,
    max: usize,
) -> Result<usize, LoadsError> {
    let err = |reason: String| LoadsError::Field {
        file: file.to_string(),
        line,
        field: field.to_string(),
        value: text.to_string(),
        reason,
    };
    let v: usize = text
        .trim()
        .parse()
        .map_err(|_| err(format!("not an integer in [0, {}]", max - 1)))?;
    if v >= max {
        return Err(err(format!("expected an id in [0, {}]", max - 1)));
    }
    Ok(v)
}

/// Tokens on one row: at most 2^53 (exact in a double; ~10^15 tokens, a million times a
/// layer's routed tokens per step), so that sums and times stay finite.
const MAX_TOKENS: f64 = 9_007_199_254_740_992.0;

/// Parse a CSV trace (see the module docs). `file` names it in errors.
pub fn parse_csv(file: &str, text: &str) -> Result<Loads, LoadsError> {
    let rows = crate::csvrows::rows(text).map_err(|(line, reason)| LoadsError::Field {
        file: file.to_string(),
        line,
        field: "row".to_string(),
        value: String::new(),
        reason,
    })?;
    let mut rows = rows.into_iter();
    let Some((hline, header)) = rows.next() else {
        return Err(LoadsError::Shape {
            file: file.to_string(),
            reason: "empty file: expected a header `expert,tokens` or `source,expert,tokens`"
                .to_string(),
        });
    };
    let cols: Vec<&str> = header.iter().collect();
    let matrix = match cols.as_slice() {
        ["expert", "tokens"] => false,
        ["source", "expert", "tokens"] => true,
        _ => {
            return Err(LoadsError::Field {
                file: file.to_string(),
                line: hline,
                field: "header".to_string(),
                value: crate::csvrows::joined(&header),
                reason: "expected `expert,tokens` or `source,expert,tokens`".to_string(),
            })
        }
    };
    let mut entries: Vec<(usize, usize, f64, usize)> = Vec::new();
    for (ln, f) in rows {
        if f.len() != cols.len() {
            return Err(LoadsError::Field {
                file: file.to_string(),
                line: ln,
                field: "row".to_string(),
                value: crate::csvrows::joined(&f),
                reason: format!("expected {} fields, found {}", cols.len(), f.len()),
            });
        }
        let (src, e, tok) = if matrix {
            (
                index(file, ln, "source", &f[0], crate::MAX_EP)?,
                index(file, ln, "expert", &f[1], crate::MAX_EXPERTS)?,
                number(file, ln, "tokens", &f[2])?,
            )
        } else {
            (
                0,
                index(file, ln, "expert", &f[0], crate::MAX_EXPERTS)?,
                number(file, ln, "tokens", &f[1])?,
            )
        };
        entries.push((src, e, tok, ln));
    }
    if entries.is_empty() {
        return Err(LoadsError::Shape {
            file: file.to_string(),
            reason: "no data rows".to_string(),
        });
    }
    let experts = entries.iter().map(|x| x.1).max().unwrap_or(0) + 1;
    let sources = entries.iter().map(|x| x.0).max().unwrap_or(0) + 1;
    let mut m = vec![vec![0.0; experts]; sources];
    let mut seen = vec![vec![0usize; experts]; sources];
    for (s, e, t, ln) in entries {
        if seen[s][e] != 0 {
            return Err(LoadsError::Field {
                file: file.to_string(),
                line: ln,
                field: "expert".to_string(),
                value: e.to_string(),
                reason: format!("duplicate row (first on line {})", seen[s][e]),
            });
        }
        seen[s][e] = ln;
        m[s][e] = t;
    }
    if matrix {
        Ok(Loads::Matrix(m))
    } else {
        if let Some(e) = seen[0].iter().position(|&l| l == 0) {
            return Err(LoadsError::Shape {
                file: file.to_string(),
                reason: format!("expert {e} has no row (experts are numbered 0..{experts})"),
            });
        }
        Ok(Loads::Totals(m.swap_remove(0)))
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLoads {
    experts: Option<Vec<f64>>,
    tokens: Option<Vec<Vec<f64>>>,
}

/// Parse a JSON trace (see the module docs). `file` names it in errors.
pub fn parse_json(file: &str, text: &str) -> Result<Loads, LoadsError> {
    let raw: JsonLoads = serde_json::from_str(text).map_err(|e| LoadsError::Field {
        file: file.to_string(),
        line: e.line(),
        field: "document".to_string(),
        value: String::new(),
        reason: e.to_string(),
    })?;
    let check = |v: &[f64], what: &str| -> Result<(), LoadsError> {
        match v
            .iter()
            .position(|x| !(x.is_finite() && (0.0..=MAX_TOKENS).contains(x)))
        {
            Some(k) => Err(LoadsError::Shape {
                file: file.to_string(),
                reason: format!(
                    "{what}[{k}] = {}: must be a finite number in [0, 2^53]",
                    v[k]
                ),
            }),
            None => Ok(()),
        }
    };
    let too_many = |what: &str, n: usize, max: usize| LoadsError::Shape {
        file: file.to_string(),
        reason: format!("{n} {what}: expected at most {max}"),
    };
    if let Some(t) = &raw.experts {
        if t.len() > crate::MAX_EXPERTS {
            return Err(too_many("experts", t.len(), crate::MAX_EXPERTS));
        }
    }
    if let Some(m) = &raw.tokens {
        if m.len() > crate::MAX_EP {
            return Err(too_many("source GPUs", m.len(), crate::MAX_EP));
        }
        if let Some(r) = m.first().filter(|r| r.len() > crate::MAX_EXPERTS) {
            return Err(too_many("experts", r.len(), crate::MAX_EXPERTS));
        }
    }
    match (raw.experts, raw.tokens) {
        (Some(t), None) if !t.is_empty() => {
            check(&t, "experts")?;
            Ok(Loads::Totals(t))
        }
        (None, Some(m)) if !m.is_empty() => {
            let e = m[0].len();
            for (i, r) in m.iter().enumerate() {
                if r.len() != e {
                    return Err(LoadsError::Shape {
                        file: file.to_string(),
                        reason: format!("tokens[{i}] has {} entries, tokens[0] has {e}", r.len()),
                    });
                }
                check(r, &format!("tokens[{i}]"))?;
            }
            Ok(Loads::Matrix(m))
        }
        _ => Err(LoadsError::Shape {
            file: file.to_string(),
            reason: "expected exactly one non-empty key: `experts` (totals) or `tokens` (per source GPU)"
                .to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 21: ids at or above the bounds (2^63 wrapped `max + 1`) are a located error.
    #[test]
    fn huge_ids_are_located_errors() {
        let e = parse_csv("t.csv", "expert,tokens\n0,1\n9223372036854775808,2\n").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with(
                "t.csv:3: expert = \"9223372036854775808\": expected an id in [0, 4095]"
            ),
            "{msg}"
        );
        let e = parse_csv("t.csv", "source,expert,tokens\n18446744073709551615,0,1\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.csv:2: source = "), "{e}");
        let e = parse_csv("t.csv", "expert,tokens\n0,1e300\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("[0, 2^53]"), "{e}");
    }

    #[test]
    fn csv_totals_and_matrix() {
        let t = parse_csv("a.csv", "expert,tokens\n0,10\n1,30\n").unwrap();
        assert_eq!(t, Loads::Totals(vec![10.0, 30.0]));
        assert_eq!(t.demand(2, 2, "a").unwrap(), vec![5.0, 15.0, 5.0, 15.0]);
        let m = parse_csv("b.csv", "source,expert,tokens\n# c\n0,1,4\n1,0,2\n").unwrap();
        assert_eq!(m, Loads::Matrix(vec![vec![0.0, 4.0], vec![2.0, 0.0]]));
        let q = parse_csv("q.csv", "\"expert\",\"tokens\"\n\"0\", 10\n1,\"30\"\n").unwrap();
        assert_eq!(q, Loads::Totals(vec![10.0, 30.0]));
    }

    #[test]
    fn csv_errors_name_line_and_field() {
        let e = parse_csv("a.csv", "expert,tokens\n0,10\n1,-3\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "a.csv:3: tokens = \"-3\": must be a finite number in [0, 2^53]"
        );
        let e = parse_csv("a.csv", "expert,tokens\n0,1\n0,2\n").unwrap_err();
        assert!(e.to_string().contains("a.csv:3: expert"), "{e}");
        let e = parse_csv("a.csv", "expert,tokens\n0,1\n2,2\n").unwrap_err();
        assert!(e.to_string().contains("expert 1 has no row"), "{e}");
        let e = parse_csv("a.csv", "e,t\n").unwrap_err();
        assert!(e.to_string().starts_with("a.csv:1: header"), "{e}");
        // A quoted field is one field: its comma does not split it.
        let e = parse_csv("a.csv", "expert,tokens\n0,\"1,5\"\n").unwrap_err();
        assert_eq!(e.to_string(), "a.csv:2: tokens = \"1,5\": not a number");
        let e = parse_csv("a.csv", "# trace\nexpert,tokens\n0,1\n\n1,2,3\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "a.csv:5: row = \"1,2,3\": expected 2 fields, found 3"
        );
    }

    #[test]
    fn json_forms() {
        assert_eq!(
            parse_json("x.json", r#"{"experts":[1,2]}"#).unwrap(),
            Loads::Totals(vec![1.0, 2.0])
        );
        let e = parse_json("x.json", "{\n\"tokens\": [[1,2],[3]]}").unwrap_err();
        assert!(e.to_string().contains("tokens[1] has 1 entries"), "{e}");
        let e = parse_json("x.json", "{\n\"bogus\": 1}").unwrap_err();
        assert!(e.to_string().starts_with("x.json:2:"), "{e}");
    }

    #[test]
    fn zipf_is_seeded_and_sums_to_total() {
        let Loads::Totals(a) = zipf(16, 1.2, 1000.0, 7) else {
            unreachable!()
        };
        let Loads::Totals(b) = zipf(16, 1.2, 1000.0, 7) else {
            unreachable!()
        };
        assert_eq!(a, b);
        assert!((a.iter().sum::<f64>() - 1000.0).abs() < 1e-9);
        let max = a.iter().fold(0.0f64, |m, &x| m.max(x));
        let h16: f64 = (1..=16).map(|k| (k as f64).powf(-1.2)).sum();
        assert!((max - 1000.0 / h16).abs() < 1e-9);
    }
}
