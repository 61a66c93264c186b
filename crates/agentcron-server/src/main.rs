//! `agentcron`, the binary.
//!
//! # Layout
//! - `main.rs` (this file): the command line — argument parsing (clap) and
//!   the one-line error report.
//! - `cron_cmd`: `agentcron cron next` and `agentcron cron explain`, the
//!   cron engine from the shell.
//! - `serve`: the daemon — opens the database, brings `[[task]]`s up to date,
//!   runs the engine until SIGTERM/SIGINT, stops gracefully.
//! - `config`: defaults < `agentcron.toml` < `AGENTCRON_*` < flags.
//! - `api`: the HTTP API, errors as `application/problem+json`; `openapi`:
//!   its OpenAPI 3.1 document; `auth`: API tokens and `token create`.
//! - `client`: `task …`, `runs …`, `nodes` against a running server's API;
//!   `declare`: `apply` and `export`.
//!
//! The dashboard, metrics and MCP arrive with their issues; see
//! `docs/architecture.md`.

#![forbid(unsafe_code)]

mod api;
mod auth;
mod client;
mod config;
mod cron_cmd;
mod declare;
mod openapi;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// agentcron: a scheduler that gives AI agents a calendar.
#[derive(Debug, Parser)]
#[command(name = "agentcron", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the scheduler (default database: sqlite://agentcron.db).
    Serve(config::Flags),
    /// Work with cron expressions: next fire times, descriptions.
    #[command(subcommand)]
    Cron(cron_cmd::CronCommand),
    /// Tasks on a running server.
    Task {
        #[command(flatten)]
        target: client::Target,
        #[command(subcommand)]
        cmd: Box<client::TaskCommand>,
    },
    /// Runs on a running server.
    Runs {
        #[command(flatten)]
        target: client::Target,
        #[command(subcommand)]
        cmd: client::RunsCommand,
    },
    /// The nodes that ran the engine on the server's database.
    Nodes {
        #[command(flatten)]
        target: client::Target,
    },
    /// API tokens.
    #[command(subcommand)]
    Token(auth::TokenCommand),
    /// Make the server's tasks match a file of `[[task]]` tables.
    Apply {
        #[command(flatten)]
        target: client::Target,
        /// The file (TOML, or JSON by extension; `-` for stdin).
        #[arg(short = 'f', long, value_name = "FILE")]
        file: std::path::PathBuf,
        /// Also delete tasks on the server that the file does not name.
        #[arg(long)]
        prune: bool,
        /// Show the plan only.
        #[arg(long)]
        dry_run: bool,
    },
    /// Write the server's tasks as `[[task]]` tables (what apply reads).
    Export {
        #[command(flatten)]
        target: client::Target,
        /// Write to this file instead of standard output.
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
    },
    /// Print a shell completion script: source it, or install it where your
    /// shell looks (e.g. ~/.local/share/bash-completion/completions/agentcron).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Runs a client command on a small runtime.
fn block_on(f: impl std::future::Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?
        .block_on(f)
}

fn serve_main(flags: &config::Flags) -> anyhow::Result<()> {
    let config = config::Config::load(flags, std::env::vars())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    runtime.block_on(serve::run(config))
}

/// A failure the user caused (bad expression, zone, timestamp): exit status 2.
#[derive(Debug)]
pub(crate) struct UsageError(pub(crate) String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Cron(cmd) => cron_cmd::run(cmd, &mut std::io::stdout().lock()),
        Command::Serve(flags) => serve_main(&flags),
        Command::Task { target, cmd } => {
            block_on(client::task(*cmd, &target, &mut std::io::stdout().lock()))
        }
        Command::Runs { target, cmd } => {
            block_on(client::runs(cmd, &target, &mut std::io::stdout().lock()))
        }
        Command::Token(cmd) => auth::run(cmd, &mut std::io::stdout().lock()),
        Command::Apply {
            target,
            file,
            prune,
            dry_run,
        } => block_on(declare::apply(
            &target,
            &file,
            prune,
            dry_run,
            &mut std::io::stdout().lock(),
        )),
        Command::Export { target, output } => block_on(declare::export(
            &target,
            output,
            &mut std::io::stdout().lock(),
        )),
        Command::Completions { shell } => {
            use clap::CommandFactory as _;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "agentcron",
                &mut std::io::stdout().lock(),
            );
            Ok(())
        }
        Command::Nodes { target } => {
            block_on(client::nodes(&target, &mut std::io::stdout().lock()))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // One line, with every cause in the chain.
            let line = err
                .chain()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(": ");
            eprintln!("agentcron: {line}");
            if err.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
