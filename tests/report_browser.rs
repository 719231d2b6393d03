//! The HTML report (`autoplan report`, `validate --html`) in a real browser: headless Chromium
//! loads it, must log no console error, must have run the page's script, shows every expected
//! section, and its screenshot is not blank. Without Chromium (`chromium` or
//! `chromium-browser` on PATH, or `AUTOPLAN_CHROMIUM`) the browser half prints why it is skipped;
//! `.ci/run` installs it. The file's determinism (same bytes for any thread count) and its
//! sections are checked without a browser.

use std::path::{Path, PathBuf};
use std::process::Command;

fn autoplan(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_autoplan"))
        .args(args)
        .output()
        .expect("run autoplan");
    assert!(
        out.status.success(),
        "autoplan {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report_browser");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AUTOPLAN_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Chromium's flags for a headless, sandbox-less, offline run.
fn headless(bin: &Path) -> Command {
    let mut c = Command::new(bin);
    let profile = scratch("profile");
    c.args([
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// The DOM after the page's script ran, failing on any console message of level error (or
/// an uncaught exception, which Chromium logs as one).
fn dump_dom(bin: &Path, html: &Path) -> String {
    let out = headless(bin)
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("run chromium");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(
        console.is_empty(),
        "console messages loading {}: {console:#?}",
        html.display()
    );
    assert!(out.status.success(), "chromium --dump-dom: {stderr}");
    String::from_utf8(out.stdout).expect("utf-8 DOM")
}

fn check_sections(dom: &str, ids: &[&str]) {
    for id in ids {
        assert!(
            dom.contains(&format!("id=\"{id}\"")),
            "section `{id}` missing"
        );
    }
}

#[test]
fn report_is_deterministic_and_renders_in_chromium() {
    let a = scratch("a.html");
    let b = scratch("b.html");
    let base = [
        "report",
        "--model",
        "deepseek-v3",
        "--cluster",
        "h800x2048",
        "--space",
        "quick",
        "--top",
        "5",
    ];
    let with = |threads: &str, out: &Path| {
        let mut v: Vec<&str> = base.to_vec();
        let o = out.to_str().unwrap().to_string();
        v.extend(["--threads", threads, "-o"]);
        let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        v.push(o);
        let refs: Vec<&str> = v.iter().map(String::as_str).collect();
        autoplan(&refs);
    };
    with("1", &a);
    with("3", &b);
    let (ta, tb) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert!(ta == tb, "the report differs between --threads 1 and 3");
    let text = String::from_utf8(ta).unwrap();
    let ids = [
        "summary",
        "ranking",
        "breakdown",
        "timeline",
        "communication",
        "memory",
    ];
    check_sections(&text, &ids);
    assert!(
        !text.contains("src=\"http") && !text.contains("href=\"http") && !text.contains("url(http"),
        "the report loads nothing from the network"
    );
    assert!(!text.contains("<script src"), "scripts are inline");

    let v = scratch("validate.html");
    autoplan(&["validate", "--html", v.to_str().unwrap()]);

    let Some(bin) = chromium() else {
        eprintln!("SKIPPED the browser half: no chromium on PATH (apt-get install chromium; .ci/run does)");
        return;
    };
    let dom = dump_dom(&bin, &a);
    check_sections(&dom, &ids);
    assert!(
        dom.contains("data-ready=\"1\""),
        "the page's script did not run to its end"
    );
    let vdom = dump_dom(&bin, &v);
    check_sections(&vdom, &["summary", "validation"]);
    assert!(vdom.contains("data-ready=\"1\""));

    let shot = scratch("shot.png");
    let _ = std::fs::remove_file(&shot);
    let out = headless(&bin)
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1280,1600")
        .arg(format!("file://{}", a.display()))
        .output()
        .expect("run chromium");
    assert!(
        shot.is_file(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(std::fs::File::open(&shot).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let bytes = &buf[..info.buffer_size()];
    let mut colours = std::collections::BTreeSet::new();
    let mut inked = 0usize;
    for p in bytes.chunks(px) {
        let rgb = (p[0], p[1], p[2]);
        colours.insert(rgb);
        if rgb != (255, 255, 255) {
            inked += 1;
        }
    }
    let total = bytes.len() / px;
    assert!(
        colours.len() >= 12,
        "screenshot has {} colours: blank?",
        colours.len()
    );
    assert!(
        inked * 20 > total,
        "screenshot is {inked} of {total} pixels inked: blank?"
    );
}
