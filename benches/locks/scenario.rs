//! What one measured run is: cluster size, client count, name sharing,
//! read/write mix, hold, the transport to the lockers and the way waiters
//! wait.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Names {
    Own,
    Shared,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mix {
    Write,
    /// 90% reads, 10% writes.
    Read90,
}

/// Where the lockers live; everything downstream matches on this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    InProcess,
    /// `quorum-lock server` processes on 127.0.0.1, one per node.
    Tcp,
    /// `RedisLocker`s on redis-server processes on 127.0.0.1, one per node
    /// (`--backend redis`, run by `redis_nodes`).
    Redis,
}

/// How waiters learn that a lock was freed: the coordinator's
/// `DsyncBuilder::waiting` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wait {
    /// `Waiting::Push`, the library's default: one place in line per locker,
    /// grants pushed by the lockers. Lockers without queues (a server older
    /// than protocol version 3) are polled.
    Push,
    /// `Waiting::Poll`: rounds repeated with jittered backoff, as dsync does.
    Poll,
}

/// What a client does between acquiring and unlocking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hold {
    None,
    /// `tokio::task::yield_now` once: the shortest hold that lets other
    /// tasks run while the lock is taken.
    Yield,
    /// `tokio::time::sleep`: whole milliseconds on tokio's timer, so a
    /// `1ms` hold lasts 1–2 ms plus the timer's wake-up.
    For(Duration),
    /// Exactly this long: yields to the scheduler in a loop until the time
    /// has passed. Burns the holder's worker while held, but takes timer
    /// granularity out of a measurement of hand-offs.
    Spin(Duration),
    /// A thread of tokio's blocking pool sleeps until this long after the
    /// hold began: no rounding up to the timer's whole milliseconds and no
    /// CPU burnt. Still over by the kernel's sleep overshoot and the wake-up
    /// of the holder's task (on the 2-vCPU VM of BENCHMARKS.md, 1 ms
    /// measures about 1.2 ms).
    Exact(Duration),
}

impl Hold {
    pub fn label(self) -> String {
        match self {
            Hold::None => "0".into(),
            Hold::Yield => "yield".into(),
            Hold::For(d) => crate::stats::fmt_duration(d),
            Hold::Spin(d) => format!("spin:{}", crate::stats::fmt_duration(d)),
            Hold::Exact(d) => format!("exact:{}", crate::stats::fmt_duration(d)),
        }
    }

    pub async fn run(self) {
        match self {
            Hold::None => {}
            Hold::Yield => tokio::task::yield_now().await,
            Hold::For(d) => tokio::time::sleep(d).await,
            Hold::Spin(d) => {
                let until = tokio::time::Instant::now() + d;
                while tokio::time::Instant::now() < until {
                    tokio::task::yield_now().await;
                }
            }
            Hold::Exact(d) => {
                // Timed from here, so that handing the sleep to the pool's
                // thread is not added to it. A sleep cannot fail; a pool
                // that is shutting down ends the hold early, and the run
                // with it.
                let until = std::time::Instant::now() + d;
                let _ = tokio::task::spawn_blocking(move || {
                    std::thread::sleep(until.saturating_duration_since(std::time::Instant::now()));
                })
                .await;
            }
        }
    }
}

impl Names {
    /// The name client `c` locks: `{prefix}client-{c}`, or `{prefix}shared`
    /// for every client. Each run passes a prefix of its own where a wait
    /// an earlier window cut off could otherwise block it.
    pub fn of(self, prefix: &str, c: usize) -> String {
        match self {
            Names::Own => format!("{prefix}client-{c}"),
            Names::Shared => format!("{prefix}shared"),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Names::Own => "own",
            Names::Shared => "shared",
        }
    }
}

impl Mix {
    pub fn label(self) -> &'static str {
        match self {
            Mix::Write => "write",
            Mix::Read90 => "read90",
        }
    }
}

impl Transport {
    /// Ours over these lockers, as the election and semaphore runs name it.
    pub fn ours(self) -> &'static str {
        match self {
            Transport::Tcp => "ours-tcp",
            _ => "ours-inproc",
        }
    }

    /// Where ours's lockers are, for a banner.
    pub fn lockers(self) -> &'static str {
        match self {
            Transport::Tcp => "quorum-lock server processes over TCP",
            _ => "LocalLockers in this process",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Transport::InProcess => "inproc",
            Transport::Tcp => "tcp",
            Transport::Redis => "redis",
        }
    }
}

impl Wait {
    pub fn label(self) -> &'static str {
        match self {
            Wait::Push => "push",
            Wait::Poll => "poll",
        }
    }

    pub fn waiting(self) -> quorum_lock::Waiting {
        match self {
            Wait::Push => quorum_lock::Waiting::Push,
            Wait::Poll => quorum_lock::Waiting::Poll,
        }
    }
}

/// One measured configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scenario {
    pub nodes: usize,
    pub clients: usize,
    pub names: Names,
    pub mix: Mix,
    pub hold: Hold,
    pub transport: Transport,
    pub wait: Wait,
}

impl Scenario {
    /// The write load of `key`'s clients, names and hold on `nodes`
    /// lockers, reached over `transport`, its waiters waiting as `wait`.
    pub fn write(
        nodes: usize,
        key: crate::redis_base::BaselineKey,
        transport: Transport,
        wait: Wait,
    ) -> Scenario {
        Scenario {
            nodes,
            clients: key.clients,
            names: key.names,
            mix: Mix::Write,
            hold: key.hold,
            transport,
            wait,
        }
    }

    /// For one shared name with a hold, the run whose rate this one is
    /// compared with: one client alone, same cluster, hold and waiting, so
    /// nobody ever waits and the rate is the serial rate of one holder.
    pub fn serial_reference(&self) -> Option<Scenario> {
        let holds = !matches!(self.hold, Hold::None);
        (self.names == Names::Shared && holds && self.clients > 1).then_some(Scenario {
            clients: 1,
            ..*self
        })
    }
}

/// The default set: the node sweep on distinct names (quorum fan-out cost),
/// contention on one name at three cluster sizes, and the read mix on the
/// 5-node cluster the targets are stated for.
pub fn matrix() -> impl Iterator<Item = (usize, usize, Names, Mix)> {
    let sweep = [1, 3, 5, 8, 16]
        .into_iter()
        .flat_map(|n| [1, 8, 64].map(move |c| (n, c, Names::Own, Mix::Write)));
    let shared = [1, 5, 16]
        .into_iter()
        .flat_map(|n| [8, 64].map(move |c| (n, c, Names::Shared, Mix::Write)));
    let reads = [Names::Own, Names::Shared]
        .into_iter()
        .flat_map(|names| [1, 8, 64].map(move |c| (5, c, names, Mix::Read90)));
    sweep.chain(shared).chain(reads)
}
