//! `server --metrics`: the Prometheus text format over plain HTTP, served
//! here rather than by the exporter's own listener, so that the endpoint
//! keeps the lock port's promises to peers without a token (see the threat
//! model in docs/lock-servers.md).
//!
//! Invariants:
//! * at most [`MAX_SCRAPES`] connections are open at once; one more is
//!   accepted and closed at once, so the endpoint holds at most
//!   [`METRICS_FILES`] descriptors and never takes the lock port's (the
//!   server keeps them aside when it fits its connections to `ulimit -n`);
//! * a connection gets [`READ_TIMEOUT`] and [`REQUEST_LIMIT`] bytes to send
//!   its request, and [`WRITE_TIMEOUT`] to take the answer;
//! * refused connections and failed accepts are logged at most once per
//!   [`LOG_EVERY`], with how many there were; a failed accept waits a
//!   little before the next, so a full process does not spin.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{timeout, Instant};

/// Scrapes answered at once; a scraper needs one.
pub const MAX_SCRAPES: usize = 4;

/// Descriptors the endpoint may hold: its listener, its scrapes, and one
/// connection being refused.
pub const METRICS_FILES: usize = MAX_SCRAPES + 2;

/// How long a connection has to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a connection has to take the answer.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest request head read; a scrape's is a few hundred bytes.
const REQUEST_LIMIT: usize = 8 << 10;

/// How often a kind of trouble is logged at most.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Counts a kind of trouble and says when to log it, with the count.
struct Throttle {
    since: Option<Instant>,
    count: u64,
}

impl Throttle {
    const fn new() -> Throttle {
        Throttle {
            since: None,
            count: 0,
        }
    }

    /// One more; `Some(count)` when a line is due.
    fn due(&mut self) -> Option<u64> {
        self.count += 1;
        let now = Instant::now();
        match self.since {
            Some(since) if now.duration_since(since) < LOG_EVERY => None,
            _ => {
                self.since = Some(now);
                Some(std::mem::take(&mut self.count))
            }
        }
    }
}

/// Binds `addr` and serves `handle`'s metrics from the current runtime
/// until the process ends. Fails only when `addr` cannot be bound.
pub fn serve(addr: SocketAddr, handle: PrometheusHandle) -> std::io::Result<()> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        // The recorder's housekeeping (histogram windows), which the
        // exporter's listener used to run.
        let mut every = tokio::time::interval(Duration::from_secs(5));
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    tokio::spawn(accept(listener, handle));
    Ok(())
}

async fn accept(listener: TcpListener, handle: PrometheusHandle) {
    let slots = Arc::new(Semaphore::new(MAX_SCRAPES));
    let (mut refused, mut failed) = (Throttle::new(), Throttle::new());
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => match slots.clone().try_acquire_owned() {
                Ok(slot) => {
                    let handle = handle.clone();
                    tokio::spawn(async move {
                        answer(stream, &handle).await;
                        drop(slot);
                    });
                }
                Err(_) => {
                    drop(stream);
                    if let Some(count) = refused.due() {
                        tracing::warn!(
                            %peer,
                            refused = count,
                            "closed metrics connections beyond {MAX_SCRAPES} at once (`refused` \
                             counts them since the last such line); a scraper needs one"
                        );
                    }
                }
            },
            Err(err) => {
                if let Some(count) = failed.due() {
                    tracing::warn!(
                        failed = count,
                        "cannot accept a metrics connection: {err} (`failed` counts them since \
                         the last such line)"
                    );
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Reads one request head and answers it: the metrics for a `GET`, 405
/// for anything else, nothing for a peer too slow or too long.
async fn answer(mut stream: TcpStream, handle: &PrometheusHandle) {
    let mut head = Vec::with_capacity(512);
    let read = timeout(READ_TIMEOUT, async {
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            if head.len() >= REQUEST_LIMIT {
                return false;
            }
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        true
    })
    .await;
    if read != Ok(true) {
        return;
    }
    let response = if head.starts_with(b"GET ") {
        let body = handle.render();
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        )
    } else {
        "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET\r\nContent-Length: 0\r\nConnection: \
         close\r\n\r\n"
            .to_owned()
    };
    let _ = timeout(WRITE_TIMEOUT, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}
