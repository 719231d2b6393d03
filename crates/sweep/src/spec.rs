//! Sweep specs (TOML) and their expansion into the canonical list of [`Case`]s.
//!
//! ```toml
//! top_k = 3
//! models = ["llama3-8b", "models/my-moe.toml"]
//! seq_lens = [4096]
//! global_batches = [512, 1024]
//! spaces = ["default"]
//!
//! [[clusters]]            # a cluster as it is
//! name = "a100x64"
//!
//! [[clusters]]            # a template scaled over GPU counts (Cluster::with_gpus)
//! name = "h100x8"
//! gpus_from = 64          # 64, 128, 256, ..., 16384 (doubling)
//! gpus_to = 16384
//!
//! [[clusters]]
//! name = "h100x8"
//! gpus = [96, 192]        # or an explicit list
//! ```
//!
//! Every list is required and non-empty (no silent defaults); the grid is their cartesian
//! product in the order written: models (outermost) × clusters × GPU counts × seq_lens ×
//! global_batches × spaces (innermost). That order is the canonical case order of the output.

use std::collections::BTreeSet;
use std::path::Path;

use autoplan_input::{InputError, Source};
use serde::Deserialize;

use crate::Case;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    top_k: i64,
    models: Vec<String>,
    clusters: Vec<RawCluster>,
    seq_lens: Vec<i64>,
    global_batches: Vec<i64>,
    spaces: Vec<String>,
    /// Tokens of each run (`sweep --front`): a number or "15T".
    #[serde(default)]
    tokens: Option<autoplan_graph::tokens::RawTokens>,
    #[serde(default)]
    price_usd_per_gpu_hour: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    name: String,
    gpus: Option<Vec<i64>>,
    gpus_from: Option<i64>,
    gpus_to: Option<i64>,
}

/// One `[[clusters]]` entry of a spec, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterEntry {
    /// Bundled cluster name or path, as written.
    pub name: String,
    /// `None`: the cluster as it is. `Some(counts)`: a template scaled to each count.
    pub gpus: Option<Vec<u32>>,
}

/// Where in a spec a name sits, for located errors about names the spec cannot check itself
/// (an unknown model, a malformed cluster file...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecField {
    /// `models[i]`.
    Model(usize),
    /// `clusters[i].name`.
    Cluster(usize),
    /// `spaces[i]`.
    Space(usize),
}

/// A validated sweep spec. Construct with [`SweepSpec::read`] or [`SweepSpec::parse`].
#[derive(Debug, Clone)]
pub struct SweepSpec {
    source: Source,
    /// Plans kept per case (≥ 1).
    pub top_k: u32,
    pub models: Vec<String>,
    pub clusters: Vec<ClusterEntry>,
    pub seq_lens: Vec<u32>,
    pub global_batches: Vec<u32>,
    pub spaces: Vec<String>,
    /// The token budget and price of `sweep --front` (the spec's `tokens` and
    /// `price_usd_per_gpu_hour`); `None` without `tokens`.
    pub budget: Option<autoplan_search::train::Budget>,
}

impl SweepSpec {
    /// Read and validate a spec file.
    pub fn read(path: impl AsRef<Path>) -> Result<SweepSpec, InputError> {
        SweepSpec::parse(Source::read(path)?)
    }

