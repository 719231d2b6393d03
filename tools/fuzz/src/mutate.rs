//! Mutators: byte-level (flips, deletions, duplications, truncation, odd bytes) for any file, and
//! structure-aware ones for TOML (value → extreme number, type swap, key deletion/duplication,
//! unknown key, section header deletion), CSV (field → extreme, row deletion/duplication, header
//! damage) and plan strings (`k=v,...`). Every choice comes from the case's [`Rng`].

use crate::rng::Rng;

/// The extreme numbers inserted into files and flags.
pub const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "1e308",
    "-1e308",
    "5e-324",
    "nan",
    "inf",
    "-inf",
    "9223372036854775808",  // 2^63
    "18446744073709551616", // 2^64
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "2147483647",
    "1e300",
    "-0",
];

/// Is this extreme an impossible value for a count, size, rate or duration (negative, NaN or
/// infinite)? Those are what "accepted nonsense" means: 0 and huge finite values are left out on
/// purpose, since some fields legitimately take them.
pub fn impossible(v: &str) -> bool {
    match v.trim().to_ascii_lowercase().as_str() {
        "nan" | "inf" | "-inf" | "+inf" | "infinity" | "-infinity" => true,
        s => s.parse::<f64>().is_ok_and(|x| x < 0.0),
    }
}

/// What a mutation did, for the case description, and the impossible value it planted (if any)
/// with the line that must still be there for it to count.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    pub what: String,
    pub nonsense: Option<Planted>,
}

#[derive(Clone, Debug)]
pub struct Planted {
    /// The exact line (for files) holding the impossible value.
    pub line: String,
    pub why: String,
}

/// File kinds with a structure-aware mutator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Toml,
    Csv,
    Json,
}

/// Mutate a file in place: a structure-aware mutation 60 % of the time, else a byte-level one.
pub fn mutate_file(rng: &mut Rng, kind: Kind, data: &mut Vec<u8>) -> Applied {
    if rng.chance(60) {
        let text = String::from_utf8_lossy(data).into_owned();
        let done = match kind {
            Kind::Toml => mutate_toml(rng, &text),
            Kind::Csv => mutate_csv(rng, &text),
            Kind::Json => mutate_numbers(rng, &text),
        };
        if let Some((out, applied)) = done {
            *data = out.into_bytes();
            return applied;
        }
    }
    mutate_bytes(rng, data)
}

/// Byte flips, deletions, duplications, truncation and insertion of odd bytes.
pub fn mutate_bytes(rng: &mut Rng, data: &mut Vec<u8>) -> Applied {
    const ODD: &[&[u8]] = &[
        b"\0", b"\xff", b"\n", b"=", b"\"", b"[", b"]", b",", b"-", b"9", b"#", b"\r\n", b"\xc3",
    ];
    let len = data.len();
    let what = match if len == 0 { 4 } else { rng.below(5) } {
        0 => {
            let (at, bit) = (rng.below(len), rng.below(8));
            data[at] ^= 1 << bit;
            format!("flip bit {bit} of byte {at}")
        }
        1 => {
            let at = rng.below(len);
            let n = 1 + rng.below(32.min(len - at));
            data.drain(at..at + n);
            format!("delete {n} bytes at {at}")
        }
        2 => {
            let at = rng.below(len);
            let n = 1 + rng.below(64.min(len - at));
            let copy = data[at..at + n].to_vec();
            let to = at + n;
            data.splice(to..to, copy);
            format!("duplicate {n} bytes at {at}")
        }
        3 => {
            let at = rng.below(len);
            data.truncate(at);
            format!("truncate to {at} bytes")
        }
        _ => {
            let at = rng.below(len + 1);
            let odd = *rng.pick(ODD);
            data.splice(at..at, odd.iter().copied());
            format!("insert {:?} at {at}", String::from_utf8_lossy(odd))
        }
    };
    Applied {
        what,
        nonsense: None,
    }
}

/// A `key = value` line of a TOML file: the key, and the byte range of the value (up to a comment).
fn toml_kv(line: &str) -> Option<(&str, usize, usize)> {
    let t = line.trim_start();
    if t.is_empty() || t.starts_with('#') || t.starts_with('[') {
        return None;
    }
    let eq = line.find('=')?;
    let key = line[..eq].trim();
    if key.is_empty() || key.contains('"') {
        return None;
    }
    let start = eq + 1;
    let end = start + value_end(&line[start..]);
    Some((key, start, end))
}

