//! The outcome classes of a case, and the classifier over a finished process.

use std::fmt;

/// What a case's run came to. The first six are failures the harness exists to find; the
/// rest are noted but not failures by default (see `--fail-on`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Exit 0 and nothing suspicious.
    Ok,
    /// Exit 1–4 with a message on stderr: the input was refused properly.
    Error,
    /// Exit 101 or "panicked at" on stderr.
    Panic,
    /// Killed by a signal (SIGABRT, SIGSEGV, ...) or "memory allocation of N bytes failed".
    Abort,
    /// Still running at the time limit (or flooding stdout): killed.
    Hang,
    /// Exit 0 with NaN or ±inf printed as a number (stdout or an output file).
    NonFinite,
    /// Exit 0 on an input holding a value the harness planted as impossible (a negative, NaN or
    /// infinite count/size/rate, or a knob given twice in a plan string).
    Nonsense,
    /// stdout was a pipe without a reader and the command failed saying so, instead of exiting
    /// quietly with 0.
    BrokenPipe,
    /// A non-zero exit outside 1–4 (and not 101), or a failure with nothing on stderr.
    OddExit,
}

impl Class {
    pub const ALL: [Class; 9] = [
        Class::Ok,
        Class::Error,
        Class::Panic,
        Class::Abort,
        Class::Hang,
        Class::NonFinite,
        Class::Nonsense,
        Class::BrokenPipe,
        Class::OddExit,
    ];

    /// The classes that fail a run unless `--fail-on` says otherwise.
    pub const DEFAULT_FAIL: [Class; 4] =
        [Class::Panic, Class::Abort, Class::Hang, Class::NonFinite];

    pub fn name(self) -> &'static str {
        match self {
            Class::Ok => "OK",
            Class::Error => "ERROR",
            Class::Panic => "PANIC",
            Class::Abort => "ABORT",
            Class::Hang => "HANG",
            Class::NonFinite => "NON-FINITE",
            Class::Nonsense => "ACCEPTED-NONSENSE",
            Class::BrokenPipe => "BROKEN-PIPE",
            Class::OddExit => "ODD-EXIT",
        }
    }

    pub fn parse(s: &str) -> Option<Class> {
        Class::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
    }

    /// Worth a reproduction directory: everything but a clean success or a clean error.
    pub fn is_finding(self) -> bool {
        !matches!(self, Class::Ok | Class::Error)
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Exit(i32),
    Signal(i32),
    /// Killed by the harness: past the time limit, or stdout past its size limit.
    Killed,
}

/// What the classifier looks at.
pub struct Observed<'a> {
    pub end: End,
    pub stdout: &'a [u8],
    pub stderr: &'a [u8],
    /// The files the command was asked to write (sweep/merge/search `--out`), as far as read.
    pub outputs: &'a [Vec<u8>],
    /// stdout was a pipe with no reader.
    pub closed_stdout: bool,
    /// Why the input is impossible, when the harness planted such a value.
    pub nonsense: Option<&'a str>,
    /// Non-zero exit codes that are a result, not a failure, when stderr is empty (`diff` exits
    /// 1 when the sweeps differ, as diff(1)).
    pub result_codes: &'a [i32],
}