    /// Validate a spec from its source text.
    pub fn parse(source: Source) -> Result<SweepSpec, InputError> {
        let raw: RawSpec = source.parse()?;
        let top_k = positive(&source, &["top_k"], raw.top_k)?;
        // The search's bound on a ranking (see `MAX_TOP_K`: more rows than a CSV reader uses).
        if top_k as usize > autoplan_search::MAX_TOP_K {
            return Err(source.invalid(
                &["top_k"],
                top_k,
                format!(
                    "must be in [1, {}] (plans kept per case)",
                    autoplan_search::MAX_TOP_K
                ),
            ));
        }
        nonempty_unique(&source, "models", &raw.models)?;
        nonempty_unique(&source, "spaces", &raw.spaces)?;
        // The model files' workload bound (2^24 tokens per sequence, sequences per batch).
        let workload = autoplan_graph::MAX_WORKLOAD as u32;
        let seq_lens = positive_list(&source, "seq_lens", &raw.seq_lens, workload)?;
        let global_batches =
            positive_list(&source, "global_batches", &raw.global_batches, workload)?;
        if raw.clusters.is_empty() {
            return Err(source.invalid(&["clusters"], "[]", "at least one [[clusters]] entry"));
        }
        let mut clusters = Vec::with_capacity(raw.clusters.len());
        for (i, c) in raw.clusters.iter().enumerate() {
            clusters.push(cluster_entry(&source, i, c)?);
        }
        let budget = crate::front::spec_budget(&source, &raw.tokens, raw.price_usd_per_gpu_hour)?;
        Ok(SweepSpec {
            source,
            top_k,
            models: raw.models,
            clusters,
            seq_lens,
            global_batches,
            spaces: raw.spaces,
            budget,
        })
    }

    /// The spec's source (file name and text).
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// An error about a name of the spec, located at its line: e.g. a model name that does
    /// not resolve.
    pub fn invalid(&self, field: SpecField, reason: impl std::fmt::Display) -> InputError {
        let (path, value) = match field {
            SpecField::Model(i) => (vec!["models".to_string(), i.to_string()], &self.models[i]),
            SpecField::Cluster(i) => (
                vec!["clusters".to_string(), i.to_string(), "name".to_string()],
                &self.clusters[i].name,
            ),
            SpecField::Space(i) => (vec!["spaces".to_string(), i.to_string()], &self.spaces[i]),
        };
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        self.source.invalid(&path, format!("{value:?}"), reason)
    }

    /// The full grid, in canonical order. `cluster_gpus(name)` gives the GPU count of a
    /// cluster used as it is (no `gpus` list); its error becomes a located error.
    pub fn cases(
        &self,
        mut cluster_gpus: impl FnMut(&str) -> Result<u32, String>,
    ) -> Result<Vec<Case>, InputError> {
        // Resolve each as-is cluster once, in spec order, so errors name the first bad entry.
        let mut counts: Vec<Vec<(u32, bool)>> = Vec::with_capacity(self.clusters.len());
        for (i, c) in self.clusters.iter().enumerate() {
            counts.push(match &c.gpus {
                Some(list) => list.iter().map(|&g| (g, true)).collect(),
                None => vec![(
                    cluster_gpus(&c.name).map_err(|r| self.invalid(SpecField::Cluster(i), r))?,
                    false,
                )],
            });
        }
        let mut cases = Vec::new();
        let mut seen = BTreeSet::new();
        for model in &self.models {
            for (c, gpu_counts) in self.clusters.iter().zip(&counts) {
                for &(gpus, scaled) in gpu_counts {
                    for &seq_len in &self.seq_lens {
                        for &global_batch in &self.global_batches {
                            for space in &self.spaces {
                                let case = Case {
                                    index: cases.len(),
                                    model: model.clone(),
                                    cluster: c.name.clone(),
                                    gpus,
                                    scaled,
                                    seq_len,
                                    global_batch,
                                    space: space.clone(),
                                    top_k: self.top_k,
                                    // `sweep --framework` sets it (cmd/sweep.rs).
                                    framework: autoplan_plan::Framework::default().spec(),
                                };
                                // Two entries naming the same cluster at the same size would
                                // give two cases with the same keys: `diff` could not tell them
                                // apart.
                                if !seen.insert(case.keys()) {
                                    return Err(self.source.invalid(
                                        &["clusters"],
                                        format!("{} at {gpus} GPUs", c.name),
                                        "listed twice",
                                    ));
                                }
                                cases.push(case);
                            }
                        }
                    }
                }
            }
        }
        Ok(cases)
    }
}

fn positive(source: &Source, path: &[&str], v: i64) -> Result<u32, InputError> {
    if v <= 0 || v > u32::MAX as i64 {
        return Err(source.invalid(path, v, "must be a positive integer"));
    }
    Ok(v as u32)
}

