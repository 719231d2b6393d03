//! `autoplan show --model` and `autoplan models` (not built yet).

use std::process::ExitCode;

use super::Format;

pub fn run(_name: &str, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`show --model` is not implemented yet")
}

pub fn list() -> anyhow::Result<ExitCode> {
    anyhow::bail!("`models` is not implemented yet")
}
