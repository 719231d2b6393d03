//! The seed inputs the mutators start from: the repository's own bundled files, read once.

use std::fs;
use std::io;
use std::path::Path;

/// A named text file of the repository (name = file stem, e.g. `llama3-8b`).
#[derive(Clone, Debug)]
pub struct Seed {
    pub name: String,
    pub text: String,
}

/// A plan printed by a golden search, with the model and cluster it was searched on.
#[derive(Clone, Debug)]
pub struct GoldenPlan {
    pub model: String,
    pub cluster: String,
    pub plan: String,
}

#[derive(Clone, Debug)]
pub struct Corpus {
    pub models: Vec<Seed>,
    pub clusters: Vec<Seed>,
    pub spaces: Vec<Seed>,
    pub sweeps: Vec<Seed>,
    pub plans: Vec<GoldenPlan>,
    pub traces: Vec<Seed>,
    pub runs: Vec<Seed>,
    pub collectives: Vec<Seed>,
    pub sweep_csvs: Vec<Seed>,
}

/// The files of `dir` with extension `ext`, sorted by name (the order must not depend on the
/// file system, or the cases would not be reproducible).
fn seeds(dir: &Path, ext: &str, prefix: &str) -> io::Result<Vec<Seed>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.extension().and_then(|x| x.to_str()) == Some(ext) && name.starts_with(prefix) {
            let stem = p
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("")
                .to_owned();
            out.push(Seed {
                name: stem,
                text: fs::read_to_string(&p)?,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    if out.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{}: no {prefix}*.{ext} file (is --repo the repository root?)",
                dir.display()
            ),
        ));
    }
    Ok(out)
}

impl Corpus {
    pub fn load(repo: &Path) -> io::Result<Corpus> {
        let golden = seeds(&repo.join("tests/golden"), "txt", "search_")?;
        let mut plans = Vec::new();
        for g in &golden {
            let head = g.text.lines().next().unwrap_or("");
            let arg = |flag: &str| {
                let mut it = head.split_whitespace();
                it.by_ref().find(|w| *w == flag);
                it.next().unwrap_or("").to_owned()
            };
            let (model, cluster) = (arg("--model"), arg("--cluster"));
            for line in g.text.lines().skip(1) {
                if let Some(plan) = line.split_whitespace().last().filter(|p| p.contains("tp=")) {
                    plans.push(GoldenPlan {
                        model: model.clone(),
                        cluster: cluster.clone(),
                        plan: plan.to_owned(),
                    });
                }
            }
        }
        if plans.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "tests/golden: no plan found",
            ));
        }
        Ok(Corpus {
            models: seeds(&repo.join("models"), "toml", "")?,
            clusters: seeds(&repo.join("clusters"), "toml", "")?,
            spaces: seeds(&repo.join("search_spaces"), "toml", "")?,
            sweeps: seeds(&repo.join("search_spaces/sweeps"), "toml", "")?,
            plans,
            traces: seeds(&repo.join("crates/placement/tests/data"), "csv", "")?,
            runs: seeds(&repo.join("data"), "csv", "published_runs")?,
            collectives: seeds(&repo.join("data"), "csv", "collectives")?,
            sweep_csvs: seeds(&repo.join("results/golden"), "csv", "")?,
        })
    }

    pub fn find<'a>(list: &'a [Seed], name: &str) -> Option<&'a Seed> {
        list.iter().find(|s| s.name == name)
    }
}