/// Where a TOML value ends: at a `#` outside a string, without trailing blanks.
fn value_end(v: &str) -> usize {
    let mut in_str = false;
    let mut end = v.len();
    for (i, c) in v.char_indices() {
        match c {
            '"' => in_str = !in_str,
            '#' if !in_str => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    v[..end].trim_end().len()
}

/// The number tokens of a value (outside strings): byte ranges relative to `v`.
pub fn number_tokens(v: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let b = v.as_bytes();
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if c == b'"' {
            in_str = !in_str;
            i += 1;
            continue;
        }
        let tok = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'+' | b'-');
        if !in_str && tok(c) {
            let s = i;
            while i < b.len() && tok(b[i]) {
                i += 1;
            }
            let t = v[s..i].replace('_', "");
            let numeric = t.parse::<f64>().is_ok()
                && t.bytes()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit() || c == b'-' || c == b'+')
                || matches!(t.as_str(), "nan" | "inf" | "-inf" | "+inf");
            if numeric {
                out.push((s, i));
            }
            continue;
        }
        i += 1;
    }
    out
}

fn split_lines(text: &str) -> Vec<String> {
    text.split('\n').map(str::to_owned).collect()
}

/// A structure-aware TOML mutation, or None when the file has no line it applies to.
pub fn mutate_toml(rng: &mut Rng, text: &str) -> Option<(String, Applied)> {
    let mut lines = split_lines(text);
    let kvs: Vec<usize> = (0..lines.len())
        .filter(|&i| toml_kv(&lines[i]).is_some())
        .collect();
    let headers: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].trim_start().starts_with('['))
        .collect();
    if kvs.is_empty() {
        return None;
    }
    let li = *rng.pick(&kvs);
    let (key, vs, ve) = toml_kv(&lines[li]).map(|(k, s, e)| (k.to_owned(), s, e))?;
    let value = lines[li][vs..ve].to_owned();
    let nums = number_tokens(&value);
    let mut nonsense = None;
    let what = match rng.below(9) {
        // A number of the value → an extreme (the most common mutation: two of nine).
        0 | 1 if !nums.is_empty() => {
            let (s, e) = *rng.pick(&nums);
            let x = *rng.pick(EXTREMES);
            let new_value = format!("{}{}{}", &value[..s], x, &value[e..]);
            lines[li] = format!("{} {}", &lines[li][..vs], new_value.trim_start());
            if impossible(x) {
                nonsense = Some(Planted {
                    line: lines[li].clone(),
                    why: format!("`{key}` set to {x}"),
                });
            }
            format!("{key}: {} -> {x}", &value[s..e])
        }
        // A number scaled up a thousand or a million times (plausible-looking but huge).
        2 if !nums.is_empty() => {
            let (s, e) = *rng.pick(&nums);
            let f = if rng.chance(50) { "000" } else { "000000" };
            let old = &value[s..e];
            let new = if old.contains(['.', 'e', 'E', 'n', 'i']) {
                format!("{old}e{}", f.len())
            } else {
                format!("{old}{f}")
            };
            lines[li] = format!("{}{}{}{}", &lines[li][..vs], &value[..s], new, &value[e..]);
            format!("{key}: {old} -> {new}")
        }
        // Type swap: the whole value becomes one of another type.
        0..=3 => {
            const SWAPS: &[&str] = &[
                "\"fuzz\"",
                "[1, 2]",
                "true",
                "{ x = 1 }",
                "42",
                "\"\"",
                "[]",
                "\"42\"",
                "-7.5",
            ];
            let mut new = *rng.pick(SWAPS);
            if new.trim() == value.trim() {
                new = "\"swapped\"";
            }
            lines[li] = format!("{} {new}", &lines[li][..vs]);
            format!("{key}: type swap {} -> {new}", value.trim())
        }
        4 => {
            lines.remove(li);
            format!("delete key {key}")
        }
        5 => {
            let copy = lines[li].clone();
            lines.insert(li + 1, copy);
            format!("duplicate key {key}")
        }
        6 => {
            lines.insert(li + 1, "fuzz_unknown_key = 1".to_owned());
            format!("unknown key after {key}")
        }
        7 if !headers.is_empty() => {
            let h = *rng.pick(&headers);
            let name = lines.remove(h);
            format!("delete header {}", name.trim())
        }
        _ => {
            // Array growth: a numeric array gets a duplicate element (or a scalar becomes one).
            let v = value.trim();
            let new = if let Some(inner) = v.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                let first = inner.split(',').next().unwrap_or("1").trim();
                format!("[{inner}, {first}]")
            } else {
                format!("[{v}, {v}]")
            };
            lines[li] = format!("{} {new}", &lines[li][..vs]);
            format!("{key}: {v} -> {new}")
        }
    };
    Some((lines.join("\n"), Applied { what, nonsense }))
}

