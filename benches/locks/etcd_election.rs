//! etcd's leader election, measured beside ours (`--scenario election`):
//! the recipe of etcd's Go client (`clientv3/concurrency.Election`, the
//! one `etcd-election-bench.go` in the peers' folder drives), carried out
//! from Rust with the etcd client the lock comparison uses, call for call:
//!
//! * a candidate holds a session: a lease with the TTL of the run, kept
//!   alive every TTL/3 (`Session`, as `concurrency.NewSession`);
//! * `campaign` puts the key `prefix/<lease in hex>` with the value and the
//!   lease if that key does not exist yet (one transaction; when it exists,
//!   its create revision is taken and the value proclaimed if it differs),
//!   then waits until every key under the prefix created before its own is
//!   gone: it reads the newest of them (prefix, sorted by create revision,
//!   descending, limit 1, at most its own create revision − 1), watches
//!   that one key from the read's revision until it is deleted, and reads
//!   again (`waitDeletes`). The lowest create revision leads;
//! * `resign` deletes the key if its create revision is still the one
//!   this campaign made (one transaction);
//! * an observer reads the oldest key under the prefix (sorted by create
//!   revision, ascending, limit 1), or, when there is none, watches the
//!   prefix for the first put; reports its value; watches that key from
//!   the next revision, reporting every put, until it is deleted; and
//!   starts over (`Election.Observe`). Like etcd's, it never reports that
//!   there is no leader.
//!
//! etcd's server also offers the same recipe as a service of its own
//! (v3election, `Campaign`/`Resign`/`Observe` calls run by the server);
//! the Go client's recipe is the one applications embed, and the one the
//! issue's reference figures were taken with.

use std::future::Future;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, KeyValue, KvClient, LeaseClient, PutOptions,
    SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse, WatchClient, WatchOptions, WatchResponse,
    WatchStream, Watcher,
};
use tokio::task::JoinHandle;
use tokio::time::timeout;

use crate::context::Context;
use crate::election::{Contender, Electorate, Watch};

/// The election's key prefix; `concurrency.NewElection` adds the slash.
pub const PREFIX: &str = "/bench-election/";

/// Connects a client of its own (one HTTP/2 connection), as a separate
/// process would.
pub async fn connect(endpoint: &str) -> Result<Client, String> {
    timeout(Duration::from_secs(10), Client::connect([endpoint], None))
        .await
        .map_err(|_| "etcd: no connection within 10 s".to_owned())?
        .context("cannot connect to etcd")
}

/// A session: a lease kept alive every TTL/3 by a task of its own, as
/// `concurrency.NewSession` does (the lock comparison's clients and the
/// election's candidates hold one each).
pub struct Session {
    pub lease: i64,
    keeper: JoinHandle<()>,
    leases: LeaseClient,
}

impl Session {
    /// Grants a lease of `ttl` (whole seconds, at least one) and keeps it
    /// alive every TTL/3.
    pub async fn open(client: &Client, ttl: Duration) -> Result<Session, String> {
        let mut leases = client.lease_client();
        let seconds = i64::try_from(ttl.as_secs()).unwrap_or(60).max(1);
        let lease = leases
            .grant(seconds, None)
            .await
            .context("etcd lease grant failed")?
            .id();
        let (mut keeper, mut replies) = leases
            .keep_alive(lease)
            .await
            .context("etcd lease keep-alive failed")?;
        let keeper = tokio::spawn(async move {
            loop {
                tokio::time::sleep(ttl / 3).await;
                if keeper.keep_alive().await.is_err() {
                    return;
                }
                if !matches!(replies.message().await, Ok(Some(_))) {
                    return;
                }
            }
        });
        Ok(Session {
            lease,
            keeper,
            leases,
        })
    }

    /// Stops the keep-alives and revokes the lease, as `Session.Close`
    /// does: every key the session still holds goes with it.
    pub async fn close(mut self) {
        self.keeper.abort();
        let _ = timeout(Duration::from_secs(5), self.leases.revoke(self.lease)).await;
    }
}

/// One candidate: its client, its session and, while it campaigns or
/// leads, its key and that key's create revision.
pub struct Candidate {
    kv: KvClient,
    watch: WatchClient,
    session: Session,
}

/// What a won campaign holds: the key and its create revision.
pub struct LeaderKey {
    key: String,
    rev: i64,
}

