//! Published model names → bundled models: `GPT-3 175B (MLPerf reference)`, `LLAMA3.1_405B`,
//! `Llama 3.1 405B`, `DeepSeekV3`, `Qwen3_235B_a22B`, `Megatron-Turing NLG 530B`... as the
//! published runs write them.
//!
//! A name matches a bundled model when both read the same after normalisation: lower case,
//! a trailing parenthetical dropped (`(MLPerf reference)`, `(dropless)`) unless it is the
//! model's size (`GPT-3 (175B)`), `_` and spaces read as
//! `-`, and every `-` dropped except one between two digits (`gpt2-1b` ≠ `gpt-21b`,
//! `qwen3-235b` keeps its `3-2`). Names the normalisation cannot reach are listed in
//! [`ALIASES`]. A match is a claim about the name only: the caller checks the shape and the
//! parameter count against the row.

use crate::bundled::bundled_models;

/// Names of published models that are not a bundled file's name under normalisation, and the
/// bundled model each one is (the architecture is the same; the sources are in the files).
const ALIASES: &[(&str, &str)] = &[
    // Narayanan+21 / Korthikanti+22 call GPT-3's shape "GPT 175B" and MegaScale "GPT-175B".
    ("gpt-175b", "gpt3-175b"),
    ("gpt-3-175b", "gpt3-175b"),
    // Megatron-LM's 2020 README tables.
    ("gpt-2-style-1b", "gpt2-1b"),
    ("gpt-2-style-2b", "gpt2-2b"),
    ("gpt-2-style-4b", "gpt2-4b"),
    ("gpt-2-style-8b", "gpt2-8b"),
    ("megatron-turing-nlg-530b", "mt-nlg-530b"),
    ("megatron-turing-nlg", "mt-nlg-530b"),
    ("nemotron-4-340b", "nemotron-340b"),
    ("bloom", "bloom-176b"),
    ("grok", "grok-1"),
    // Llama 3.1's 8B and 70B are Llama 3's shapes (Dubey+24 Table 3 lists the 3.1 herd; the
    // bundled files cite it), with a longer RoPE base context only.
    ("llama-3.1-8b", "llama3-8b"),
    ("llama-3.1-70b", "llama3-70b"),
    ("meta-llama-3-8b", "llama3-8b"),
    ("meta-llama-3-70b", "llama3-70b"),
    ("meta-llama-3.1-8b", "llama3-8b"),
    ("meta-llama-3.1-70b", "llama3-70b"),
    ("meta-llama-3.1-405b", "llama3.1-405b"),
    // Llama 3.3 is a 70B release of Llama 3.1 70B's architecture (Meta's Llama 3.3 model card
    // and config.json: the same 80 layers, 8192 hidden, 64/8 heads, 28672 FFN, 128256 vocab;
    // not in the reference notes). The parameter check still applies.
    ("llama-3.3-70b", "llama3-70b"),
    ("meta-llama-3.3-70b", "llama3-70b"),
    // DeepSeek names its models with their total size too (DeepSeek-V2 §1, V3 §1).
    ("deepseek-v3-671b", "deepseek-v3"),
    ("deepseek-v2-236b", "deepseek-v2"),
    // Qwen3's releases of these totals are the MoE models (its dense models stop at 32B; the
    // Qwen3 model cards, not in the reference notes): the active size is left out as often as
    // written. The parameter check still applies.
    ("qwen3-235b", "qwen3-235b-a22b"),
    ("qwen3-30b", "qwen3-30b-a3b"),
];