/// Split one CSV line into fields, honouring double quotes (the quotes stay in the fields).
pub fn csv_fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut q = false;
    for c in line.chars() {
        match c {
            '"' => {
                q = !q;
                out.last_mut().unwrap().push(c);
            }
            ',' if !q => out.push(String::new()),
            _ => out.last_mut().unwrap().push(c),
        }
    }
    out
}

/// A structure-aware CSV mutation (field → extreme/empty/text, row deletion/duplication, header
/// damage, extra or missing fields), or None for a file without data rows.
pub fn mutate_csv(rng: &mut Rng, text: &str) -> Option<(String, Applied)> {
    let mut lines = split_lines(text);
    let data: Vec<usize> = (0..lines.len())
        .filter(|&i| !lines[i].trim().is_empty() && !lines[i].starts_with('#'))
        .collect();
    if data.len() < 2 {
        return None;
    }
    let header = data[0];
    let rows = &data[1..];
    let r = *rng.pick(rows);
    let what = match rng.below(8) {
        0..=2 => {
            let mut f = csv_fields(&lines[r]);
            let i = rng.below(f.len());
            const ODD: &[&str] = &["", "abc", "NaN", "Infinity", "1e999", "0x10", "1,5", " 7 "];
            let x = if rng.chance(70) {
                *rng.pick(EXTREMES)
            } else {
                *rng.pick(ODD)
            };
            let old = std::mem::replace(&mut f[i], x.to_owned());
            lines[r] = f.join(",");
            format!("line {}: field {} {old:?} -> {x:?}", r + 1, i + 1)
        }
        3 => {
            lines.remove(r);
            format!("delete line {}", r + 1)
        }
        4 => {
            let copy = lines[r].clone();
            lines.insert(r + 1, copy);
            format!("duplicate line {}", r + 1)
        }
        5 => {
            let mut f = csv_fields(&lines[header]);
            let i = rng.below(f.len());
            let gone = f.remove(i);
            lines[header] = f.join(",");
            format!("delete header field {gone}")
        }
        6 => {
            let mut f = csv_fields(&lines[r]);
            if rng.chance(50) || f.len() < 2 {
                f.push("extra".to_owned());
            } else {
                f.pop();
            }
            lines[r] = f.join(",");
            format!("line {}: field count changed", r + 1)
        }
        _ => {
            let mut f = csv_fields(&lines[header]);
            let (a, b) = (rng.below(f.len()), rng.below(f.len()));
            f.swap(a, b);
            lines[header] = f.join(",");
            format!("swap header fields {} and {}", a + 1, b + 1)
        }
    };
    Some((
        lines.join("\n"),
        Applied {
            what,
            nonsense: None,
        },
    ))
}

/// Replace one number token of a text (JSON) with an extreme.
pub fn mutate_numbers(rng: &mut Rng, text: &str) -> Option<(String, Applied)> {
    let nums = number_tokens(text);
    if nums.is_empty() {
        return None;
    }
    let (s, e) = *rng.pick(&nums);
    let x = *rng.pick(EXTREMES);
    let out = format!("{}{}{}", &text[..s], x, &text[e..]);
    let what = format!("number {} at byte {s} -> {x}", &text[s..e]);
    Some((
        out,
        Applied {
            what,
            nonsense: None,
        },
    ))
}

/// Mutate a plan string (`tp=8,pp=2,...`): a knob value → extreme, zero or a wrong type, a knob
/// duplicated with another value, deleted, an unknown knob, or a byte-level change.
pub fn mutate_plan(rng: &mut Rng, plan: &str) -> (String, String) {
    let mut kv: Vec<String> = plan.split(',').map(str::to_owned).collect();
    let i = rng.below(kv.len());
    let key = kv[i].split('=').next().unwrap_or("").to_owned();
    let what = match rng.below(7) {
        0 | 1 => {
            let x = *rng.pick(EXTREMES);
            kv[i] = format!("{key}={x}");
            format!("{key}={x}")
        }
        2 => {
            let x = *rng.pick(&["on", "off", "full", "", "1.5", "[1]", "abc", "0"]);
            kv[i] = format!("{key}={x}");
            format!("{key}={x}")
        }
        3 => {
            let x = *rng.pick(&["1", "2", "8", "64", "on", "none"]);
            kv.insert(i + 1, format!("{key}={x}"));
            format!("duplicate {key} (={x})")
        }
        4 if kv.len() > 1 => {
            kv.remove(i);
            format!("delete {key}")
        }
        5 => {
            kv.insert(i, "fuzz=1".to_owned());
            "unknown knob fuzz=1".to_owned()
        }
        _ => {
            let mut b = kv.join(",").into_bytes();
            let a = mutate_bytes(rng, &mut b);
            // A flag value cannot hold NUL: those become a plain odd byte.
            let s = String::from_utf8_lossy(&b).replace('\0', "?");
            return (s, format!("plan bytes: {}", a.what));
        }
    };
    (kv.join(","), what)
}

