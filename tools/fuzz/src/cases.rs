//! Case generation: a valid command line built from the corpus, then 0–3 seeded mutations of its
//! input files and flags. Case `i` of seed `s` depends on `(s, i, --commands)` only.

use crate::corpus::{Corpus, Seed};
use crate::mutate::{self, Kind};
use crate::rng::Rng;

/// The commands the harness drives, with their share of the cases.
pub const COMMANDS: &[(&str, u32)] = &[
    ("search", 24),
    ("evaluate", 14),
    ("show", 5),
    ("validate", 7),
    ("collective", 10),
    ("place-experts", 14),
    ("sweep", 10),
    ("merge", 7),
    ("diff", 7),
    ("models", 1),
    ("clusters", 1),
];

/// One generated case: everything needed to run it and to write its reproduction.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub index: u64,
    pub command: &'static str,
    /// The arguments after the subcommand. Input files are referred to by their bare names: the
    /// command runs in a directory holding them.
    pub args: Vec<String>,
    /// Input files: name and (mutated) content.
    pub files: Vec<(String, Vec<u8>)>,
    /// Files the command is asked to write, scanned for non-finite numbers.
    pub outputs: Vec<String>,
    /// Run with stdout a pipe that has no reader.
    pub closed_stdout: bool,
    pub mutations: Vec<String>,
    /// Why the input is impossible, when a planted impossible value survived all mutations.
    pub nonsense: Option<String>,
}

impl Case {
    /// The bytes the run digest is computed over.
    pub fn fingerprint(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(self.command.as_bytes());
        for a in &self.args {
            b.push(0x1f);
            b.extend_from_slice(a.as_bytes());
        }
        for (n, d) in &self.files {
            b.push(0x1e);
            b.extend_from_slice(n.as_bytes());
            b.push(0x1d);
            b.extend_from_slice(d);
        }
        b.push(u8::from(self.closed_stdout));
        b
    }

    /// `autoplan <command> <args>` with shell quoting.
    pub fn command_line(&self, bin: &str) -> String {
        let mut s = shell_quote(bin);
        s.push(' ');
        s.push_str(self.command);
        for a in &self.args {
            s.push(' ');
            s.push_str(&shell_quote(a));
        }
        s
    }
}

pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"-_./=:,+%@".contains(&c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A numeric flag a mutation may set, and when a value of it is impossible.
#[derive(Clone, Copy)]
struct NumFlag {
    name: &'static str,
    check: Check,
}

#[derive(Clone, Copy, PartialEq)]
enum Check {
    /// Any value may be meaningful (or clap's integer parsing refuses it anyway).
    Any,
    /// Negative, NaN or infinite is impossible.
    Finite,
    /// Negative or NaN is impossible (infinity may mean "no limit").
    NotNegOrNan,
    /// Like `Finite`, only with `--exact` (the flag applies only to the exact solver).
    FiniteWithExact,
    /// Like `Finite`, only without `--comm-only` (which ignores the flag).
    FiniteWithCompute,
}

const fn nf(name: &'static str, check: Check) -> NumFlag {
    NumFlag { name, check }
}

struct InFile {
    name: String,
    kind: Kind,
    data: Vec<u8>,
}

struct Draft {
    command: &'static str,
    flags: Vec<(String, Option<String>)>,
    positional: Vec<String>,
    files: Vec<InFile>,
    outputs: Vec<String>,
    numeric: &'static [NumFlag],
    /// Plan-string flags (`--plan`, `--fix`) present.
    plan_flags: Vec<String>,
    planted: Vec<(String, mutate::Planted)>,
    mutations: Vec<String>,
}

impl Draft {
    fn new(command: &'static str, numeric: &'static [NumFlag]) -> Draft {
        Draft {
            command,
            flags: Vec::new(),
            positional: Vec::new(),
            files: Vec::new(),
            outputs: Vec::new(),
            numeric,
            plan_flags: Vec::new(),
            planted: Vec::new(),
            mutations: Vec::new(),
        }
    }

    fn flag(&mut self, name: &str, value: impl Into<String>) {
        self.flags.push((name.to_owned(), Some(value.into())));
    }

    fn switch(&mut self, name: &str) {
        self.flags.push((name.to_owned(), None));
    }

    fn get(&self, name: &str) -> Option<&(String, Option<String>)> {
        self.flags.iter().find(|(n, _)| n == name)
    }

    fn set(&mut self, name: &str, value: String) {
        match self.flags.iter_mut().find(|(n, _)| n == name) {
            Some(f) => f.1 = Some(value),
            None => self.flags.push((name.to_owned(), Some(value))),
        }
    }

    fn file(&mut self, name: &str, kind: Kind, text: &str) -> String {
        self.files.push(InFile {
            name: name.to_owned(),
            kind,
            data: text.as_bytes().to_vec(),
        });
        name.to_owned()
    }

    /// `--flag NAME` (a bundled name) or `--flag FILE` (a copy of the bundled file, to mutate).
    fn named_or_file(&mut self, rng: &mut Rng, flag: &str, seed: &Seed, file: &str, file_pct: u64) {
        if rng.chance(file_pct) {
            let f = self.file(file, Kind::Toml, &seed.text);
            self.flag(flag, f);
        } else {
            self.flag(flag, seed.name.clone());
        }
    }

    fn format(&mut self, rng: &mut Rng, pct: u64) {
        if rng.chance(pct) {
            self.flag("--format", *rng.pick(&["table", "json", "csv"]));
        }
    }
}

/// Generate case `index` of seed `seed`, drawing the command among `commands` (names of
/// [`COMMANDS`]; empty = all).
pub fn generate(corpus: &Corpus, seed: u64, index: u64, commands: &[String]) -> Case {
    let mut rng = Rng::for_case(seed, index);
    let allowed: Vec<(&'static str, u32)> = COMMANDS
        .iter()
        .copied()
        .filter(|(c, _)| commands.is_empty() || commands.iter().any(|x| x == c))
        .collect();
    let weights: Vec<u32> = allowed.iter().map(|&(_, w)| w).collect();
    let command = allowed[rng.weighted(&weights)].0;
    let mut d = match command {
        "search" => search(&mut rng, corpus),
        "evaluate" => evaluate(&mut rng, corpus),
        "show" => show(&mut rng, corpus),
        "validate" => validate(&mut rng, corpus),
        "collective" => collective(&mut rng, corpus),
        "place-experts" => place_experts(&mut rng, corpus),
        "sweep" => sweep(&mut rng, corpus),
        "merge" => merge(&mut rng, corpus),
        "diff" => diff(&mut rng, corpus),
        c => Draft::new(c, &[]),
    };
    let closed_stdout = rng.chance(6);
    let n = match rng.below(100) {
        0..=3 => 0,
        4..=53 => 1,
        54..=83 => 2,
        _ => 3,
    };
    for _ in 0..n {
        mutate_one(&mut rng, &mut d);
    }
    finish(index, d, closed_stdout)
}

fn mutate_one(rng: &mut Rng, d: &mut Draft) {
    let has_flags = !d.numeric.is_empty() || !d.plan_flags.is_empty();
    if !d.files.is_empty() && (!has_flags || rng.chance(55)) {
        let i = rng.below(d.files.len());
        let f = &mut d.files[i];
        let a = mutate::mutate_file(rng, f.kind, &mut f.data);
        d.mutations.push(format!("{}: {}", f.name, a.what));
        if let Some(p) = a.nonsense {
            d.planted.push((f.name.clone(), p));
        }
        return;
    }
    if !d.plan_flags.is_empty() && (d.numeric.is_empty() || rng.chance(35)) {
        let flag = rng.pick(&d.plan_flags).clone();
        let old = d.get(&flag).and_then(|f| f.1.clone()).unwrap_or_default();
        let (new, what) = mutate::mutate_plan(rng, &old);
        d.set(&flag, new);
        d.mutations.push(format!("{flag}: {what}"));
        return;
    }
    if d.numeric.is_empty() {
        // Nothing else to mutate (`models`, `clusters`, `show` of a bundled name): an unknown flag.
        if d.get("--fuzz-unknown").is_some() {
            return;
        }
        d.switch("--fuzz-unknown");
        d.mutations.push("unknown flag --fuzz-unknown".to_owned());
        return;
    }
    let f = *rng.pick(d.numeric);
    if rng.chance(5) && d.get(f.name).is_some() {
        let v = d.get(f.name).and_then(|x| x.1.clone()).unwrap_or_default();
        d.flag(f.name, v);
        d.mutations.push(format!("{} given twice", f.name));
        return;
    }
    let v = match f.name {
        "--bytes" if rng.chance(50) => *rng.pick(&[
            "1e308GiB",
            "18446744073709551615",
            "18446744073709551616",
            "1TiB",
            "1.5MB",
            "16EiB",
            "nanMB",
            "infGiB",
            "1Z",
            "-1MB",
            "0B",
            "",
        ]),
        "--shard" => *rng.pick(&[
            "0/0",
            "1/0",
            "0/2",
            "3/2",
            "4294967295/4294967295",
            "18446744073709551616/2",
            "1/2/3",
            "a/b",
            "1/-1",
            "1/4294967295",
        ]),
        _ if rng.chance(75) => *rng.pick(mutate::EXTREMES),
        _ => *rng.pick(&["abc", "", "1,2", "0x10", "1.5", "+3", " 4", "1e3", "1", "0"]),
    };
    d.set(f.name, v.to_owned());
    d.mutations.push(format!("{} {v}", f.name));
}

fn finish(index: u64, d: Draft, closed_stdout: bool) -> Case {
    let mut nonsense = None;
    for (file, p) in &d.planted {
        let still = d.files.iter().find(|f| &f.name == file).is_some_and(|f| {
            String::from_utf8_lossy(&f.data)
                .lines()
                .any(|l| l == p.line)
        });
        if still {
            nonsense = Some(format!("{file}: {}", p.why));
        }
    }
    let has = |n: &str| d.get(n).is_some();
    for f in d.numeric {
        let Some((_, Some(v))) = d.get(f.name) else {
            continue;
        };
        // A flag given twice is refused by the parser: no verdict on its value.
        if d.flags.iter().filter(|(n, _)| n == f.name).count() > 1 {
            continue;
        }
        let bad = match f.check {
            Check::Any => false,
            Check::Finite => mutate::impossible(v),
            Check::NotNegOrNan => v.trim().parse::<f64>().is_ok_and(|x| x.is_nan() || x < 0.0),
            Check::FiniteWithExact => has("--exact") && mutate::impossible(v),
            Check::FiniteWithCompute => !has("--comm-only") && mutate::impossible(v),
        };
        if bad {
            nonsense = Some(format!("{} {v}", f.name));
        }
    }
    for pf in &d.plan_flags {
        if let Some((_, Some(v))) = d.get(pf) {
            if let Some(k) = mutate::duplicate_keys(v).first() {
                nonsense = Some(format!("knob `{k}` given twice in {pf}"));
            }
        }
    }
    let mut args = Vec::new();
    for (n, v) in d.flags {
        args.push(n);
        args.extend(v);
    }
    args.extend(d.positional);
    Case {
        index,
        command: d.command,
        args,
        files: d.files.into_iter().map(|f| (f.name, f.data)).collect(),
        outputs: d.outputs,
        closed_stdout,
        mutations: d.mutations,
        nonsense,
    }
}

const SEARCH_FLAGS: &[NumFlag] = &[
    nf("--top", Check::Any),
    nf("--seq-len", Check::Any),
    nf("--global-batch", Check::Any),
    nf("--gpus", Check::Any),
    nf("--reserve", Check::Finite),
    nf("--threads", Check::Any),
    nf("--explain", Check::Any),
];

/// The knobs of a golden plan, 1–3 of them, as a `--fix` string.
fn fix_string(rng: &mut Rng, plan: &str) -> String {
    let kv: Vec<&str> = plan.split(',').collect();
    let n = 1 + rng.below(3);
    let mut picked: Vec<&str> = Vec::new();
    for _ in 0..n {
        let k = *rng.pick(&kv);
        if !picked.contains(&k) {
            picked.push(k);
        }
    }
    picked.join(",")
}

fn search(rng: &mut Rng, c: &Corpus) -> Draft {
    let mut d = Draft::new("search", SEARCH_FLAGS);
    let model = rng.pick(&c.models).clone();
    let cluster = rng.pick(&c.clusters).clone();
    d.named_or_file(rng, "--model", &model, "model.toml", 35);
    d.named_or_file(rng, "--cluster", &cluster, "cluster.toml", 35);
    let quick = match rng.below(100) {
        0..=49 => {
            d.flag("--space", "quick");
            true
        }
        50..=69 => {
            let s = rng.pick(&c.spaces).name.clone();
            let q = s == "quick";
            d.flag("--space", s);
            q
        }
        _ => {
            let s = rng.pick(&c.spaces).clone();
            let f = d.file("space.toml", Kind::Toml, &s.text);
            d.flag("--space", f);
            s.name == "quick"
        }
    };
    if rng.chance(30) {
        d.flag("--top", rng.range(1, 20).to_string());
    }
    if rng.chance(15) {
        let p = rng.pick(&c.plans).plan.clone();
        d.flag("--fix", fix_string(rng, &p));
        d.plan_flags.push("--fix".to_owned());
    }
    if rng.chance(10) {
        d.flag("--seq-len", *rng.pick(&["2048", "4096", "8192"]));
    }
    if rng.chance(10) {
        d.flag("--global-batch", *rng.pick(&["64", "256", "1024", "4096"]));
    }
    if rng.chance(10) {
        d.flag("--precision", *rng.pick(&["bf16", "fp16", "fp8"]));
    }
    if rng.chance(10) {
        d.flag("--gpus", *rng.pick(&["8", "16", "64", "256"]));
    }
    if rng.chance(10) {
        d.flag("--reserve", *rng.pick(&["0", "2.5", "8"]));
    }
    d.format(rng, 40);
    if rng.chance(10) {
        d.flag("--threads", *rng.pick(&["1", "2"]));
    }
    if rng.chance(15) {
        d.flag("--explain", rng.range(1, 3).to_string());
    }
    if rng.chance(10) {
        d.switch("--stats");
    }
    if quick && rng.chance(10) {
        d.switch("--exhaustive");
    }
    if rng.chance(10) {
        d.flag("--out", "result.out");
        d.outputs.push("result.out".to_owned());
    }
    d
}

fn evaluate(rng: &mut Rng, c: &Corpus) -> Draft {
    const FLAGS: &[NumFlag] = &[
        nf("--seq-len", Check::Any),
        nf("--global-batch", Check::Any),
        nf("--gpus", Check::Any),
        nf("--reserve", Check::Finite),
    ];
    let mut d = Draft::new("evaluate", FLAGS);
    let g = rng.pick(&c.plans).clone();
    let (model, cluster, plan) = if rng.chance(70) {
        (
            Corpus::find(&c.models, &g.model),
            Corpus::find(&c.clusters, &g.cluster),
            g.plan.clone(),
        )
    } else {
        // Another model and cluster: drop dp so that it defaults to the GPUs left over.
        let plan: Vec<&str> = g
            .plan
            .split(',')
            .filter(|kv| !kv.starts_with("dp="))
            .collect();
        (
            Some(rng.pick(&c.models)),
            Some(rng.pick(&c.clusters)),
            plan.join(","),
        )
    };
    let model = model.unwrap_or(&c.models[0]).clone();
    let cluster = cluster.unwrap_or(&c.clusters[0]).clone();
    d.named_or_file(rng, "--model", &model, "model.toml", 35);
    d.named_or_file(rng, "--cluster", &cluster, "cluster.toml", 35);
    d.flag("--plan", plan);
    d.plan_flags.push("--plan".to_owned());
    if rng.chance(10) {
        d.flag("--seq-len", *rng.pick(&["2048", "4096", "8192"]));
    }
    if rng.chance(10) {
        d.flag("--global-batch", *rng.pick(&["64", "256", "1024", "4096"]));
    }
    if rng.chance(10) {
        d.flag("--precision", *rng.pick(&["bf16", "fp16", "fp8"]));
    }
    if rng.chance(10) {
        d.flag("--gpus", *rng.pick(&["8", "64", "256"]));
    }
    if rng.chance(10) {
        d.flag("--reserve", *rng.pick(&["0", "2.5", "8"]));
    }
    if rng.chance(10) {
        d.flag("--attention", *rng.pick(&["flash", "unfused"]));
    }
    if rng.chance(10) {
        d.switch("--no-dp-overlap");
    }
    d.format(rng, 40);
    if rng.chance(10) {
        let f = *rng.pick(&["megatron", "torchtitan", "deepspeed", "nccl"]);
        d.flag("--emit", f);
    }
    d
}

fn show(rng: &mut Rng, c: &Corpus) -> Draft {
    let mut d = Draft::new("show", &[]);
    let what = rng.below(10);
    if what < 6 {
        let m = rng.pick(&c.models).clone();
        d.named_or_file(rng, "--model", &m, "model.toml", 85);
    }
    if what >= 5 {
        let k = rng.pick(&c.clusters).clone();
        d.named_or_file(rng, "--cluster", &k, "cluster.toml", 85);
    }
    d.format(rng, 50);
    d
}

fn validate(rng: &mut Rng, c: &Corpus) -> Draft {
    let mut d = Draft::new("validate", &[]);
    let runs = rng.pick(&c.runs).clone();
    if rng.chance(2) {
        // The re-fit is a grid search over every row: a dozen rows keeps it to a second or two.
        let head: Vec<&str> = runs.text.lines().take(13).collect();
        let f = d.file("runs.csv", Kind::Csv, &(head.join("\n") + "\n"));
        d.flag("--runs", f);
        d.flag("--fit", *rng.pick(&["a100", "h100", "v100"]));
        return d;
    }
    let f = d.file("runs.csv", Kind::Csv, &runs.text);
    d.flag("--runs", f);
    d.format(rng, 40);
    if rng.chance(20) {
        let ids: Vec<&str> = runs
            .text
            .lines()
            .skip(1)
            .filter_map(|l| l.split(',').next())
            .collect();
        if !ids.is_empty() {
            d.flag("--explain", *rng.pick(&ids));
        }
    }
    d
}

fn collective(rng: &mut Rng, c: &Corpus) -> Draft {
    const FLAGS: &[NumFlag] = &[
        nf("--ranks", Check::Any),
        nf("--ranks-per-node", Check::Any),
        nf("--bytes", Check::Any),
    ];
    if rng.chance(25) {
        let mut d = Draft::new("collective", &[]);
        let m = rng.pick(&c.collectives).clone();
        let f = d.file("measured.csv", Kind::Csv, &m.text);
        d.flag("--validate", f);
        d.format(rng, 40);
        return d;
    }
    let mut d = Draft::new("collective", FLAGS);
    match rng.below(4) {
        0 => {
            let machine = *rng.pick(&[
                "dgx-a100x8",
                "dgx-a100x16",
                "dgx-h100x16",
                "dgx-h100x64",
                "hgx-h800x8",
            ]);
            d.flag("--cluster", machine);
        }
        1 => {
            let k = rng.pick(&c.clusters).clone();
            let f = d.file("cluster.toml", Kind::Toml, &k.text);
            d.flag("--cluster", f);
        }
        _ => d.flag("--cluster", rng.pick(&c.clusters).name.clone()),
    }
    d.flag(
        "--op",
        *rng.pick(&[
            "allreduce",
            "allgather",
            "reducescatter",
            "alltoall",
            "broadcast",
            "reduce",
            "scatter",
            "gather",
            "sendrecv",
            "barrier",
        ]),
    );
    d.flag("--ranks", *rng.pick(&["2", "4", "8", "16", "32", "64"]));
    if rng.chance(20) {
        d.flag("--ranks-per-node", *rng.pick(&["1", "2", "4", "8"]));
    }
    d.flag(
        "--bytes",
        *rng.pick(&["4096", "1MB", "256MB", "1GiB", "8K", "64M"]),
    );
    if rng.chance(15) {
        d.flag(
            "--algo",
            *rng.pick(&[
                "ring",
                "tree",
                "direct",
                "double-binary-tree",
                "halving-doubling",
                "hierarchical",
            ]),
        );
    }
    if rng.chance(20) {
        d.flag(
            "--mode",
            *rng.pick(&["cheapest", "nccl-like", "nccl-tuner"]),
        );
    }
    d.format(rng, 40);
    d
}

fn place_experts(rng: &mut Rng, c: &Corpus) -> Draft {
    const FLAGS: &[NumFlag] = &[
        nf("--experts", Check::Any),
        nf("--ep", Check::Any),
        nf("--slots", Check::Any),
        nf("--zipf", Check::Any),
        nf("--seed", Check::Any),
        nf("--tokens-per-gpu", Check::Any),
        nf("--hidden", Check::Any),
        nf("--expert-ffn-hidden", Check::Any),
        nf("--expert-mfu", Check::FiniteWithCompute),
        nf("--time-limit", Check::FiniteWithExact),
    ];
    let mut d = Draft::new("place-experts", FLAGS);
    let thesis = rng.chance(20);
    let (e, p) = if thesis {
        let k = if rng.chance(50) {
            "thesis-2node"
        } else {
            "thesis-4node"
        };
        d.flag("--cluster", k);
        d.switch("--comm-only");
        (8, 8)
    } else {
        let name = *rng.pick(&[
            "h800x2048",
            "dgx-h100",
            "a100x64",
            "h100x256",
            "grand-teton-h100",
        ]);
        let seed = Corpus::find(&c.clusters, name)
            .unwrap_or(&c.clusters[0])
            .clone();
        d.named_or_file(rng, "--cluster", &seed, "cluster.toml", 25);
        let p = *rng.pick(&[8u64, 16, 32, 64]);
        let e = *rng.pick(&[8u64, 16, 32, 64, 128, 256]);
        (e.max(p), p)
    };
    d.flag("--experts", e.to_string());
    d.flag("--ep", p.to_string());
    d.flag("--slots", (e.div_ceil(p) + rng.range(0, 2)).to_string());
    match rng.below(100) {
        0..=34 => {
            let name = loads_file(rng, c, &mut d, e, p, thesis);
            d.flag("--loads", name);
        }
        35..=79 => d.flag("--zipf", *rng.pick(&["0.5", "0.8", "1.0", "1.2", "1.5"])),
        _ => d.switch("--uniform"),
    }
    if rng.chance(30) {
        d.flag("--seed", rng.range(0, 1000).to_string());
    }
    if rng.chance(15) {
        d.flag("--tokens-per-gpu", *rng.pick(&["4096", "32768", "65536"]));
    }
    if rng.chance(15) {
        d.flag("--hidden", *rng.pick(&["4096", "7168"]));
    }
    if rng.chance(15) {
        d.flag("--expert-ffn-hidden", *rng.pick(&["1408", "2048"]));
    }
    if rng.chance(15) && !thesis {
        d.flag("--expert-mfu", *rng.pick(&["0.3", "0.5", "0.7"]));
    }
    if rng.chance(20) {
        d.flag("--objective", *rng.pick(&["synchronous", "thesis"]));
    }
    if rng.chance(8) && p <= 16 {
        let mut t = String::from("src,dst,alpha_us,bw_gbps\n");
        for s in 0..p {
            for r in 0..p {
                if s != r {
                    let bw = if s / 8 == r / 8 { 150 } else { 25 };
                    t.push_str(&format!(
                        "{s},{r},{}.{},{bw}\n",
                        rng.range(1, 9),
                        rng.range(0, 9)
                    ));
                }
            }
        }
        let f = d.file("alpha_beta.csv", Kind::Csv, &t);
        d.flag("--alpha-beta", f);
    }
    if e <= 16 && p <= 8 && rng.chance(20) {
        d.switch("--exact");
        // Always bounded: the exact solver otherwise runs to proven optimality.
        d.flag("--time-limit", "2");
    }
    d.format(rng, 40);
    d
}

/// A token trace for `e` experts on `p` GPUs: the thesis example, or one drawn here.
fn loads_file(rng: &mut Rng, c: &Corpus, d: &mut Draft, e: u64, p: u64, thesis: bool) -> String {
    if thesis && rng.chance(50) {
        let t = c.traces[0].text.clone();
        return d.file("loads.csv", Kind::Csv, &t);
    }
    match rng.below(4) {
        0 => {
            let mut t = String::from("expert,tokens\n");
            for x in 0..e {
                t.push_str(&format!("{x},{}\n", rng.range(1, 5000)));
            }
            d.file("loads.csv", Kind::Csv, &t)
        }
        1 if p * e <= 4096 => {
            let mut t = String::from("source,expert,tokens\n");
            for s in 0..p {
                for x in 0..e {
                    t.push_str(&format!("{s},{x},{}\n", rng.range(0, 500)));
                }
            }
            d.file("loads.csv", Kind::Csv, &t)
        }
        2 if p * e <= 4096 => {
            let rows: Vec<String> = (0..p)
                .map(|_| {
                    let r: Vec<String> = (0..e).map(|_| rng.range(0, 500).to_string()).collect();
                    format!("[{}]", r.join(","))
                })
                .collect();
            d.file(
                "loads.json",
                Kind::Json,
                &format!("{{\"tokens\": [{}]}}\n", rows.join(",\n")),
            )
        }
        _ => {
            let r: Vec<String> = (0..e).map(|_| rng.range(1, 5000).to_string()).collect();
            d.file(
                "loads.json",
                Kind::Json,
                &format!("{{\"experts\": [{}]}}\n", r.join(", ")),
            )
        }
    }
}

fn sweep(rng: &mut Rng, c: &Corpus) -> Draft {
    const SMALL: &[NumFlag] = &[
        nf("--threads", Check::Any),
        nf("--max-cases", Check::Any),
        nf("--shard", Check::Any),
    ];
    // A large spec keeps --max-cases out of the mutations' reach: it bounds the run.
    const LARGE: &[NumFlag] = &[nf("--threads", Check::Any), nf("--shard", Check::Any)];
    let small = Corpus::find(&c.sweeps, "small")
        .unwrap_or(&c.sweeps[0])
        .clone();
    let spec = if rng.chance(85) {
        small
    } else {
        rng.pick(&c.sweeps).clone()
    };
    let large = spec.name != "small";
    let mut d = Draft::new("sweep", if large { LARGE } else { SMALL });
    let f = d.file("spec.toml", Kind::Toml, &spec.text);
    d.flag("--spec", f);
    d.flag("--out", "out.csv");
    d.outputs.push("out.csv".to_owned());
    if large {
        d.flag("--max-cases", "2");
    } else if rng.chance(30) {
        d.flag("--max-cases", rng.range(1, 4).to_string());
    }
    if rng.chance(20) {
        d.flag("--threads", *rng.pick(&["1", "2"]));
    }
    if rng.chance(15) {
        d.flag("--shard", *rng.pick(&["1/2", "2/2", "1/3"]));
    }
    if !large && rng.chance(15) {
        // Resume from the golden output cut after a few rows (an interrupted sweep).
        if let Some(g) = c.sweep_csvs.first() {
            let n = 1 + rng.below(12);
            let head: Vec<&str> = g.text.lines().take(n).collect();
            d.files.push(InFile {
                name: "out.csv".to_owned(),
                kind: Kind::Csv,
                data: (head.join("\n") + "\n").into_bytes(),
            });
            d.switch("--resume");
        }
    }
    d
}

/// The golden sweep CSV split into `n` shards by case (as `sweep --shard K/N` would).
fn shards(text: &str, n: usize) -> Vec<String> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("");
    let mut out = vec![format!("{header}\n"); n];
    for l in lines {
        let case: usize = l
            .split(',')
            .next()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        out[case % n].push_str(l);
        out[case % n].push('\n');
    }
    out
}

fn merge(rng: &mut Rng, c: &Corpus) -> Draft {
    let mut d = Draft::new("merge", &[]);
    let g = c.sweep_csvs[0].text.clone();
    let n = 1 + rng.below(3);
    for (i, s) in shards(&g, n).iter().enumerate() {
        let f = d.file(&format!("shard{}.csv", i + 1), Kind::Csv, s);
        d.positional.push(f);
    }
    if rng.chance(30) {
        if let Some(s) = Corpus::find(&c.sweeps, "small") {
            let t = s.text.clone();
            let f = d.file("spec.toml", Kind::Toml, &t);
            d.flag("--spec", f);
        }
    }
    if rng.chance(50) {
        d.flag("-o", "merged.csv");
        d.outputs.push("merged.csv".to_owned());
    }
    d
}

fn diff(rng: &mut Rng, c: &Corpus) -> Draft {
    const FLAGS: &[NumFlag] = &[nf("--threshold", Check::NotNegOrNan)];
    let mut d = Draft::new("diff", FLAGS);
    let g = c.sweep_csvs[0].text.clone();
    let f1 = d.file("old.csv", Kind::Csv, &g);
    let f2 = d.file("new.csv", Kind::Csv, &g);
    d.positional.push(f1);
    d.positional.push(f2);
    if rng.chance(30) {
        d.flag("--threshold", *rng.pick(&["0.02", "0.1", "0"]));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn corpus() -> Corpus {
        Corpus::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
            .expect("repository corpus")
    }

    #[test]
    fn the_same_seed_gives_the_same_cases() {
        let c = corpus();
        for i in 0..300 {
            assert_eq!(
                generate(&c, 21, i, &[]),
                generate(&c, 21, i, &[]),
                "case {i}"
            );
        }
        let differ = (0..50)
            .filter(|&i| generate(&c, 21, i, &[]) != generate(&c, 22, i, &[]))
            .count();
        assert!(
            differ > 40,
            "seeds 21 and 22 share {} of 50 cases",
            50 - differ
        );
    }

    #[test]
    fn every_command_and_mutation_count_is_drawn() {
        let c = corpus();
        let cases: Vec<Case> = (0..2000).map(|i| generate(&c, 1, i, &[])).collect();
        for (cmd, _) in COMMANDS {
            assert!(cases.iter().any(|k| k.command == *cmd), "{cmd} never drawn");
        }
        for n in 0..=3 {
            assert!(
                cases.iter().any(|k| k.mutations.len() == n),
                "never {n} mutations"
            );
        }
        assert!(cases.iter().any(|k| k.closed_stdout));
        assert!(cases.iter().any(|k| k.nonsense.is_some()));
    }

    #[test]
    fn commands_restrict_the_draw() {
        let c = corpus();
        let only = ["diff".to_owned(), "merge".to_owned()];
        assert!((0..200).all(|i| ["diff", "merge"].contains(&generate(&c, 3, i, &only).command)));
    }

    #[test]
    fn input_files_are_named_in_the_arguments() {
        let c = corpus();
        for i in 0..500 {
            let k = generate(&c, 5, i, &[]);
            for (name, _) in &k.files {
                assert!(
                    k.args.contains(name),
                    "case {i}: {name} not in {:?}",
                    k.args
                );
            }
        }
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("tp=8,pp=2"), "tp=8,pp=2");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b'c"), "'a b'\\''c'");
    }
}
