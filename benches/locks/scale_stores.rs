//! `--scenario scale --stores redis,postgres,mysql`: what held locks cost
//! the other lockers' stores, grown through `--store-held`. One node of
//! each, of this run's own, and one locker over it (a `RedisLocker`, a
//! `SqlLocker`), with the validity long enough that nothing is refreshed.
//! At each size: keys (Redis) or rows (SQL) per held lock, the store's
//! memory (Redis `used_memory`) or the tables' size on disk (table and
//! indexes), and the latency of a lock+unlock of one more name.

use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt, TryStreamExt};
use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::NetLocker;

use crate::context::Context;
use crate::out::say;
use crate::redis_base::{self, RedisServer};
use crate::scale::{args, lock, probe, Row};
use crate::sql_server::{Database, Probe};

/// Long enough that no held lock needs a refresh during the run.
const VALIDITY: Duration = Duration::from_secs(3600);
/// Calls in flight while a part fills the store.
const IN_FLIGHT: usize = 64;
/// Each size is filled within this, or the part stops there and says so.
const STEP_LIMIT: Duration = Duration::from_secs(600);
const TABLE_PREFIX: &str = "scale_";

/// Every store named in `stores`, each grown through `sizes`.
pub async fn run(
    stores: &[String],
    sizes: &[usize],
    samples: usize,
    emit: &mut impl FnMut(Row),
) -> Result<(), String> {
    for store in stores {
        match store.as_str() {
            "redis" => redis(sizes, samples, emit).await?,
            "postgres" => sql(Backend::Postgres, sizes, samples, emit).await?,
            "mysql" => sql(Backend::MySql, sizes, samples, emit).await?,
            other => return Err(format!("--stores: unknown store {other:?}")),
        }
    }
    Ok(())
}

/// Takes locks `from..to` on `locker`, `IN_FLIGHT` at a time.
async fn fill(locker: &dyn NetLocker, part: &str, from: usize, to: usize) -> Result<(), String> {
    let fill = stream::iter(from..to)
        .map(|i| async move { lock(locker, &args(format!("held/{i}"), format!("held-{i}"))).await })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<()>();
    tokio::time::timeout(STEP_LIMIT, fill)
        .await
        .map_err(|_| format!("{part}: filling to {to} took over {STEP_LIMIT:?}"))?
}

/// What a store says of itself: Redis's keys and memory, or a database's
/// entries table.
enum Reader {
    Redis(redis::aio::MultiplexedConnection),
    Sql(Probe),
}

impl Reader {
    /// Items (keys, rows) and bytes.
    async fn read(&mut self) -> Result<(u64, u64), String> {
        match self {
            Reader::Redis(conn) => redis_reading(conn).await,
            Reader::Sql(probe) => sql_reading(probe).await,
        }
    }
}

