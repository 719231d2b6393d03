//! Every plan `autoplan search` prints is accepted back: by the plan parser (`evaluate --plan`),
//! which re-prints it identically, and by `search --fix`, knob by knob, each fix restricting the
//! space to exactly the plan's value; and it evaluates to the metrics the ranking showed. The
//! cases are the goldens' (`tests/golden/search_*.txt`, read from their header line), searched
//! again here.

use autoplan::cluster::resolve_cluster;
use autoplan::evaluate::EvalOptions;
use autoplan::graph::resolve_model;
use autoplan::plan::{Knob, Plan};
use autoplan::search::{resolve_space, search_case_for, SearchOptions, Target};

/// (model, cluster, space, top) of every golden, from its header
/// `# autoplan search --model M --cluster C --space S --top K`, and the file's plan strings.
fn cases() -> Vec<([String; 3], usize, Vec<String>)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("tests/golden")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("golden");
        let header = text.lines().next().unwrap_or_default();
        let words: Vec<&str> = header.split_whitespace().collect();
        let arg = |flag: &str| {
            let i = words.iter().position(|w| *w == flag);
            let v = i.and_then(|i| words.get(i + 1));
            v.unwrap_or_else(|| panic!("{}: no {flag} in {header:?}", path.display()))
                .to_string()
        };
        let top = arg("--top").parse().expect("--top N");
        let plans = text
            .lines()
            .skip(1)
            .map(|l| l.rsplit(' ').next().unwrap_or_default().to_string())
            .collect();
        out.push((
            [arg("--model"), arg("--cluster"), arg("--space")],
            top,
            plans,
        ));
    }
    out
}

#[test]
fn printed_plans_parse_reprint_fix_and_evaluate_alike() {
    let cases = cases();
    assert!(cases.len() >= 4, "{} golden cases", cases.len());
    for ([model, cluster, space], top, golden) in cases {
        let case = format!("{model} on {cluster}, space {space}");
        let m = resolve_model(&model).expect("bundled model");
        let c = resolve_cluster(&cluster).expect("bundled cluster");
        let sp = resolve_space(&space).expect("bundled space");
        // As the goldens are made: `autoplan search`'s default framework, its cost profile,
        // and headroom.
        let found = search_case_for(
            &m,
            &c,
            EvalOptions::default()
                .with_profile(&Target::default().framework.profile(), m.training.precision),
            Target::default(),
            &sp,
            &SearchOptions {
                top_k: top,
                exhaustive: false,
            },
            &(),
        )
        .expect("the default framework runs plans of the space");
        let (scorer, out) = (found.scorer, found.outcome);
        assert!(!out.plans.is_empty(), "{case}: no plan");
        let printed: Vec<String> = out.plans.iter().map(|r| r.plan.to_string()).collect();
        assert_eq!(printed, golden, "{case}: the golden is stale");
        for (r, text) in out.plans.iter().zip(&printed) {
            // `evaluate --plan`: parses to the same plan, re-prints identically.
            let parsed: Plan = text
                .parse()
                .unwrap_or_else(|e| panic!("{case}: {text}: {e}"));
            assert_eq!(parsed, r.plan, "{case}: {text}");
            assert_eq!(&parsed.to_string(), text, "{case}");
            let for_gpus = Plan::parse_for_gpus(text, c.gpus() as u64)
                .unwrap_or_else(|e| panic!("{case}: {text}: {e}"));
            assert_eq!(for_gpus, r.plan, "{case}: {text}");
            // `--fix`, one knob at a time: accepted, and the space keeps exactly the plan's
            // value (the knobs the string leaves out are `Plan::default()`'s on both sides).
            let mut rebuilt = Plan::default();
            for item in text.split(',') {
                let mut fixed = sp.clone();
                fixed
                    .fix(item)
                    .unwrap_or_else(|e| panic!("{case}: {text}: {e}"));
                let key = item.split('=').next().unwrap_or_default();
                let knob = Knob::from_key(key).expect("a plan key");
                if knob == Knob::Dp {
                    assert_eq!(fixed.dp, Some(r.plan.dp), "{case}: {item}");
                    rebuilt.dp = r.plan.dp;
                } else {
                    assert_eq!(fixed.count(knob), 1, "{case}: {item}");
                    fixed.set(knob, 0, &mut rebuilt);
                }
            }
            assert_eq!(rebuilt, r.plan, "{case}: {text}");
            // The same metrics, bit for bit.
            let again = scorer
                .exact
                .evaluate(&parsed)
                .unwrap_or_else(|e| panic!("{case}: {text}: {e}"));
            assert_eq!(again, r.metrics, "{case}: {text}");
        }
    }
}