/// The comparison key of a model name (module docs).
fn key(name: &str) -> String {
    let lower = name.trim().to_ascii_lowercase();
    let base = match lower.find('(') {
        // A parenthetical that is the model's size is part of its name (`GPT-3 (175B)`).
        Some(i) => match lower[i + 1..].split_once(')') {
            Some((size, _)) if is_size(size.trim()) => {
                format!("{} {}", lower[..i].trim_end(), size.trim())
            }
            _ => lower[..i].trim_end().to_string(),
        },
        None => lower.clone(),
    };
    let chars: Vec<char> = base
        .chars()
        .map(|c| if c == '_' || c == ' ' { '-' } else { c })
        .collect();
    let mut out = String::with_capacity(chars.len());
    for (i, &c) in chars.iter().enumerate() {
        if c == '-' {
            let digit_before = i > 0 && chars[i - 1].is_ascii_digit();
            let digit_after = chars.get(i + 1).is_some_and(|n| n.is_ascii_digit());
            if !(digit_before && digit_after) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// Whether `s` (lower case) is a parameter count: digits, an optional decimal part, and `m`,
/// `b` or `t` (`175b`, `1.7b`, `1t`).
fn is_size(s: &str) -> bool {
    let Some(num) = s.strip_suffix(['m', 'b', 't']) else {
        return false;
    };
    let mut parts = num.splitn(2, '.');
    let int = parts.next().unwrap_or("");
    let frac = parts.next().unwrap_or("0");
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    digits(int) && digits(frac)
}

/// The bundled model a published model name denotes, if any.
///
/// ```
/// use autoplan_graph::bundled_model_for;
/// assert_eq!(bundled_model_for("GPT-3 175B (MLPerf reference)"), Some("gpt3-175b"));
/// assert_eq!(bundled_model_for("LLAMA3.1_405B"), Some("llama3.1-405b"));
/// assert_eq!(bundled_model_for("Llama 3.1 405B"), Some("llama3.1-405b"));
/// assert_eq!(bundled_model_for("DeepSeekV3"), Some("deepseek-v3"));
/// assert_eq!(bundled_model_for("Qwen3_235B_a22B"), Some("qwen3-235b-a22b"));
/// assert_eq!(bundled_model_for("Megatron-Turing NLG 530B"), Some("mt-nlg-530b"));
/// assert_eq!(bundled_model_for("GPT 21B"), None); // not gpt2-1b
/// ```
pub fn bundled_model_for(name: &str) -> Option<&'static str> {
    lookup(name).or_else(|| {
        let bare = without_release_tags(name);
        (bare.len() < name.trim().len())
            .then(|| lookup(bare))
            .flatten()
    })
}

/// [`bundled_model_for`] on the name as written.
fn lookup(name: &str) -> Option<&'static str> {
    let k = key(name);
    if k.is_empty() {
        return None;
    }
    if let Some((_, b)) = ALIASES.iter().find(|(a, _)| key(a) == k) {
        return Some(b);
    }
    bundled_models()
        .iter()
        .map(|(n, _)| *n)
        .find(|n| key(n) == k)
}

/// `name` without the trailing tags a checkpoint's release adds to its architecture's name, as
/// Hugging Face repositories write them: `-hf` (Meta's converted Llama 2 weights), `-Base`,
/// `-Instruct`, `-Chat`, `-it`, `-Thinking`, the weights' format (`-FP8`, `-BF16`: the row's
/// `precision` cell says what it trained in), a Mistral-style version `-v0.1` and a release
/// date (Qwen's year-month `-2507`, DeepSeek's month-day `-0324`), in any order (`Mixtral-8x7B-Instruct-v0.1`,
/// `Qwen3-235B-A22B-Instruct-2507`). A release of a model is the model's architecture; a bare
/// version such as DeepSeek's `-V2` is part of the name and stays.
fn without_release_tags(name: &str) -> &str {
    const TAGS: [&str; 8] = [
        "hf", "base", "instruct", "chat", "it", "thinking", "fp8", "bf16",
    ];
    let mut rest = name.trim();
    loop {
        let Some(i) = rest.rfind(['-', '_', ' ']) else {
            return rest;
        };
        let tag = rest[i + 1..].to_ascii_lowercase();
        let version = tag
            .strip_prefix("v0.")
            .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
        // A release date: YYMM from 2020 to 2039 (Qwen's `2507`) or MMDD (DeepSeek's `0324`).
        let date = tag.len() == 4 && tag.chars().all(|c| c.is_ascii_digit()) && {
            let (a, b) = (
                tag[..2].parse::<u32>().unwrap_or(0),
                tag[2..].parse::<u32>().unwrap_or(0),
            );
            ((20..40).contains(&a) && (1..=12).contains(&b))
                || ((1..=12).contains(&a) && (1..=31).contains(&b))
        };
        if !(version || date || TAGS.contains(&tag.as_str())) || i == 0 {
            return rest;
        }
        rest = rest[..i].trim_end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alias_points_to_a_bundled_model() {
        for (a, b) in ALIASES {
            assert!(
                bundled_models().iter().any(|(n, _)| n == b),
                "{a} → {b}: not bundled"
            );
        }
    }

    #[test]
    fn bundled_names_are_distinct_under_normalisation() {
        let names: Vec<&str> = bundled_models().iter().map(|(n, _)| *n).collect();
        for (i, a) in names.iter().enumerate() {
            assert_eq!(bundled_model_for(a), Some(*a));
            for b in &names[i + 1..] {
                assert_ne!(key(a), key(b), "{a} and {b}");
            }
        }
    }

    #[test]
    fn published_names_resolve() {
        for (name, want) in [
            ("GPT 1.7B", Some("gpt-1.7b")),
            ("GPT 1T", Some("gpt-1t")),
            ("GPT 530B (MT-NLG config)", Some("gpt-530b")),
            ("GPT-175B (MegaScale config)", Some("gpt3-175b")),
            ("GPT-2 style 4B", Some("gpt2-4b")),
            ("GPT3-5B", Some("gpt3-5b")),
            ("LLAMA2-70B", Some("llama2-70b")),
            ("LLAMA3_70B", Some("llama3-70b")),
            ("LLAMA3 8B", Some("llama3-8b")),
            ("Llama 3.1 8B", Some("llama3-8b")),
            ("LLAMA3.1_70B", Some("llama3-70b")),
            ("Meta-Llama-3.1-8B", Some("llama3-8b")),
            ("Mixtral 8x7B (dropless)", Some("mixtral-8x7b")),
            ("Nemotron-340B", Some("nemotron-340b")),
            ("Nemotron-4-340B", Some("nemotron-340b")),
            ("GPT-OSS-120B", Some("gpt-oss-120b")),
            ("Qwen3_30B_a3B", Some("qwen3-30b-a3b")),
            (
                "DeepSeek-V3 (671B total / 37B active MoE, MLA)",
                Some("deepseek-v3"),
            ),
            ("DeepSeek-V2", Some("deepseek-v2")),
            ("BLOOM-176B", Some("bloom-176b")),
            ("GPT-NeoX-20B", Some("gpt-neox-20b")),
            ("MPT-7B", Some("mpt-7b")),
            ("MPT-70B", Some("mpt-70b")),
            // A release's tags are not part of the architecture's name.
            ("Llama-2-70b-hf", Some("llama2-70b")),
            ("Meta-Llama-3-70B-Instruct", Some("llama3-70b")),
            ("Mixtral-8x7B-v0.1", Some("mixtral-8x7b")),
            ("Mixtral-8x22B-Instruct-v0.1", Some("mixtral-8x22b")),
            ("DeepSeek-V3-Base", Some("deepseek-v3")),
            ("DeepSeek-V2-Lite-Chat", Some("deepseek-v2-lite")),
            ("Qwen3-30B-A3B-Base", Some("qwen3-30b-a3b")),
            ("Nemotron-4-340B-Base", Some("nemotron-340b")),
            ("Qwen3-235B-A22B-Instruct-2507", Some("qwen3-235b-a22b")),
            ("Qwen3-30B-A3B-Thinking-2507", Some("qwen3-30b-a3b")),
            ("DeepSeek-V3-671B", Some("deepseek-v3")),
            ("DeepSeek-V3-0324", Some("deepseek-v3")),
            ("Qwen3-30B-A3B-FP8", Some("qwen3-30b-a3b")),
            ("Llama 3.3 70B", Some("llama3-70b")),
            ("Llama-3.3-70B-Instruct", Some("llama3-70b")),
            // The size in parentheses is part of the name; Qwen3's totals alone.
            ("GPT-3 (175B)", Some("gpt3-175b")),
            ("Llama 2 (70B)", Some("llama2-70b")),
            ("Qwen3 235B", Some("qwen3-235b-a22b")),
            ("Qwen3-30B", Some("qwen3-30b-a3b")),
            ("GPT-3 (MLPerf)", None),
            // A size or a count is not a date.
            ("GPT-3 1750", None),
            ("Llama-3.2-3B", None),
            // A version that names the architecture stays: DeepSeek-V2 is not "DeepSeek".
            ("DeepSeek-V2", Some("deepseek-v2")),
            ("Base", None),
            ("GPT-3 175B-v1.0", None),
            ("GPT-3 177B (vocab 131072)", None),
            ("Qwen3-Next-80B-A3B", None),
            ("", None),
        ] {
            assert_eq!(bundled_model_for(name), want, "{name}");
        }
    }
}
