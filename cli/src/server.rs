//! `quorum-lock server`: one node's lock table behind a `LockServer`.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use quorum_lock::net::{LockServer, ServerConfig};
use quorum_lock::{LocalLocker, LockerConfig};

use crate::args::ServerArgs;
use crate::fail::{Failure, FAILURE};
use crate::server_nodes::load_token;
use crate::signals::Signals;

/// An address argument as an error may quote it: not at all when it
/// looks like a URL given by mistake, which may hold a password.
fn quoted_address(text: &str) -> String {
    if text.contains(['@', '=']) || text.contains("://") {
        "(not shown: it looks like a URL, which may hold a password)".to_owned()
    } else {
        format!("'{}'", crate::words::escaped(text))
    }
}

pub async fn serve(args: ServerArgs) -> Result<(), Failure> {
    let addr: SocketAddr = args.listen.trim().parse().map_err(|e| {
        Failure::usage(format!(
            "bad --listen address {}: {e} (expected ip:port, e.g. 127.0.0.1:7070)",
            quoted_address(&args.listen)
        ))
    })?;
    let metrics = args
        .metrics
        .as_deref()
        .map(|text| {
            text.trim().parse::<SocketAddr>().map_err(|e| {
                Failure::usage(format!(
                    "bad --metrics address {}: {e} (expected ip:port, e.g. 127.0.0.1:9464)",
                    quoted_address(text)
                ))
            })
        })
        .transpose()?;
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
    // The metrics endpoint's descriptors are kept aside too.
    let metrics_files = if args.metrics.is_some() {
        crate::metrics_http::METRICS_FILES
    } else {
        0
    };
    let files = open_files(metrics_files);
    if files < MIN_FILES {
        // Slots without descriptors behind them would fail at accept, which
        // no client can be told about.
        return Err(Failure::new(
            FAILURE,
            format!(
                "the open-files limit (ulimit -n) leaves {files} descriptors for connections \
                 beside the {SPARE_FILES} the server keeps for itself; it needs at least \
                 {MIN_FILES}: raise ulimit -n to {} or more",
                SPARE_FILES + metrics_files + MIN_FILES
            ),
        ));
    }
    // The admin reserve first, with up to half the descriptors, whatever
    // --admin-reserve asks: the slots never outnumber the descriptors.
    config.admin_reserve = fit_reserve(args.admin_reserve as usize, files / 2);
    let files = files.saturating_sub(config.admin_reserve);
    // Then the door (where a new connection that has not spoken yet waits
    // while every slot is taken), with up to half of what is left: without
    // room there, a flood of silent connections keeps clients and the
    // admin out. The client connections get the rest.
    config.door = config.door.min(files / 2);
    if config.door < quorum_lock::net::DOOR {
        tracing::warn!(
            door = config.door,
            wanted = quorum_lock::net::DOOR,
            open_files = files,
            "the door for new connections that have not spoken yet is smaller than it should \
             be for want of open files: a flood of silent connections can keep clients and the \
             admin out (raise ulimit -n)"
        );
    }
    config.max_connections = fit_connections(
        args.max_connections as usize,
        files.saturating_sub(config.door),
    );
    config.max_connections_per_address = args.max_connections_per_address as usize;
    config.idle_timeout = (!args.idle_timeout.is_zero()).then_some(args.idle_timeout);
    config.max_entries_per_connection = args.max_locks_per_connection as usize;
    config.max_bytes_per_connection = args.max_bytes_per_connection;
    config.max_lock_bytes = args.max_lock_bytes;
    config.max_released_bytes = args.max_released_bytes;
    config.max_waiters_per_connection = args.max_waiters_per_connection as usize;
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let read = |path: &std::path::Path| {
            std::fs::read(path).map_err(|e| {
                Failure::usage(format!(
                    "cannot read {}: {e}",
                    crate::node_urls::path_shown(path)
                ))
            })
        };
        let mut tls = quorum_lock::net::ServerTls::from_pem(&read(cert)?, &read(key)?)
            .map_err(|e| Failure::usage(format!("--tls-cert / --tls-key: {e}")))?;
        if let Some(ca) = &args.tls_client_ca {
            tls = tls
                .require_client_cert(&read(ca)?)
                .map_err(|e| Failure::usage(format!("--tls-client-ca: {e}")))?;
        }
        config = config.tls(tls);
    }

    // Handlers first: a SIGTERM that arrives while binding must still shut
    // us down cleanly rather than kill the process mid-way.
    let mut signals = Signals::install()
        .map_err(|e| Failure::new(FAILURE, format!("cannot install signal handlers: {e}")))?;
    let listener = quorum_lock::net::listen(addr)
        .map_err(|e| Failure::new(FAILURE, format!("cannot listen on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Failure::new(FAILURE, format!("cannot read the bound address: {e}")))?;

    // Before the server exists: it registers its metrics with the recorder
    // installed when it is created.
    if let Some(addr) = metrics {
        serve_metrics(addr)?;
    }

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
    let (budget, max_connections, admin_reserve) = (
        config.memory_budget(),
        config.max_connections,
        config.admin_reserve,
    );
    let server =
        LockServer::new(locker.clone(), config).map_err(|e| Failure::usage(e.to_string()))?;
    // Rounded up: the figures are bounds.
    let (unauthenticated_mib, client_mib) = (
        budget.unauthenticated.div_ceil(1 << 20),
        budget.client.div_ceil(1 << 20),
    );
    // The values in the words, for people; as fields too, for log queries.
    tracing::info!(
        max_connections,
        admin_reserve,
        unauthenticated_mib,
        client_mib,
        "memory budget: peers without a token can add at most {unauthenticated_mib} MiB, \
         clients with the token at most {client_mib} MiB (lock table included), over at most \
         {max_connections} client connections and {admin_reserve} more for handshakes and the \
         admin token"
    );
    if let Some(ca) = &args.tls_client_ca {
        tracing::info!(client_ca = %ca.display(), "serving TLS only, to clients with a certificate from the client CA");
    } else if args.tls_cert.is_some() {
        tracing::info!("serving TLS only");
    }
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

/// Buckets of the `_seconds` histograms, from 50 µs to 10 s: a request
/// answered from memory takes microseconds, one stuck behind a busy
/// runtime much longer.
const SECONDS_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// Installs the Prometheus recorder, with its HTTP endpoint on `addr`
/// served from the current runtime (`metrics_http.rs`).
fn serve_metrics(addr: SocketAddr) -> Result<(), Failure> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
        .map_err(|e| Failure::new(FAILURE, format!("cannot set up metrics: {e}")))?
        .install_recorder()
        .map_err(|e| Failure::new(FAILURE, format!("cannot set up metrics: {e}")))?;
    crate::metrics_http::serve(addr, handle).map_err(|err| {
        Failure::new(
            FAILURE,
            format!("cannot serve metrics on {addr}: {err} (--metrics)"),
        )
    })?;
    tracing::info!(metrics = %addr, "serving Prometheus metrics over HTTP");
    Ok(())
}

/// Descriptors kept free beside the connections: the runtime's, the
/// listener, logs and stdio (about 12), the connections allowed beyond the
/// cap while evicted ones close (`EVICTING`), and the one a refused
/// connection needs while it is accepted.
const SPARE_FILES: usize = 24 + quorum_lock::net::EVICTING;

/// The fewest descriptors the connections may have: one for the admin
/// reserve, one for a client, two for the door.
const MIN_FILES: usize = 4;

/// `wanted` connections kept for handshakes and the admin, lowered to the
/// `files` given them (at least one), saying so.
fn fit_reserve(wanted: usize, files: usize) -> usize {
    let fits = files.max(1);
    if fits < wanted {
        tracing::warn!(
            admin_reserve = fits,
            wanted,
            open_files = files,
            "lowering --admin-reserve to fit the open-files limit (raise ulimit -n to keep more)"
        );
        return fits;
    }
    wanted
}

/// `wanted` client connections, lowered to the `files` left for them (at
/// least one), saying so.
fn fit_connections(wanted: usize, files: usize) -> usize {
    let fits = files.max(1);
    if fits < wanted {
        tracing::warn!(
            max_connections = fits,
            wanted,
            open_files = files,
            "lowering --max-connections to fit the open-files limit (raise ulimit -n to serve more)"
        );
        return fits;
    }
    wanted
}

/// The descriptors left for the connections and the door (where new
/// connections wait for their first bytes) once [`SPARE_FILES`] and
/// `reserve` more are set aside, after raising the soft open-files limit
/// to the hard one. Accepting beyond the limit fails with EMFILE, which no
/// client can be told about; refusing at the cap closes the extra
/// connections cleanly instead.
fn open_files(reserve: usize) -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct we pass.
    let known = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    if !known {
        return usize::MAX;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = limit.rlim_max;
        }
    }
    let files = usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX);
    files.saturating_sub(SPARE_FILES + reserve)
}
