//! The `autoplan` command line. Only this binary (and `autoplan`'s library half, `lib.rs`) does
//! IO: reading files, printing, progress bars, exit codes.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use autoplan::cmd;

#[derive(Parser)]
#[command(
    name = "autoplan",
    version,
    about = "Plan how to train large dense and MoE transformers on GPU clusters",
    after_help = autoplan::exit::AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Search the best parallel plans for a model on a cluster (the main job).
    Search(cmd::search::Args),
    /// Evaluate one plan: step time, per-layer communication, memory.
    Evaluate(cmd::evaluate::Args),
    /// Compare predictions with published measured training runs.
    Validate(cmd::validate::Args),
    /// Cost one collective with every valid algorithm, or validate against measurements.
    Collective(cmd::collective::Args),
    /// Place MoE experts (and replicas) on an EP group to minimise all-to-all time.
    PlaceExperts(cmd::place_experts::Args),
    /// Write one plan's (or a search's) self-contained HTML report.
    Report(cmd::report::Args),
    /// Run a model × cluster × workload grid to CSV.
    Sweep(cmd::sweep::Args),
    /// Merge sharded sweep CSVs into the unsharded output.
    Merge(cmd::sweep::MergeArgs),
    /// Compare two sweep CSVs.
    Diff(cmd::sweep::DiffArgs),
    /// Show a model or a cluster.
    Show(cmd::show::Args),
    /// List the bundled models.
    Models,
    /// List the bundled clusters.
    Clusters,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Search(a) => cmd::search::run(a),
        Command::Evaluate(a) => cmd::evaluate::run(a),
        Command::Validate(a) => cmd::validate::run(a),
        Command::Collective(a) => cmd::collective::run(a),
        Command::PlaceExperts(a) => cmd::place_experts::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Sweep(a) => cmd::sweep::run(a),
        Command::Merge(a) => cmd::sweep::merge(a),
        Command::Diff(a) => cmd::sweep::diff(a),
        Command::Show(a) => cmd::show::run(a),
        Command::Models => cmd::show::models(),
        Command::Clusters => cmd::show::clusters(),
    };
    autoplan::exit::finish(result)
}