/// Classify a finished case; the second value is a one-line detail for the report.
pub fn classify(o: &Observed) -> (Class, String) {
    let stderr = String::from_utf8_lossy(o.stderr);
    let first_err = first_line(&stderr);
    if o.end == End::Killed {
        return (Class::Hang, "killed at the time or output limit".to_owned());
    }
    if let Some(l) = stderr.lines().find(|l| l.contains("panicked at")) {
        let msg = stderr.lines().skip_while(|x| *x != l).nth(1).unwrap_or("");
        return (Class::Panic, format!("{} {}", l.trim(), msg.trim()));
    }
    if o.end == End::Exit(101) {
        return (Class::Panic, format!("exit 101: {first_err}"));
    }
    if let Some(l) = stderr.lines().find(|l| l.contains("memory allocation of")) {
        return (Class::Abort, l.trim().to_owned());
    }
    if let End::Signal(s) = o.end {
        return (
            Class::Abort,
            format!("killed by signal {s} ({}) {first_err}", signal_name(s)),
        );
    }
    let result = match o.end {
        End::Exit(0) => true,
        End::Exit(c) => o.result_codes.contains(&c) && stderr.trim().is_empty(),
        _ => false,
    };
    if result {
        let mut found = non_finite_tokens(&String::from_utf8_lossy(o.stdout));
        for out in o.outputs {
            found.extend(non_finite_tokens(&String::from_utf8_lossy(out)));
        }
        if let Some(t) = found.first() {
            return (
                Class::NonFinite,
                format!("`{t}` in the output ({} in all)", found.len()),
            );
        }
        if let Some(why) = o.nonsense {
            return (Class::Nonsense, format!("exit 0 with {why}"));
        }
        return (Class::Ok, String::new());
    }
    if o.closed_stdout && (stderr.contains("Broken pipe") || stderr.contains("os error 32")) {
        return (Class::BrokenPipe, first_err.to_owned());
    }
    match o.end {
        End::Exit(c @ 1..=4) if !stderr.trim().is_empty() => {
            (Class::Error, format!("exit {c}: {first_err}"))
        }
        End::Exit(c) => (Class::OddExit, format!("exit {c}: {first_err}")),
        _ => unreachable!("handled above"),
    }
}

fn first_line(s: &str) -> &str {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

fn signal_name(s: i32) -> &'static str {
    match s {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => "signal",
    }
}

