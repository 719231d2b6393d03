//! Token counts as people write them: `15T`, `14.8T`, `300B`, `2e12`, `15000000000000`
//! (the CLI's `--tokens`, `--tokens-per-step` and a model file's `[training] tokens`).
//!
//! Suffixes are decimal SI multipliers, as training reports write token counts ("14.8T
//! tokens", DeepSeek-V3 report §4.1; "15T tokens", Llama 3 report §1): K = 10³, M = 10⁶,
//! G or B (billion) = 10⁹, T = 10¹², P = 10¹⁵, either case.

use serde::{Deserialize, Serialize};

/// The most tokens a training run may be given: 10¹⁸ (an exa-token), some 30,000× the largest
/// published pre-training runs (tens of trillions of tokens). The bound keeps every product
/// with it (step counts, GPU-hours, dollars) finite and exact enough in `f64`.
pub const MAX_TOKENS: f64 = 1e18;

/// Parse a token count: a positive number of at most [`MAX_TOKENS`], with an optional suffix
/// (module docs). The error says what is wrong; the caller names the flag or field.
///
/// ```
/// use autoplan_graph::tokens::parse_tokens;
/// assert_eq!(parse_tokens("15T"), Ok(15e12));
/// assert_eq!(parse_tokens("14.8t"), Ok(14.8e12));
/// assert_eq!(parse_tokens("300B"), Ok(300e9));
/// assert_eq!(parse_tokens("2e12"), Ok(2e12));
/// assert!(parse_tokens("-1T").is_err());
/// assert!(parse_tokens("1e308").is_err());
/// ```
pub fn parse_tokens(s: &str) -> Result<f64, String> {
    let t = s.trim();
    if let Ok(v) = t.parse::<f64>() {
        return check_tokens(v);
    }
    let bad = || "expected a token count such as 15T, 300B or 2e12".to_string();
    let c = t.chars().last().ok_or_else(bad)?;
    let mult = match c.to_ascii_uppercase() {
        'K' => 1e3,
        'M' => 1e6,
        'G' | 'B' => 1e9,
        'T' => 1e12,
        'P' => 1e15,
        c if c.is_ascii_digit() || c == '.' => return Err(bad()),
        _ => {
            return Err(format!(
                "unknown suffix `{c}`: expected K, M, G (or B), T or P (e.g. 15T)"
            ))
        }
    };
    let v: f64 = t[..t.len() - c.len_utf8()]
        .trim()
        .parse()
        .map_err(|_| bad())?;
    check_tokens(v * mult)
}

/// A token count in `[1, MAX_TOKENS]`, finite.
pub fn check_tokens(v: f64) -> Result<f64, String> {
    if !v.is_finite() {
        Err(format!(
            "must be a finite number of tokens in [1, {MAX_TOKENS:e}]"
        ))
    } else if v <= 0.0 {
        Err(format!(
            "must be positive: expected [1, {MAX_TOKENS:e}] tokens"
        ))
    } else if v < 1.0 {
        Err(format!("less than one token: expected [1, {MAX_TOKENS:e}]"))
    } else if v > MAX_TOKENS {
        Err(format!("too large: expected [1, {MAX_TOKENS:e}] tokens"))
    } else {
        Ok(v)
    }
}

/// `[training] tokens` as written: a number or a string with a suffix.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum RawTokens {
    Number(f64),
    Text(String),
}

impl RawTokens {
    /// The count, checked (module docs).
    pub fn value(&self) -> Result<f64, String> {
        match self {
            RawTokens::Number(v) => check_tokens(*v),
            RawTokens::Text(s) => parse_tokens(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_counts_say_why() {
        for (s, part) in [
            ("0", "positive"),
            ("-5T", "positive"),
            ("NaN", "finite"),
            ("inf", "finite"),
            ("1e308", "too large"),
            ("1e300T", "finite"),
            ("2000P", "too large"),
            ("15X", "unknown suffix"),
            ("T", "expected a token count"),
            ("", "expected a token count"),
            ("0.5", "less than one token"),
        ] {
            let e = parse_tokens(s).unwrap_err();
            assert!(e.contains(part), "{s}: {e}");
        }
        assert_eq!(parse_tokens(" 1.5 k "), Ok(1500.0));
        assert_eq!(parse_tokens("4M"), Ok(4e6));
        assert_eq!(parse_tokens("1000000"), Ok(1e6));
    }
}