impl Candidate {
    pub async fn new(endpoint: &str, ttl: Duration) -> Result<Candidate, String> {
        let client = connect(endpoint).await?;
        let session = Session::open(&client, ttl).await?;
        Ok(Candidate {
            kv: client.kv_client(),
            watch: client.watch_client(),
            session,
        })
    }

    /// `Election.Campaign`.
    pub async fn campaign_value(&mut self, value: &str) -> Result<LeaderKey, String> {
        let lease = self.session.lease;
        let key = format!("{PREFIX}{lease:x}");
        let txn = Txn::new()
            .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.as_str(),
                value,
                Some(PutOptions::new().with_lease(lease)),
            )])
            .or_else([TxnOp::get(key.as_str(), None)]);
        let reply = self.kv.txn(txn).await.context("etcd campaign txn failed")?;
        let mut rev = reply.header().map_or(0, |h| h.revision());
        if !reply.succeeded() {
            // The key is there already (an earlier campaign of this
            // session): its place in line is its create revision.
            let existing = reply.op_responses().into_iter().find_map(|r| match r {
                TxnOpResponse::Get(get) => get.kvs().first().cloned(),
                _ => None,
            });
            let existing = existing.ok_or("etcd campaign: the key vanished under its txn")?;
            rev = existing.create_revision();
            if existing.value() != value.as_bytes() {
                self.proclaim(&key, rev, value).await?;
            }
        }
        self.wait_deletes(rev - 1).await?;
        Ok(LeaderKey { key, rev })
    }

    /// `Election.Proclaim`: a new value on the key, if it is still ours.
    async fn proclaim(&mut self, key: &str, rev: i64, value: &str) -> Result<(), String> {
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, rev)])
            .and_then([TxnOp::put(
                key,
                value,
                Some(PutOptions::new().with_lease(self.session.lease)),
            )]);
        let reply = self.kv.txn(txn).await.context("etcd proclaim failed")?;
        if reply.succeeded() {
            Ok(())
        } else {
            Err("etcd proclaim: the session's key is gone".into())
        }
    }

    /// `waitDeletes`: until no key under the prefix was created at or
    /// before `max_rev`, watch the newest such key until it is deleted.
    async fn wait_deletes(&mut self, max_rev: i64) -> Result<(), String> {
        loop {
            let newest_older = GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Create, SortOrder::Descend)
                .with_limit(1)
                .with_max_create_revision(max_rev);
            let reply = self
                .kv
                .get(PREFIX, Some(newest_older))
                .await
                .context("etcd get failed")?;
            let Some(ahead) = reply.kvs().first() else {
                return Ok(());
            };
            let key = ahead.key().to_vec();
            let at = reply.header().map_or(0, |h| h.revision());
            self.wait_delete(key, at).await?;
        }
    }

    /// `waitDelete`: watch `key` from revision `at` until it is deleted.
    async fn wait_delete(&mut self, key: Vec<u8>, at: i64) -> Result<(), String> {
        let options = WatchOptions::new().with_start_revision(at);
        let (mut watcher, mut stream) = watch(&mut self.watch, key, options).await?;
        let outcome = loop {
            let deleted = |r: &WatchResponse| {
                let mut events = r.events().iter();
                events.any(|e| e.event_type() == EventType::Delete)
            };
            match next_reply(&mut stream).await {
                Ok(reply) if deleted(&reply) => break Ok(()),
                Ok(_) => {}
                Err(err) => break Err(err),
            }
        };
        // The Go client cancels the watch with its context.
        let _ = watcher.cancel().await;
        outcome
    }

    /// `Election.Resign`: delete the key if it is still this campaign's.
    pub async fn resign_key(&mut self, lead: LeaderKey) -> Result<(), String> {
        let txn = Txn::new()
            .when([Compare::create_revision(
                lead.key.as_str(),
                CompareOp::Equal,
                lead.rev,
            )])
            .and_then([TxnOp::delete(lead.key.as_str(), None)]);
        self.kv
            .txn(txn)
            .await
            .map(|_| ())
            .context("etcd resign failed")
    }
}

impl Contender for Candidate {
    type Lead = LeaderKey;

    async fn campaign(&mut self, value: String) -> Result<LeaderKey, String> {
        self.campaign_value(&value).await
    }

    fn resign(&mut self, lead: LeaderKey) -> impl Future<Output = Result<(), String>> + Send {
        self.resign_key(lead)
    }

