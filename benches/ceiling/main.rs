//! A trivial lock server in a process of its own, for the ceiling rows of
//! `cargo bench --bench locks` (`--ceiling on`): our framing, encoding and
//! handshake, every request answered at once as granted, no lock table
//! (`quorum_lock::net::ceiling`).
//!
//! Usage: `ceiling-server --listen ADDR --token-file PATH [--threads N]`.
//! Prints `listening on ADDR` as its first line, as `quorum-lock server`
//! does. `--threads 0` runs a current-thread runtime, otherwise a
//! multi-thread runtime with N workers (default 0).

use std::io::Write;

use context::Context;

#[path = "../context.rs"]
mod context;

fn main() {
    if let Err(err) = run() {
        eprintln!("ceiling-server: {err}");
        std::process::exit(2);
    }
}

/// The servers are started by the harness, which always gives a token file.
#[derive(clap::Parser)]
struct Args {
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    #[arg(long)]
    token_file: String,
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

fn run() -> Result<(), String> {
    let args = <Args as clap::Parser>::try_parse().map_err(|e| e.to_string())?;
    let (listen, token_file, threads) = (args.listen, args.token_file, args.threads);
    let token = std::fs::read_to_string(&token_file)
        .map_err(|e| format!("cannot read {token_file}: {e}"))?
        .trim()
        .to_owned();
    let runtime = if threads == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
    .context("cannot start a runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        let addr = listener.local_addr().context("no local address")?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "listening on {addr}").map_err(|e| e.to_string())?;
            out.flush().map_err(|e| e.to_string())?;
        }
        quorum_lock::net::ceiling::serve(listener, token).await;
        Ok(())
    })
}