/// Grows the locks `locker` holds through `sizes`, a row per size: the
/// store's items per lock (`part.1`, keys or rows) and its bytes, and a
/// lock+unlock of one more name.
async fn grow(
    locker: &dyn NetLocker,
    reader: &mut Reader,
    (part, items, memory): (&'static str, &str, &str),
    sizes: &[usize],
    samples: usize,
    emit: &mut impl FnMut(Row),
) -> Result<(), String> {
    let mut have = 0;
    for &size in sizes {
        let (items_before, bytes_before) = reader.read().await?;
        let start = Instant::now();
        fill(locker, part, have, size).await?;
        let took = start.elapsed();
        let (items_after, bytes_after) = reader.read().await?;
        let tag = format!("{}-{size}", part.replace(' ', "-"));
        let (p50, p99) = probe(locker, &tag, samples).await?;
        let added = size - have;
        let per_lock = items_after.saturating_sub(items_before) as f64 / added.max(1) as f64;
        emit(Row {
            part,
            size,
            took,
            added,
            rss: (bytes_before, bytes_after),
            p50,
            p99,
            notes: format!("{per_lock:.2} {items} per lock ({items_after} {items}); {memory}"),
        });
        have = size;
    }
    Ok(())
}

async fn redis(sizes: &[usize], samples: usize, emit: &mut impl FnMut(Row)) -> Result<(), String> {
    let Some(binary) = redis_base::locate() else {
        say("redis held: skipped, no redis-server on PATH (apt-get install -y redis-server)");
        return Ok(());
    };
    let server = RedisServer::start(&binary)?;
    say(format!(
        "redis held: {} on port {}, one RedisLocker",
        server.version, server.port
    ));
    let locker = server.locker("scale:".into(), VALIDITY).await?;
    let client = redis::Client::open(server.url()).context("a Redis client")?;
    let conn = client.get_multiplexed_async_connection().await;
    let mut reader = Reader::Redis(conn.context("a Redis connection")?);
    let part = ("redis held", "keys", "memory is Redis's used_memory");
    grow(&locker, &mut reader, part, sizes, samples, emit).await
}

/// Keys in the database and `used_memory`.
async fn redis_reading(conn: &mut redis::aio::MultiplexedConnection) -> Result<(u64, u64), String> {
    let keys: u64 = redis::cmd("DBSIZE")
        .query_async(conn)
        .await
        .context("DBSIZE")?;
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .context("INFO memory")?;
    let memory = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or("no used_memory in INFO memory")?;
    Ok((keys, memory))
}

async fn sql(
    backend: Backend,
    sizes: &[usize],
    samples: usize,
    emit: &mut impl FnMut(Row),
) -> Result<(), String> {
    let part = match backend {
        Backend::Postgres => "postgres held",
        Backend::MySql => "mysql held",
    };
    let db = match Database::start(backend, false) {
        Ok(db) => db,
        Err(why) => {
            say(format!("{part}: skipped: {why}"));
            return Ok(());
        }
    };
    let config = SqlConfig {
        table_prefix: TABLE_PREFIX.into(),
        validity: VALIDITY,
        // A server this run started has never granted a lock.
        quarantine: Duration::ZERO,
        ..SqlConfig::default()
    };
    let locker = SqlLocker::connect(&db.url, config)
        .await
        .context("cannot connect a SqlLocker")?;
    let mut reader = Reader::Sql(Probe::connect(backend, &db.url).await?);
    say(format!(
        "{part}: a database of this run's own, one SqlLocker"
    ));
    let memory = "memory is the entries table and its indexes on disk";
    let grown = grow(
        &locker,
        &mut reader,
        (part, "rows", memory),
        sizes,
        samples,
        emit,
    )
    .await;
    if let Reader::Sql(probe) = reader {
        probe.close().await;
    }
    // The locker's pool goes before the server it is connected to.
    drop(locker);
    drop(db);
    grown
}

/// Rows of the entries table, and its size with its indexes, once the
/// server's statistics are brought up to date.
async fn sql_reading(reader: &mut Probe) -> Result<(u64, u64), String> {
    let table = format!("{TABLE_PREFIX}entries");
    let rows = format!("SELECT COUNT(*) FROM {table}");
    let failed = |what: &'static str| move |e: sqlx::Error| format!("{what}: {e}");
    let (count, bytes): (i64, i64) = match reader {
        Probe::Pg { conn, .. } => {
            let count = sqlx::query_scalar(&rows)
                .fetch_one(&mut *conn)
                .await
                .map_err(failed("counting the entries"))?;
            let size_of = format!("SELECT pg_total_relation_size('{table}')");
            let bytes = sqlx::query_scalar(&size_of)
                .fetch_one(&mut *conn)
                .await
                .map_err(failed("the entries table's size"))?;
            (count, bytes)
        }
        Probe::My(conn) => {
            let count = sqlx::query_scalar(&rows)
                .fetch_one(&mut *conn)
                .await
                .map_err(failed("counting the entries"))?;
            // InnoDB's sizes come from its statistics, updated by ANALYZE.
            sqlx::query(&format!("ANALYZE TABLE {table}"))
                .execute(&mut *conn)
                .await
                .map_err(failed("ANALYZE TABLE"))?;
            let size_of = format!(
                "SELECT CAST(data_length + index_length AS SIGNED) FROM information_schema.tables \
                 WHERE table_schema = DATABASE() AND table_name = '{table}'"
            );
            let bytes = sqlx::query_scalar(&size_of)
                .fetch_one(&mut *conn)
                .await
                .map_err(failed("the entries table's size"))?;
            (count, bytes)
        }
    };
    Ok((count.max(0) as u64, bytes.max(0) as u64))
}