/// `v` in `[1, max]`, else an error naming the range.
fn at_most(source: &Source, path: &[&str], v: i64, max: u32) -> Result<u32, InputError> {
    let v = positive(source, path, v)?;
    if v > max {
        return Err(source.invalid(path, v, format!("too large: expected [1, {max}]")));
    }
    Ok(v)
}

fn positive_list(
    source: &Source,
    key: &str,
    list: &[i64],
    max: u32,
) -> Result<Vec<u32>, InputError> {
    if list.is_empty() {
        return Err(source.invalid(&[key], "[]", "at least one value"));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, &v) in list.iter().enumerate() {
        let idx = i.to_string();
        let v = at_most(source, &[key, &idx], v, max)?;
        if out.contains(&v) {
            return Err(source.invalid(&[key, &idx], v, "listed twice"));
        }
        out.push(v);
    }
    Ok(out)
}

fn nonempty_unique(source: &Source, key: &str, list: &[String]) -> Result<(), InputError> {
    if list.is_empty() {
        return Err(source.invalid(&[key], "[]", "at least one value"));
    }
    for (i, v) in list.iter().enumerate() {
        let idx = i.to_string();
        if v.trim().is_empty() {
            return Err(source.invalid(&[key, &idx], format!("{v:?}"), "empty name"));
        }
        if list[..i].contains(v) {
            return Err(source.invalid(&[key, &idx], format!("{v:?}"), "listed twice"));
        }
    }
    Ok(())
}

