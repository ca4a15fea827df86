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

fn run() -> Result<(), String> {
    let mut listen = "127.0.0.1:0".to_owned();
    let mut token_file = None;
    let mut threads = 0usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--listen" => listen = value()?,
            "--token-file" => token_file = Some(value()?),
            "--threads" => {
                threads = value()?.parse().context("--threads")?;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let token_file = token_file.ok_or("--token-file is required")?;
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