/// The tokens of `text` that are a non-finite number: NaN, inf, infinity (any case, signed,
/// with a trailing `%` or `.`). A token is a run of letters, digits and `_ . + -`, so words that
/// merely contain the letters ("info", "Infeasible", "inference", "nan_count") are not matched.
/// Text between double quotes or backticks is skipped: autoplan quotes an input value it echoes
/// back in an error or a skip reason (`algorithm "-inf" not mapped`, ``gpus_per_node `-inf`:
/// negative``), which is the fuzzer's own text, not a computed number.
pub fn non_finite_tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let drop_quoted = |t: &str, q: char| {
        t.split(q)
            .enumerate()
            .map(|(i, part)| if i % 2 == 0 { part } else { " " })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let unquoted = drop_quoted(&drop_quoted(text, '"'), '`');
    for tok in
        unquoted.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '+' | '-')))
    {
        let t = tok
            .trim_end_matches(['.', '%'])
            .trim_start_matches(['+', '-']);
        if matches!(t.to_ascii_lowercase().as_str(), "nan" | "inf" | "infinity") {
            out.push(tok.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs<'a>(end: End, stdout: &'a str, stderr: &'a str) -> Observed<'a> {
        Observed {
            end,
            stdout: stdout.as_bytes(),
            stderr: stderr.as_bytes(),
            outputs: &[],
            closed_stdout: false,
            nonsense: None,
            result_codes: &[],
        }
    }

    #[test]
    fn words_are_not_non_finite_numbers() {
        let text =
            "info: Infeasible plan; inference at 12.5 µs, nan_count=0, infinite-loop guard, \
                    Info INF_X gpt-oss-120b 1e308";
        assert_eq!(non_finite_tokens(text), Vec::<String>::new());
    }

    #[test]
    fn quoted_echoes_of_the_input_are_not_numbers() {
        assert_eq!(
            non_finite_tokens("c18 not expressible: algorithm \"-inf\" not mapped; t=nan"),
            ["nan"]
        );
        assert_eq!(
            non_finite_tokens(
                "c03 skipped: gpus_per_node `-inf`: negative; no cluster for `nan`; x=inf"
            ),
            ["inf"]
        );
    }

    #[test]
    fn nan_and_inf_numbers_are_found() {
        assert_eq!(non_finite_tokens("step time NaN µs"), ["NaN"]);
        assert_eq!(
            non_finite_tokens("headroom inf GiB, -inf%, x=+inf."),
            ["inf", "-inf", "+inf."]
        );
        assert_eq!(
            non_finite_tokens("1,NaN,inf\n[Infinity]"),
            ["NaN", "inf", "Infinity"]
        );
    }

    #[test]
    fn the_classes_of_canned_outcomes() {
        let c = |o: &Observed| classify(o).0;
        assert_eq!(
            c(&obs(End::Exit(0), "step time 1.2 s (fits)\n", "")),
            Class::Ok
        );
        assert_eq!(
            c(&obs(End::Exit(0), "Infeasible: info only\n", "")),
            Class::Ok
        );
        assert_eq!(
            c(&obs(End::Exit(0), "step time NaN µs … (fits)\n", "")),
            Class::NonFinite
        );
        assert_eq!(
            c(&obs(
                End::Exit(2),
                "",
                "error: layers must be in 1..=1024\n"
            )),
            Class::Error
        );
        assert_eq!(c(&obs(End::Exit(2), "", "")), Class::OddExit);
        assert_eq!(c(&obs(End::Exit(7), "", "error: x\n")), Class::OddExit);
        assert_eq!(
            c(&obs(
                End::Exit(101),
                "",
                "thread 'main' panicked at src/x.rs:1:2:\ncapacity overflow\n"
            )),
            Class::Panic
        );
        assert_eq!(c(&obs(End::Exit(101), "", "")), Class::Panic);
        assert_eq!(
            c(&obs(
                End::Signal(6),
                "",
                "memory allocation of 412 bytes failed\n"
            )),
            Class::Abort
        );
        assert_eq!(c(&obs(End::Signal(11), "", "")), Class::Abort);
        assert_eq!(c(&obs(End::Killed, "", "")), Class::Hang);
        // A non-finite number in a failing run's message is not a NON-FINITE output.
        assert_eq!(
            c(&obs(End::Exit(2), "", "error: --reserve nan: not finite\n")),
            Class::Error
        );
    }

    #[test]
    fn a_panic_report_carries_its_message() {
        let (class, detail) = classify(&obs(
            End::Exit(101),
            "",
            "thread 'main' panicked at crates/search/src/engine.rs:9:5:\ncapacity overflow\nnote: ...\n",
        ));
        assert_eq!(class, Class::Panic);
        assert!(
            detail.contains("engine.rs:9:5") && detail.contains("capacity overflow"),
            "{detail}"
        );
    }

    #[test]
    fn outputs_files_nonsense_and_pipes() {
        let outs = vec![b"a,b\n1,NaN\n".to_vec()];
        let mut o = obs(End::Exit(0), "wrote out.csv\n", "");
        o.outputs = &outs;
        assert_eq!(classify(&o).0, Class::NonFinite);
        let mut o = obs(End::Exit(0), "ok\n", "");
        o.nonsense = Some("`hbm_gib` set to -1");
        assert_eq!(classify(&o).0, Class::Nonsense);
        let mut o = obs(End::Exit(2), "", "error: Broken pipe (os error 32)\n");
        o.closed_stdout = true;
        assert_eq!(classify(&o).0, Class::BrokenPipe);
        let mut o = obs(End::Exit(0), "", "");
        o.closed_stdout = true;
        assert_eq!(classify(&o).0, Class::Ok);
        // `diff` exits 1 when the sweeps differ: a result, scanned like exit 0.
        let mut o = obs(End::Exit(1), "1 metric shift(s)\n", "");
        o.result_codes = &[1];
        assert_eq!(classify(&o).0, Class::Ok);
        o.stdout = b"shift NaN%\n";
        assert_eq!(classify(&o).0, Class::NonFinite);
        o.stderr = b"error: old.csv:3: bad field\n";
        assert_eq!(classify(&o).0, Class::Error);
    }

    #[test]
    fn class_names_round_trip() {
        for c in Class::ALL {
            assert_eq!(Class::parse(c.name()), Some(c));
        }
        assert_eq!(Class::parse("non-finite"), Some(Class::NonFinite));
    }
}
