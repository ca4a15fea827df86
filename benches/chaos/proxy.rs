//! A fault-injecting TCP proxy on 127.0.0.1, one per (client, server), so a
//! fault can hit one server for every client (the server's switch) or one
//! client on every server (the client's switch).

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// Longest wait for the connection to the target.
const CONNECT_LIMIT: Duration = Duration::from_secs(5);
/// Largest chunk read at once.
const CHUNK: usize = 16 * 1024;
/// Chunks held per direction (read but not yet forwarded) before the proxy
/// stops reading: at most 1 MiB.
const HELD_CHUNKS: usize = 64;

/// What a proxy does to the bytes passing through it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NetFault {
    /// Forward at once.
    Healthy,
    /// Hold every byte (up to 1 MiB per direction, then stop reading) until
    /// the fault clears; then forward them in order.
    Blackhole,
    /// Forward each chunk this long after it was read, in order.
    Delay(Duration),
}

impl NetFault {
    /// The worse of two: Blackhole > Delay (the longer) > Healthy.
    pub fn worst(self, other: NetFault) -> NetFault {
        use NetFault::*;
        match (self, other) {
            (Blackhole, _) | (_, Blackhole) => Blackhole,
            (Delay(a), Delay(b)) => Delay(a.max(b)),
            (Delay(d), Healthy) | (Healthy, Delay(d)) => Delay(d),
            (Healthy, Healthy) => Healthy,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct State {
    fault: NetFault,
    /// Bumped by `drop_connections`.
    generation: u64,
}

/// A shared switch: set by the fault schedule, read by every proxy that
/// includes it. Clones share the same state.
#[derive(Clone)]
pub struct Switch(Arc<watch::Sender<State>>);

impl Default for Switch {
    fn default() -> Self {
        Switch(Arc::new(watch::Sender::new(State {
            fault: NetFault::Healthy,
            generation: 0,
        })))
    }
}

impl Switch {
    /// Applies `fault` to every open and future connection of the proxies
    /// that include this switch.
    pub fn set(&self, fault: NetFault) {
        self.0.send_if_modified(|s| {
            let changed = s.fault != fault;
            s.fault = fault;
            changed
        });
    }

    /// Closes every open connection of the proxies that include this
    /// switch (both sides); new connections are accepted as usual.
    pub fn drop_connections(&self) {
        self.0
            .send_modify(|s| s.generation = s.generation.wrapping_add(1));
    }
}

/// One connection's view of its proxy's switches.
struct Watch {
    rxs: Vec<watch::Receiver<State>>,
}

impl Watch {
    fn new(switches: &[Switch]) -> Watch {
        Watch {
            rxs: switches.iter().map(|s| s.0.subscribe()).collect(),
        }
    }

    /// The worst fault of all switches, marking them seen.
    fn fault(&mut self) -> NetFault {
        self.rxs.iter_mut().fold(NetFault::Healthy, |acc, rx| {
            acc.worst(rx.borrow_and_update().fault)
        })
    }

    fn generations(&mut self) -> Vec<u64> {
        self.rxs
            .iter_mut()
            .map(|rx| rx.borrow_and_update().generation)
            .collect()
    }

    /// Until any switch changes after the last `fault`/`generations`.
    async fn changed(&mut self) {
        if self.rxs.is_empty() {
            return std::future::pending().await;
        }
        let waits = self.rxs.iter_mut().map(|rx| Box::pin(rx.changed()));
        let (result, _, _) = futures::future::select_all(waits).await;
        if result.is_err() {
            // A switch was dropped: it can no longer change. (Cannot happen
            // while the connection holds its clone; never spin on it.)
            std::future::pending::<()>().await;
        }
    }

    /// Until some switch's `drop_connections` is called after `since`.
    async fn dropped(&mut self, since: &[u64]) {
        loop {
            if self.generations().as_slice() != since {
                return;
            }
            self.changed().await;
        }
    }
}

/// A TCP proxy from an ephemeral 127.0.0.1 port to `target`.
pub struct Proxy {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Listens on 127.0.0.1:0 and forwards each accepted connection to
    /// `target`, both directions, under the worst fault of `switches`, read
    /// per chunk so a change applies to open connections at once. If the
    /// target refuses, the accepted connection is closed at once.
    pub async fn start(target: SocketAddr, switches: Vec<Switch>) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(accept_loop(listener, target, switches));
        Ok(Proxy { addr, task })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Dropping the accept loop drops its JoinSet, which aborts every
        // connection task; their sockets close with them.
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, target: SocketAddr, switches: Vec<Switch>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    conns.spawn(serve(stream, target, switches.clone()));
                }
                // E.g. out of file descriptors: do not spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// One proxied connection, until both directions end, either fails, or a
/// switch drops connections.
async fn serve(client: TcpStream, target: SocketAddr, switches: Vec<Switch>) {
    let mut dropper = Watch::new(&switches);
    let since = dropper.generations();
    let upstream = tokio::select! {
        r = tokio::time::timeout(CONNECT_LIMIT, TcpStream::connect(target)) => r,
        _ = dropper.dropped(&since) => return,
    };
    // Refused or timed out: dropping `client` closes it at once.
    let Ok(Ok(upstream)) = upstream else { return };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (up_read, up_write) = upstream.into_split();
    let mut up = pin!(pipe(client_read, up_write, Watch::new(&switches)));
    let mut down = pin!(pipe(up_read, client_write, Watch::new(&switches)));
    let both = async {
        tokio::select! {
            r = &mut up => if r.is_ok() { let _ = (&mut down).await; },
            r = &mut down => if r.is_ok() { let _ = (&mut up).await; },
        }
    };
    tokio::select! {
        _ = both => {}
        _ = dropper.dropped(&since) => {}
    }
}

/// Forwards `from` to `to` under the switches' fault. Ok after EOF was
/// forwarded (write half shut down), Err on an I/O error.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut watch: Watch) -> Result<(), ()> {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(HELD_CHUNKS);
    let reader = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = from.read(&mut buf).await.map_err(|_| ())?;
            if n == 0 {
                return Ok(()); // drops tx: the writer forwards the EOF
            }
            // Blocks while HELD_CHUNKS are held: the proxy stops reading.
            if tx.send((Instant::now(), buf[..n].to_vec())).await.is_err() {
                return Ok(());
            }
        }
    };
    let writer = async move {
        while let Some((read_at, chunk)) = rx.recv().await {
            hold(&mut watch, read_at).await;
            to.write_all(&chunk).await.map_err(|_| ())?;
        }
        // The EOF obeys the fault too.
        hold(&mut watch, Instant::now()).await;
        let _ = to.shutdown().await;
        Ok(())
    };
    tokio::try_join!(reader, writer).map(|_| ())
}

/// Until a chunk read at `read_at` may be forwarded.
async fn hold(watch: &mut Watch, read_at: Instant) {
    loop {
        match watch.fault() {
            NetFault::Healthy => return,
            NetFault::Delay(d) => match read_at.checked_add(d) {
                Some(due) if Instant::now() >= due => return,
                Some(due) => tokio::select! {
                    _ = tokio::time::sleep_until(due) => return,
                    _ = watch.changed() => {}
                },
                None => watch.changed().await,
            },
            NetFault::Blackhole => watch.changed().await,
        }
    }
}
