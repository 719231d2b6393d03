//! The scale axes of `search`: `--gpus` and `--global-batch` take one value, a list
//! (`512,1024,2048`) or a range of powers of two (`256..4096` = 256, 512, ..., 4096);
//! `--tokens-per-step LO..HI` gives the batches whose tokens per step fall in the range.

/// The most values one axis may list: a grid of 64 × 64 searches is already hours of CPU.
pub const MAX_AXIS_VALUES: usize = 64;

/// One axis as given: its values, ascending and distinct, and the text (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sizes {
    pub values: Vec<u32>,
    pub text: String,
}

impl Sizes {
    /// The one value, or an error naming `flag` when a list or range was given to a command
    /// that takes one.
    pub fn single(&self, flag: &str, command: &str) -> anyhow::Result<u32> {
        match self.values.as_slice() {
            [v] => Ok(*v),
            _ => anyhow::bail!(
                "{flag} {}: {command} takes one value; lists and ranges are for `autoplan search`",
                self.text
            ),
        }
    }
}

/// One positive integer of an axis, at most `max`.
fn count(s: &str, max: u64) -> Result<u64, String> {
    let t = s.trim();
    let v: u64 = t.parse().map_err(|_| {
        if t.starts_with('-') {
            format!("`{t}`: must be positive")
        } else {
            format!("`{t}`: expected a positive integer")
        }
    })?;
    if v == 0 {
        return Err("0: must be positive".into());
    }
    if v > max {
        return Err(format!("{v}: too large: expected [1, {max}]"));
    }
    Ok(v)
}

/// Powers of two in `[lo, hi]`, ascending.
pub fn powers_of_two(lo: u64, hi: u64) -> Vec<u64> {
    (0..64)
        .map(|k| 1u64 << k)
        .filter(|p| (lo..=hi).contains(p))
        .collect()
}

/// Parse an axis whose values lie in `[1, max]` (module docs).
pub fn parse_sizes(s: &str, max: u64) -> Result<Sizes, String> {
    let values: Vec<u64> = if let Some((lo, hi)) = s.split_once("..") {
        let (lo, hi) = (count(lo, max)?, count(hi, max)?);
        if hi < lo {
            return Err(format!("{s}: the range ends below its start"));
        }
        let v = powers_of_two(lo, hi);
        if v.is_empty() {
            return Err(format!("{s}: no power of two in the range"));
        }
        v
    } else {
        let mut v = Vec::new();
        for item in s.split(',') {
            let x = count(item, max)?;
            if v.contains(&x) {
                return Err(format!("{x}: listed twice"));
            }
            v.push(x);
        }
        v.sort_unstable();
        v
    };
    if values.len() > MAX_AXIS_VALUES {
        return Err(format!(
            "{} values: expected at most {MAX_AXIS_VALUES}",
            values.len()
        ));
    }
    Ok(Sizes {
        values: values.into_iter().map(|v| v as u32).collect(),
        text: s.to_string(),
    })
}

/// `--gpus`: at most `autoplan_cluster::MAX_GPUS`.
pub fn parse_gpus(s: &str) -> Result<Sizes, String> {
    parse_sizes(s, u64::from(autoplan_cluster::MAX_GPUS))
}

/// `--global-batch`: at most the model files' workload bound.
pub fn parse_batches(s: &str) -> Result<Sizes, String> {
    parse_sizes(s, autoplan_graph::MAX_WORKLOAD)
}

/// `--tokens-per-step LO..HI` (token counts as `--tokens` writes them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenRange {
    pub lo: f64,
    pub hi: f64,
}

pub fn parse_token_range(s: &str) -> Result<TokenRange, String> {
    let (lo, hi) = s
        .split_once("..")
        .ok_or_else(|| format!("{s}: expected a range LO..HI, e.g. 4M..16M"))?;
    let p = |x: &str| autoplan_graph::tokens::parse_tokens(x).map_err(|e| format!("`{x}`: {e}"));
    let (lo, hi) = (p(lo)?, p(hi)?);
    if hi < lo {
        return Err(format!("{s}: the range ends below its start"));
    }
    Ok(TokenRange { lo, hi })
}

impl TokenRange {
    /// The global batches (powers of two) whose tokens per step, `seq_len` × batch, fall in
    /// the range; an error naming the flag when none does.
    pub fn batches(&self, seq_len: u32, text: &str) -> anyhow::Result<Vec<u32>> {
        let s = f64::from(seq_len);
        let v: Vec<u32> = powers_of_two(1, autoplan_graph::MAX_WORKLOAD)
            .into_iter()
            .filter(|&b| (self.lo..=self.hi).contains(&(b as f64 * s)))
            .map(|b| b as u32)
            .collect();
        anyhow::ensure!(
            !v.is_empty(),
            "--tokens-per-step {text}: no power-of-two global batch of {seq_len}-token sequences \
             falls in the range"
        );
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_lists_and_errors() {
        assert_eq!(
            parse_gpus("256..4096").unwrap().values,
            [256, 512, 1024, 2048, 4096]
        );
        assert_eq!(parse_gpus("100..1000").unwrap().values, [128, 256, 512]);
        assert_eq!(
            parse_gpus("2048,512,1024").unwrap().values,
            [512, 1024, 2048]
        );
        for (s, part) in [
            ("0..4096", "must be positive"),
            ("-8", "must be positive"),
            ("4096..256", "ends below"),
            ("600..1000", "no power of two"),
            ("512,512", "listed twice"),
            ("99999999999", "too large"),
            ("1e308", "positive integer"),
            ("NaN", "positive integer"),
            ("", "positive integer"),
        ] {
            let e = parse_gpus(s).unwrap_err();
            assert!(e.contains(part), "{s}: {e}");
        }
        // Decimal suffixes: 4096 × 4096 = 16.78M tokens is past 16M.
        let r = parse_token_range("4M..16M").unwrap();
        assert_eq!(r.batches(4096, "").unwrap(), [1024, 2048]);
        assert!(parse_token_range("16M..4M").is_err());
        assert!(parse_token_range("4M").is_err());
    }
}
