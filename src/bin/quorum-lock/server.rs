//! `quorum-lock server`: one node's lock table behind a `LockServer`.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use quorum_lock::net::{LockServer, ServerConfig};
use quorum_lock::{LocalLocker, LockerConfig};
use tokio::net::TcpListener;

use crate::args::ServerArgs;
use crate::fail::{Failure, FAILURE};
use crate::nodes::load_token;
use crate::signals::Signals;

pub async fn serve(args: ServerArgs) -> Result<(), Failure> {
    let addr: SocketAddr = args.listen.trim().parse().map_err(|e| {
        Failure::usage(format!(
            "bad --listen address '{}': {e} (expected ip:port, e.g. 127.0.0.1:7070)",
            args.listen
        ))
    })?;
    let token = load_token(
        args.tokens.token_file.as_deref(),
        args.tokens.token.as_deref(),
        "token",
    )?
    .ok_or_else(|| {
        Failure::usage("no client token: pass --token-file FILE or set QUORUM_LOCK_TOKEN")
    })?;
    let admin = load_token(
        args.tokens.admin_token_file.as_deref(),
        args.tokens.admin_token.as_deref(),
        "admin token",
    )?;
    let mut config = ServerConfig::new(token);
    if let Some(admin) = admin {
        config = config.admin_token(admin);
    }
    config.handshake_timeout = args.handshake_timeout;
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let read = |path: &std::path::Path| {
            std::fs::read(path)
                .map_err(|e| Failure::usage(format!("cannot read {}: {e}", path.display())))
        };
        let tls = quorum_lock::net::ServerTls::from_pem(&read(cert)?, &read(key)?)
            .map_err(|e| Failure::usage(e.to_string()))?;
        config = config.tls(tls);
    }

    // Handlers first: a SIGTERM that arrives while binding must still shut
    // us down cleanly rather than kill the process mid-way.
    let mut signals = Signals::install()
        .map_err(|e| Failure::new(FAILURE, format!("cannot install signal handlers: {e}")))?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| Failure::new(FAILURE, format!("cannot listen on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Failure::new(FAILURE, format!("cannot read the bound address: {e}")))?;

    // The quarantine equals the validity: after that long, every lock this
    // node granted before a crash has been refreshed here or given up.
    let locker = Arc::new(LocalLocker::with_config(
        local.to_string(),
        LockerConfig {
            validity: args.validity,
            quarantine: args.validity,
        },
    ));
    // Checked before anything is logged, so a bad configuration fails
    // with its one line only.
    let server =
        LockServer::new(locker.clone(), config).map_err(|e| Failure::usage(e.to_string()))?;
    if args.no_quarantine {
        tracing::info!("starting without quarantine (--no-quarantine): granting at once");
    } else {
        // A restarted server must not grant a lock it may have granted to a
        // live holder before it died ("delayed restart"); holders that
        // refresh get their entries back meanwhile.
        locker.restart();
        tracing::info!(quarantine = ?args.validity, "starting in quarantine: new grants are refused until it ends");
    }

    // The one line on stdout that scripts and tests wait for.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {local}")
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::new(FAILURE, format!("cannot write to stdout: {e}")))?;
    drop(stdout);

    server
        .serve(listener, async move {
            let signal = signals.recv().await;
            tracing::info!(signal = signal.name(), "shutting down");
        })
        .await;
    Ok(())
}
