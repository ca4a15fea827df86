//! `quorum-lock`: run a lock server, run a command under a distributed
//! lock (on lock servers, Redis nodes, databases, or a mix) or while
//! leading an election, list locks and force them open, show the nodes'
//! status, make TLS certificates. `quorum-lock --help`
//! documents every flag and the exit codes.

mod admin;
mod args;
mod certs;
mod child;
mod client;
mod elect;
mod fail;
mod fleet;
mod grouped_admin;
mod help;
mod hold;
mod json;
mod metrics_http;
mod node_groups;
mod node_urls;
mod nodes;
#[cfg(test)]
mod parser_properties;
mod plan;
mod redis_nodes;
mod resource_homes;
mod run;
mod server;
mod server_nodes;
mod shared_nodes;
mod signals;
mod sql_nodes;
mod status;
mod target;
mod waiting;
mod words;

use std::process::ExitCode;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use args::{Cli, Command};
use fail::{Failure, FAILURE, USAGE};
use signals::Signals;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => match err.kind() {
            ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => err.exit(),
            _ => {
                words::say(&format!(
                    "{} (see --help)",
                    usage_error(&err.render().to_string())
                ));
                return ExitCode::from(USAGE);
            }
        },
    };
    let is_server = matches!(cli.command, Command::Server(_));
    init_logging(is_server);

    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if !is_server {
        // A client makes a handful of calls at a time.
        builder.worker_threads(2);
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            words::say(&format!("cannot start the async runtime: {err}"));
            return ExitCode::from(FAILURE);
        }
    };
    let result = runtime.block_on(dispatch(cli.command));
    // Reconnect loops and other background tasks never finish on their own;
    // everything that matters was awaited above.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            words::say(&failure.to_string());
            ExitCode::from(failure.code)
        }
    }
}

/// `quorum-lock help [COMMAND]`: exactly what `quorum-lock [COMMAND]
/// --help` prints, by asking clap for that.
fn help(command: Option<&str>) -> Result<u8, Failure> {
    let argv = ["quorum-lock"].into_iter().chain(command).chain(["--help"]);
    match Cli::command().try_get_matches_from(argv) {
        Err(err) if err.kind() == ErrorKind::DisplayHelp => {
            err.print()
                .map_err(|e| Failure::new(FAILURE, format!("cannot print the help: {e}")))?;
            Ok(0)
        }
        Err(err) => Err(Failure::usage(format!(
            "{} (see --help)",
            usage_error(&err.render().to_string())
        ))),
        // `--help` always ends the parse with the help.
        Ok(_) => Ok(0),
    }
}

/// Clap's report of a usage error, on one line and without the password
/// of any URL it quotes: a node URL given without its flag, or with a
/// mistyped one, is quoted whole. The arguments and the `QUORUM_LOCK_*`
/// variables are what it can quote.
fn usage_error(clap_report: &str) -> String {
    let args = std::env::args_os().map(|a| a.to_string_lossy().into_owned());
    let vars = std::env::vars_os()
        .filter(|(name, _)| name.to_string_lossy().starts_with("QUORUM_LOCK_"))
        .map(|(_, value)| value.to_string_lossy().into_owned());
    let given: Vec<String> = args.chain(vars).collect();
    // Before the report is joined into one line, while a quoted argument
    // that holds a line break is still as given; and after, for the words
    // that joining made.
    let report = node_urls::without_urls(clap_report, given.clone());
    node_urls::without_urls(&fail::one_line(&report), given)
}

async fn dispatch(command: Command) -> Result<u8, Failure> {
    match command {
        Command::Server(args) => server::serve(args).await.map(|()| 0),
        Command::Run(args) => {
            // Installed before connecting: from here on a Ctrl-C must stop
            // the command and release the lock, not kill us outright.
            let signals = Signals::install().map_err(|e| {
                Failure::new(FAILURE, format!("cannot install signal handlers: {e}"))
            })?;
            run::run(args, signals).await
        }
        Command::Lock(args) => {
            // As for `run`: a Ctrl-C is how the lock is given back.
            let signals = Signals::install().map_err(|e| {
                Failure::new(FAILURE, format!("cannot install signal handlers: {e}"))
            })?;
            hold::hold(args, signals).await
        }
        Command::Elect(args) => {
            // As for `run`: a Ctrl-C must stop the command and resign, or
            // end --listen with 0.
            let signals = Signals::install().map_err(|e| {
                Failure::new(FAILURE, format!("cannot install signal handlers: {e}"))
            })?;
            elect::elect(args, signals).await
        }
        Command::Locks(args) => grouped_admin::locks(args).await,
        Command::ForceUnlock(args) => grouped_admin::force_unlock(args).await,
        Command::Status(args) => status::status(args).await,
        Command::Certs(args) => certs::certs(args),
        Command::Help(args) => help(args.command.as_deref()),
    }
}

/// Logs go to stderr so that stdout stays machine-readable. The server logs
/// at info by default; clients stay silent unless RUST_LOG asks, because
/// their failures are reported as one line each. RUST_LOG is a level
/// (`debug`) or a list of `target=level` (`quorum_lock=debug,warn`); one
/// that does not parse leaves the default. (A plain target filter, not
/// tracing-subscriber's regex-based `EnvFilter`: it spares every build of
/// the command line the regex crates.)
fn init_logging(is_server: bool) {
    let default = if is_server {
        LevelFilter::INFO
    } else {
        LevelFilter::OFF
    };
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|asked| asked.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(default));
    // The formatter alone lets everything through (its own default stops
    // at info); the target filter decides.
    let _ = tracing_subscriber::fmt()
        .with_max_level(LevelFilter::TRACE)
        .with_writer(words::LogWriter)
        .with_ansi(false)
        .finish()
        .with(filter)
        .try_init();
}
