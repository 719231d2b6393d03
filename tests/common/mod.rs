//! What the end-to-end CLI tests share: running the built `autoplan` binary.

use std::process::Command;

pub mod cases;
pub mod plans;

/// Run `autoplan ARGS`: its exit code (None when killed by a signal), stdout and stderr.
#[allow(dead_code)] // not every test binary that shares `cases` runs the CLI
pub fn autoplan(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_autoplan"))
        .args(args)
        .output()
        .expect("run autoplan");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