fn cluster_entry(source: &Source, i: usize, c: &RawCluster) -> Result<ClusterEntry, InputError> {
    let idx = i.to_string();
    let at = |key: &'static str| ["clusters", idx.as_str(), key];
    if c.name.trim().is_empty() {
        return Err(source.invalid(&at("name"), "\"\"", "empty name"));
    }
    let gpus = match (&c.gpus, c.gpus_from, c.gpus_to) {
        (None, None, None) => None,
        (Some(list), None, None) => {
            let mut out = Vec::with_capacity(list.len());
            if list.is_empty() {
                return Err(source.invalid(&at("gpus"), "[]", "at least one GPU count"));
            }
            for (j, &g) in list.iter().enumerate() {
                let jdx = j.to_string();
                let path = ["clusters", idx.as_str(), "gpus", jdx.as_str()];
                let g = at_most(source, &path, g, autoplan_cluster::MAX_GPUS)?;
                if out.contains(&g) {
                    return Err(source.invalid(&path, g, "listed twice"));
                }
                out.push(g);
            }
            Some(out)
        }
        (None, Some(from), Some(to)) => {
            let from = at_most(source, &at("gpus_from"), from, autoplan_cluster::MAX_GPUS)?;
            let to = at_most(source, &at("gpus_to"), to, autoplan_cluster::MAX_GPUS)?;
            if to < from {
                return Err(source.invalid(
                    &at("gpus_to"),
                    to,
                    format!("smaller than gpus_from = {from}"),
                ));
            }
            let mut out = vec![from];
            let mut g = from as u64;
            while g < to as u64 {
                g *= 2;
                out.push(g as u32);
            }
            if g != to as u64 {
                return Err(source.invalid(
                    &at("gpus_to"),
                    to,
                    format!("not gpus_from = {from} times a power of two (the range doubles)"),
                ));
            }
            Some(out)
        }
        (Some(_), _, _) => {
            return Err(source.invalid(
                &at("gpus"),
                "[..]",
                "give either `gpus` or `gpus_from`/`gpus_to`, not both",
            ))
        }
        (None, Some(_), None) => {
            return Err(source.invalid(&at("gpus_from"), "", "needs `gpus_to` too"))
        }
        (None, None, Some(_)) => {
            return Err(source.invalid(&at("gpus_to"), "", "needs `gpus_from` too"))
        }
    };
    Ok(ClusterEntry {
        name: c.name.clone(),
        gpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"top_k = 2
models = ["a", "b"]
seq_lens = [4096]
global_batches = [256, 512]
spaces = ["default"]

[[clusters]]
name = "x64"

[[clusters]]
name = "h100x8"
gpus_from = 64
gpus_to = 256
"#;

    fn spec(text: &str) -> Result<SweepSpec, InputError> {
        SweepSpec::parse(Source::new("s.toml", text))
    }

    /// Issue 21: every number of a spec has a range (top_k, workloads, GPU counts).
    #[test]
    fn numbers_beyond_their_ranges_are_located() {
        for (from, to, at, part) in [
            (
                "top_k = 2",
                "top_k = 2147483647",
                "s.toml:1:1:",
                "must be in [1, 10000]",
            ),
            (
                "[4096]",
                "[16777217]",
                "s.toml:3:",
                "seq_lens.0 = 16777217: too large",
            ),
            (
                "gpus_to = 256",
                "gpus_to = 2147483648",
                "s.toml:13:",
                "[1, 1048576]",
            ),
        ] {
            let e = spec(&SPEC.replace(from, to)).unwrap_err().to_string();
            assert!(e.starts_with(at) && e.contains(part), "{e}");
        }
    }

    #[test]
    fn grid_is_the_product_in_spec_order() {
        let cases = spec(SPEC).unwrap().cases(|_| Ok(64)).unwrap();
        // 2 models × (1 + 3) cluster sizes × 1 seq × 2 batches × 1 space.
        assert_eq!(cases.len(), 2 * 4 * 2);
        let first: Vec<_> = cases[..4]
            .iter()
            .map(|c| (c.cluster.as_str(), c.gpus, c.scaled, c.global_batch))
            .collect();
        assert_eq!(
            first,
            [
                ("x64", 64, false, 256),
                ("x64", 64, false, 512),
                ("h100x8", 64, true, 256),
                ("h100x8", 64, true, 512)
            ]
        );
        assert_eq!(cases[7].gpus, 256);
        assert_eq!(cases[8].model, "b");
        assert!(cases.iter().enumerate().all(|(i, c)| c.index == i));
    }

    #[test]
    fn errors_are_located() {
        let err = spec(&SPEC.replace("gpus_to = 256", "gpus_to = 200"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("s.toml:13:1: clusters.1.gpus_to = 200"),
            "{err}"
        );
        let err = spec(&SPEC.replace("[256, 512]", "[256, 0]"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("s.toml:4:"), "{err}");
        assert!(err.contains("global_batches.1 = 0"), "{err}");
        let err = spec(&SPEC.replace("top_k = 2", "top_k = 2\nthreads = 4"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("s.toml:2:1:") && err.contains("threads"),
            "{err}"
        );
        let err = spec(&SPEC.replace("[\"a\", \"b\"]", "[\"a\", \"a\"]"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("models.1") && err.contains("listed twice"),
            "{err}"
        );
    }

    #[test]
    fn unresolvable_cluster_is_located() {
        let s = spec(SPEC).unwrap();
        let err = s.cases(|_| Err("no such cluster".into())).unwrap_err();
        assert_eq!(
            err.to_string(),
            "s.toml:8:1: clusters.0.name = \"x64\": no such cluster"
        );
        let err = s.invalid(SpecField::Model(1), "unknown model").to_string();
        assert_eq!(err, "s.toml:2:16: models.1 = \"b\": unknown model");
    }

    #[test]
    fn same_cluster_twice_at_one_size_is_rejected() {
        let text = SPEC.replace(
            "name = \"h100x8\"\ngpus_from = 64\ngpus_to = 256",
            "name = \"x64\"\ngpus = [64]",
        );
        let err = spec(&text).unwrap().cases(|_| Ok(64)).unwrap_err();
        assert!(err.to_string().contains("listed twice"), "{err}");
        // Same name at different sizes is fine.
        let text = SPEC.replace("name = \"x64\"", "name = \"h100x8\"");
        assert!(spec(&text).unwrap().cases(|_| Ok(8)).is_ok());
    }
}