/// The keys of a plan string that appear more than once.
pub fn duplicate_keys(plan: &str) -> Vec<String> {
    let keys: Vec<&str> = plan
        .split(',')
        .map(|kv| kv.split('=').next().unwrap_or("").trim())
        .collect();
    let mut dup: Vec<String> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        if !k.is_empty() && keys[..i].contains(k) && !dup.iter().any(|d| d == k) {
            dup.push((*k).to_owned());
        }
    }
    dup
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: &str = "[model]\nname = \"m\" # a comment 7\nlayers = 32\nhidden = 4096\n\n[training]\nseq_len = 8192\nprecision = \"bf16\"\ntflops = { bf16 = 312, fp32 = 19.5 }\n";
    const CSV: &str = "id,a,b\nr1,1,\"x, y\"\nr2,2,3\n";

    #[test]
    fn the_same_seed_mutates_the_same_way() {
        for seed in 0..200 {
            let run = |seed| {
                let mut r = Rng::new(seed);
                let mut m = MODEL.as_bytes().to_vec();
                let mut c = CSV.as_bytes().to_vec();
                let a = mutate_file(&mut r, Kind::Toml, &mut m);
                let b = mutate_file(&mut r, Kind::Csv, &mut c);
                let (p, w) = mutate_plan(&mut r, "tp=8,pp=2,mbs=1");
                (m, c, a.what, b.what, p, w)
            };
            assert_eq!(run(seed), run(seed), "seed {seed}");
        }
    }

    #[test]
    fn every_toml_mutation_changes_the_file() {
        for seed in 0..500 {
            let mut r = Rng::new(seed);
            let (out, a) = mutate_toml(&mut r, MODEL).unwrap();
            assert_ne!(out, MODEL, "seed {seed}: {}", a.what);
        }
    }

    #[test]
    fn number_tokens_skip_strings_comments_and_identifiers() {
        let v = " { bf16 = 312, fp32 = 19.5, n = \"7\", e = 1e3, x = -inf }";
        let toks: Vec<&str> = number_tokens(v).iter().map(|&(s, e)| &v[s..e]).collect();
        assert_eq!(toks, ["312", "19.5", "1e3", "-inf"]);
        let line = "name = \"m\" # a comment 7";
        let (_, s, e) = toml_kv(line).unwrap();
        assert!(number_tokens(&line[s..e]).is_empty());
    }

    #[test]
    fn impossible_values_are_negative_nan_or_infinite() {
        for v in ["-1", "-1e308", "nan", "inf", "-inf", "NaN"] {
            assert!(impossible(v), "{v}");
        }
        for v in [
            "0",
            "-0",
            "1e308",
            "5e-324",
            "4294967295",
            "18446744073709551616",
            "abc",
        ] {
            assert!(!impossible(v), "{v}");
        }
    }

    #[test]
    fn an_impossible_value_is_recorded_with_its_line() {
        let mut found = false;
        for seed in 0..500 {
            let mut r = Rng::new(seed);
            let (out, a) = mutate_toml(&mut r, MODEL).unwrap();
            if let Some(p) = a.nonsense {
                assert!(out.lines().any(|l| l == p.line), "{}", p.line);
                found = true;
            }
        }
        assert!(found);
    }

    #[test]
    fn csv_fields_keep_quoted_commas() {
        assert_eq!(csv_fields("r1,1,\"x, y\""), ["r1", "1", "\"x, y\""]);
    }

    #[test]
    fn duplicate_plan_keys_are_found() {
        assert_eq!(duplicate_keys("tp=1,pp=2,tp=8"), ["tp"]);
        assert!(duplicate_keys("tp=1,pp=2").is_empty());
    }
}
