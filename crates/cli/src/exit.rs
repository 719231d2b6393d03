//! Exit codes: one scheme for every command, decided here once.
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | success (also: stdout was closed early, e.g. `autoplan search \| head`) |
//! | 1 | a comparison found differences: `diff`, `collective --validate` rows out of tolerance |
//! | 2 | bad input: flags, malformed or implausible files, plans that do not parse or are invalid for the model and cluster, a result that is not a finite number |
//! | 3 | infeasible: the input is valid but nothing fits in memory or no valid plan exists |
//! | 4 | I/O: a file cannot be read or written, an output is locked or refused |
//!
//! Commands return `Ok(code)` for 0 and 1 only; everything else is an error, classified by
//! [`classify`]: an [`Infeasible`] anywhere in the error's chain is 3, a `std::io::Error` (also
//! inside a `csv` or `serde_json` error) is 4, anything else 2. A broken pipe on stdout is not
//! an error: the command stops quietly with 0.

use std::process::ExitCode;

/// Success.
pub const SUCCESS: u8 = 0;
/// A comparison found differences (diff(1)'s convention).
pub const DIFFERENCES: u8 = 1;
/// Bad input: flags, files, plans.
pub const BAD_INPUT: u8 = 2;
/// Valid input, but nothing fits or no valid plan exists.
pub const INFEASIBLE: u8 = 3;
/// A file cannot be read or written.
pub const IO: u8 = 4;

/// The exit-code table as `autoplan --help` prints it after the commands.
pub const AFTER_HELP: &str = "\
Exit status:
  0  success (a closed stdout, e.g. `autoplan search ... | head`, is not an error)
  1  differences found: `diff`, or `collective --validate` rows out of tolerance
  2  bad input: a flag, a malformed or implausible file, a plan that does not parse or is
     invalid for the model and cluster
  3  infeasible: the input is valid but no plan fits in memory or no valid plan exists
     (`search` finds nothing, `evaluate` runs out of memory)
  4  I/O error: a file cannot be read or written, an output is locked or refused";

/// The input is valid but has no feasible answer: nothing fits in memory, no valid plan.
/// `message` is printed as `error: {message}`; `None` when the command already said why (on
/// stderr, or as JSON on stdout).
#[derive(Debug)]
pub struct Infeasible {
    pub message: Option<String>,
}

impl Infeasible {
    /// Infeasible, with the reason to print.
    pub fn new(message: impl Into<String>) -> Self {
        Infeasible {
            message: Some(message.into()),
        }
    }

    /// Infeasible, the reason already reported by the command.
    pub fn reported() -> Self {
        Infeasible { message: None }
    }
}

impl std::fmt::Display for Infeasible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message.as_deref().unwrap_or("infeasible"))
    }
}

impl std::error::Error for Infeasible {}

/// How an error ends the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Stdout was closed by the reader: exit 0, print nothing.
    BrokenPipe,
    /// Exit 3; print the message unless the command already did.
    Infeasible { quiet: bool },
    /// Exit 4.
    Io,
    /// Exit 2.
    BadInput,
}

impl Class {
    /// The process exit code of the class.
    pub fn code(self) -> u8 {
        match self {
            Class::BrokenPipe => SUCCESS,
            Class::Infeasible { .. } => INFEASIBLE,
            Class::Io => IO,
            Class::BadInput => BAD_INPUT,
        }
    }
}

/// The kind of the `std::io::Error` a cause is or wraps (csv and serde_json errors hide theirs).
fn io_kind(cause: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    if let Some(e) = cause.downcast_ref::<std::io::Error>() {
        return Some(e.kind());
    }
    if let Some(e) = cause.downcast_ref::<serde_json::Error>() {
        return e.io_error_kind();
    }
    if let Some(e) = cause.downcast_ref::<csv::Error>() {
        if let csv::ErrorKind::Io(io) = e.kind() {
            return Some(io.kind());
        }
    }
    None
}

/// Classify an error by its chain (see the module docs).
pub fn classify(err: &anyhow::Error) -> Class {
    let kinds: Vec<std::io::ErrorKind> = err.chain().filter_map(io_kind).collect();
    if kinds.contains(&std::io::ErrorKind::BrokenPipe) {
        return Class::BrokenPipe;
    }
    if let Some(i) = err.chain().find_map(|c| c.downcast_ref::<Infeasible>()) {
        return Class::Infeasible {
            quiet: i.message.is_none(),
        };
    }
    if !kinds.is_empty() {
        return Class::Io;
    }
    Class::BadInput
}

/// End the process for `result`: the command's own code, or the error printed on stderr (as
/// `error: ...`, the whole chain) and its class's code.
pub fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    let err = match result {
        Ok(code) => return code,
        Err(err) => err,
    };
    let class = classify(&err);
    match class {
        Class::BrokenPipe | Class::Infeasible { quiet: true } => {}
        _ => eprintln!("error: {err:#}"),
    }
    ExitCode::from(class.code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn classes() {
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let e = anyhow::Error::from(pipe).context("writing");
        assert_eq!(classify(&e), Class::BrokenPipe);
        let json = serde_json::to_writer(Broken, &1).unwrap_err();
        assert_eq!(classify(&anyhow::Error::from(json)), Class::BrokenPipe);
        let nf: anyhow::Result<()> = Err(std::io::Error::from(std::io::ErrorKind::NotFound).into());
        assert_eq!(classify(&nf.context("x.toml").unwrap_err()), Class::Io);
        let inf = anyhow::Error::from(Infeasible::new("nothing fits")).context("search");
        assert_eq!(classify(&inf), Class::Infeasible { quiet: false });
        assert_eq!(Class::Infeasible { quiet: true }.code(), 3);
        assert_eq!(classify(&anyhow::anyhow!("--top 0")), Class::BadInput);
    }

    struct Broken;
    impl std::io::Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
