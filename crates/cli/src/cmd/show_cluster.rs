//! `autoplan show --cluster` and `autoplan clusters` (not built yet).

use std::process::ExitCode;

use super::Format;

pub fn run(_name: &str, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`show --cluster` is not implemented yet")
}

pub fn list() -> anyhow::Result<ExitCode> {
    anyhow::bail!("`clusters` is not implemented yet")
}