    /// `Session.Close`: the keys of campaigns the end cut off go with the
    /// lease.
    async fn close(self) {
        self.session.close().await;
    }
}

/// etcd's election on one server: every candidate and observer connects
/// a client of its own.
impl Electorate for crate::etcd::EtcdServer {
    type Candidate = Candidate;
    type Observer = Observer;

    async fn candidate(&self, ttl: Duration, _: usize) -> Result<Candidate, String> {
        Candidate::new(&self.endpoint(), ttl).await
    }

    async fn observer(&self, _: Duration, _: usize) -> Result<Observer, String> {
        Observer::new(&self.endpoint()).await
    }

    fn server_cpu(&self) -> Option<Duration> {
        self.cpu()
    }

    fn child(&self) -> Option<(&'static str, String)> {
        Some(("etcd", self.endpoint()))
    }
}

/// `Election.Observe` on a client of its own: the values it reports, in
/// order, from a task that ends when the observer is dropped.
pub struct Observer {
    values: tokio::sync::mpsc::Receiver<Result<String, String>>,
    task: JoinHandle<()>,
}

impl Observer {
    pub async fn new(endpoint: &str) -> Result<Observer, String> {
        let client = connect(endpoint).await?;
        let (tx, values) = tokio::sync::mpsc::channel(64);
        let task = tokio::spawn(async move {
            let failed = observe(client.kv_client(), client.watch_client(), &tx).await;
            if let Err(err) = failed {
                let _ = tx.send(Err(err)).await;
            }
        });
        Ok(Observer { values, task })
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Watch for Observer {
    async fn next(&mut self) -> Result<Option<String>, String> {
        match self.values.recv().await {
            Some(Ok(value)) => Ok(Some(value)),
            Some(Err(err)) => Err(err),
            None => Err("the etcd observer ended".into()),
        }
    }
}

/// The observe loop; returns only on failure or when nobody listens.
async fn observe(
    mut kv: KvClient,
    mut watch_client: WatchClient,
    tx: &tokio::sync::mpsc::Sender<Result<String, String>>,
) -> Result<(), String> {
    let lossy = |kv: &KeyValue| String::from_utf8_lossy(kv.value()).into_owned();
    loop {
        let oldest = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(1);
        let reply = kv
            .get(PREFIX, Some(oldest))
            .await
            .context("etcd get failed")?;
        let (leader, at) = match reply.kvs().first() {
            Some(leader) => (leader.clone(), reply.header().map_or(0, |h| h.revision())),
            None => {
                // Nobody campaigns: wait for the first put under the prefix.
                let from = reply.header().map_or(0, |h| h.revision());
                let options = WatchOptions::new().with_prefix().with_start_revision(from);
                let (mut watcher, mut stream) = watch(&mut watch_client, PREFIX, options).await?;
                let first = loop {
                    let put = next_reply(&mut stream)
                        .await?
                        .events()
                        .iter()
                        .find(|e| e.event_type() == EventType::Put)
                        .and_then(|e| e.kv().cloned());
                    if let Some(put) = put {
                        break put;
                    }
                };
                let _ = watcher.cancel().await;
                let at = first.mod_revision();
                (first, at)
            }
        };
        if tx.send(Ok(lossy(&leader))).await.is_err() {
            return Ok(());
        }
        let options = WatchOptions::new().with_start_revision(at + 1);
        let (mut watcher, mut stream) = watch(&mut watch_client, leader.key(), options).await?;
        'leading: loop {
            for event in next_reply(&mut stream).await?.events() {
                if event.event_type() == EventType::Delete {
                    break 'leading;
                }
                if let Some(put) = event.kv()
                    && tx.send(Ok(lossy(put))).await.is_err()
                {
                    return Ok(());
                }
            }
        }
        let _ = watcher.cancel().await;
    }
}

/// A watch of `key` with `options`.
async fn watch(
    client: &mut WatchClient,
    key: impl Into<Vec<u8>>,
    options: WatchOptions,
) -> Result<(Watcher, WatchStream), String> {
    (client.watch(key, Some(options)).await).context("etcd watch failed")
}

/// A watch's next reply; an error when the watch ended.
async fn next_reply(stream: &mut WatchStream) -> Result<WatchResponse, String> {
    let reply = stream.message().await.context("etcd watch failed")?;
    Ok(reply.ok_or("etcd watch ended")?)
}
