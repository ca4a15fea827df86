//! The fast path of the Redis locker: a grant of one free resource is one
//! plain `SET NX PX` and its unlock one compare-and-delete, and a
//! fast-path holder is an ordinary holder to every other call (waiters,
//! readers, refresh, fencing, listing, forced unlocks, expiry), while
//! anything that is not the common case (a held key, a waiter, several
//! resources, a quarantine) goes through the full scripts.
//!
//! Each test starts its own `redis-server`; see `redis_support` for how a
//! missing `redis-server` is handled.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::collections::BTreeMap;
use std::time::Duration;

use quorum_lock::redis::{RedisConfig, RedisLocker, RedisPaths};
use quorum_lock::{LockArgs, LockMode, NetLocker, Ticket, WaitArgs, WaitReply};
use tokio::time::{sleep, Instant};

use crate::redis_support::{raw, Raw, RedisServer};

fn config(validity: Duration, quarantine: Duration) -> RedisConfig {
    RedisConfig {
        validity,
        quarantine,
        call_timeout: Duration::from_secs(2),
        ..RedisConfig::default()
    }
}

/// A locker for `server`, whose connection has seen a grant script
/// answer outside the quarantine when there is none: one grant by the
/// script (`script_grants` and `script_unlocks` are 1), after which the
/// fast path is open.
async fn connect(server: &RedisServer, config: RedisConfig) -> RedisLocker {
    let locker = RedisLocker::connect(&server.url(), config)
        .await
        .expect("connect to the test redis-server");
    let warm = args("warm-up", &["warm-up"]);
    if locker.lock(&warm).await.unwrap_or(false) {
        // Answered either way: under a short validity on a loaded machine
        // the warm-up's entry may have expired before its unlock, which
        // leaves nothing behind all the same.
        locker
            .unlock(&warm)
            .await
            .expect("the warm-up's unlock is answered");
    }
    locker
}

/// A `redis-server` of its own (`None` where there is none to start), a
/// raw connection to it, and a locker for it ([`connect`]) whose holders
/// live for `validity`, with no quarantine.
async fn started(validity: Duration) -> Option<(RedisServer, Raw, RedisLocker)> {
    let server = RedisServer::start()?;
    let admin = raw(&server).await;
    let locker = connect(&server, config(validity, Duration::ZERO)).await;
    Some((server, admin, locker))
}

/// The fencing token `locker` draws for `holder`, a writer that holds its
/// lock there.
async fn token(locker: &RedisLocker, holder: &LockArgs) -> u64 {
    locker
        .fence(holder, LockMode::Write, 0)
        .await
        .unwrap()
        .expect("held")
}

/// What `locker` answers `waiter`, a writer with a place in line taken at
/// `at` ([`reservation`]).
async fn wait_in_line(locker: &RedisLocker, waiter: &LockArgs, at: u64) -> WaitReply {
    locker
        .lock_wait(waiter, LockMode::Write, &reservation(at))
        .await
        .unwrap()
}

fn args(uid: &str, resources: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: resources
            .iter()
            .map(|r| (*r).to_owned())
            .collect::<Vec<_>>()
            .into(),
        owner: format!("owner of {uid}").into(),
        source: "tests/redis/fastpath.rs".into(),
        quorum: 1,
    }
}

fn reservation(at: u64) -> WaitArgs {
    WaitArgs {
        ticket: Ticket { at, tiebreak: 1 },
        place_ttl: Duration::from_secs(30),
        wake: None,
    }
}

fn quarantined(err: &quorum_lock::Error) -> bool {
    err.to_string().contains("refusing new grants")
}

async fn key_type(admin: &Raw, resource: &str) -> String {
    admin
        .cmd(&["TYPE", &format!("quorum-lock:{resource}")])
        .await
        .text()
}

/// `INFO commandstats` as command name → calls.
async fn commandstats(admin: &Raw) -> BTreeMap<String, u64> {
    let text = admin.cmd(&["INFO", "commandstats"]).await.text();
    text.lines()
        .filter_map(|line| {
            let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = fields
                .split(',')
                .next()?
                .strip_prefix("calls=")?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

#[tokio::test]
async fn a_free_key_costs_one_set_and_one_compare_and_delete() {
    let Some((_server, admin, locker)) = started(Duration::from_secs(30)).await else {
        return;
    };
    let w = args("w1", &["free"]);

    admin.cmd(&["CONFIG", "RESETSTAT"]).await;
    assert!(locker.lock(&w).await.unwrap());
    assert_eq!(key_type(&admin, "free").await, "string");
    let pttl: i64 = admin
        .cmd(&["PTTL", "quorum-lock:free"])
        .await
        .text()
        .parse()
        .unwrap();
    assert!(
        pttl > 25_000 && pttl <= 30_000,
        "the key expires with the holder's validity: {pttl}"
    );
    assert!(locker.unlock(&w).await.unwrap());
    assert_eq!(key_type(&admin, "free").await, "none");

    let mut stats = commandstats(&admin).await;
    stats.retain(|name, _| !name.starts_with("config"));
    stats.remove("info");
    stats.remove("type");
    stats.remove("pttl");
    // The grant: one SET. The unlock: one script that runs GETRANGE and
    // DEL, as rslock's compare-and-delete runs GET and DEL. No clock, no
    // hash.
    let expected: BTreeMap<String, u64> = [("set", 1), ("evalsha", 1), ("getrange", 1), ("del", 1)]
        .into_iter()
        .map(|(n, c)| (n.to_owned(), c))
        .collect();
    assert_eq!(stats, expected);
    assert_eq!(
        locker.paths(),
        RedisPaths {
            fast_grants: 1,
            fast_unlocks: 1,
            script_grants: 1,
            script_unlocks: 1,
            ..RedisPaths::default()
        }
    );

    // Read locks and waiting locks take it too.
    let r = args("r1", &["free"]);
    assert!(locker.rlock(&r).await.unwrap());
    assert!(locker.runlock(&r).await.unwrap());
    let q = args("q1", &["free"]);
    assert_eq!(wait_in_line(&locker, &q, 1).await, WaitReply::Granted);
    assert!(locker.unlock(&q).await.unwrap());
    let paths = locker.paths();
    assert_eq!((paths.fast_grants, paths.fast_unlocks), (3, 3), "{paths:?}");
    assert_eq!((paths.script_grants, paths.script_unlocks), (1, 1));
}

#[tokio::test]
async fn an_unlock_by_another_uid_or_mode_leaves_a_fast_path_holder_alone() {
    let Some((_server, admin, locker)) = started(Duration::from_secs(30)).await else {
        return;
    };
    let w = args("holder", &["x"]);
    assert!(locker.lock(&w).await.unwrap());
    // A uid that is a prefix of the holder's, another uid, the other mode.
    assert!(!locker.unlock(&args("hold", &["x"])).await.unwrap());
    assert!(!locker.unlock(&args("other", &["x"])).await.unwrap());
    assert!(!locker.runlock(&w).await.unwrap());
    assert_eq!(key_type(&admin, "x").await, "string");
    assert!(!locker.lock(&args("other", &["x"])).await.unwrap());
    assert!(locker.unlock(&w).await.unwrap());
    // Nothing there: nothing to unlock.
    assert!(!locker.unlock(&w).await.unwrap());
}

#[tokio::test]
async fn a_fast_path_holder_is_an_ordinary_holder_to_every_script() {
    let Some((_server, admin, locker)) = started(Duration::from_secs(30)).await else {
        return;
    };
    let holder = args("holder", &["x"]);
    assert!(locker.lock(&holder).await.unwrap());

    // Another writer and a reader are refused by the script, which turns
    // the key into the hash of the same holder.
    assert!(!locker.lock(&args("other", &["x"])).await.unwrap());
    assert_eq!(key_type(&admin, "x").await, "hash");
    assert!(!locker.rlock(&args("reader", &["x"])).await.unwrap());
    let paths = locker.paths();
    assert_eq!((paths.fast_grants, paths.fast_misses), (1, 2), "{paths:?}");
    assert_eq!(paths.script_grants, 3);

    // Listed with its owner, source and mode.
    let listed = locker.locks().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].uid, "holder");
    assert_eq!(listed[0].owner, "owner of holder");
    assert_eq!(listed[0].source, "tests/redis/fastpath.rs");
    assert_eq!(listed[0].mode, LockMode::Write);

    assert!(locker.refresh(&holder).await.unwrap());
    assert!(locker
        .fence(&holder, LockMode::Write, 0)
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        locker
            .fence(&args("other", &["x"]), LockMode::Write, 0)
            .await
            .unwrap(),
        None
    );
    assert!(locker.unlock(&holder).await.unwrap());
    assert_eq!(key_type(&admin, "x").await, "none");
    assert_eq!(locker.paths().script_unlocks, 2);
}

#[tokio::test]
async fn every_script_unfolds_a_fast_path_key_first() {
    let Some((_server, admin, locker)) = started(Duration::from_secs(30)).await else {
        return;
    };
    let holder = args("holder", &["x"]);

    // Refresh.
    assert!(locker.lock(&holder).await.unwrap());
    assert!(locker.refresh(&holder).await.unwrap());
    assert_eq!(key_type(&admin, "x").await, "hash");
    assert!(locker.unlock(&holder).await.unwrap());

    // Fencing: tokens keep growing across fast-path holders.
    assert!(locker.lock(&holder).await.unwrap());
    let first = token(&locker, &holder).await;
    assert!(locker.unlock(&holder).await.unwrap());
    assert!(locker.lock(&holder).await.unwrap());
    assert_eq!(key_type(&admin, "x").await, "string");
    let second = token(&locker, &holder).await;
    assert!(second > first, "{second} after {first}");
    assert!(locker.unlock(&holder).await.unwrap());

    // Forced unlocks, by uid, by resource, and by uid across the prefix.
    for force in [
        args("holder", &["x"]),
        args("", &["x"]),
        LockArgs {
            resources: Vec::new().into(),
            ..args("holder", &[])
        },
    ] {
        assert!(locker.lock(&holder).await.unwrap());
        assert_eq!(key_type(&admin, "x").await, "string");
        assert!(locker.force_unlock(&force).await.unwrap(), "{force:?}");
        assert_eq!(key_type(&admin, "x").await, "none", "{force:?}");
    }

    // A multi-resource unlock that names a fast-path key of another uid.
    assert!(locker.lock(&holder).await.unwrap());
    assert!(!locker.unlock(&args("other", &["x", "y"])).await.unwrap());
    assert!(locker.unlock(&holder).await.unwrap());
}

#[tokio::test]
async fn a_waiter_and_readers_take_the_full_scripts() {
    let Some((_server, admin, locker)) = started(Duration::from_secs(30)).await else {
        return;
    };

    // A waiter queues behind a fast-path holder, and is granted after it.
    let holder = args("holder", &["x"]);
    let waiter = args("waiter", &["x"]);
    assert!(locker.lock(&holder).await.unwrap());
    assert_eq!(
        wait_in_line(&locker, &waiter, 5).await,
        WaitReply::Refused,
        "a reservation is kept, not granted"
    );
    assert!(!locker.lock(&args("late", &["x"])).await.unwrap());
    assert!(locker.unlock(&holder).await.unwrap());
    // The waiter's place is still there: the key is a hash, and nobody
    // else is let in before it.
    assert_eq!(key_type(&admin, "x").await, "hash");
    assert!(!locker.lock(&args("late", &["x"])).await.unwrap());
    assert_eq!(wait_in_line(&locker, &waiter, 5).await, WaitReply::Granted);
    assert!(locker.unlock(&waiter).await.unwrap());
    assert_eq!(key_type(&admin, "x").await, "none");

    // A younger waiter granted by the fast path is wounded by an older
    // one: its ticket and channel are in the fast-path key.
    let young = args("young", &["y"]);
    assert_eq!(wait_in_line(&locker, &young, 20).await, WaitReply::Granted);
    assert_eq!(key_type(&admin, "y").await, "string");
    let listed = locker.locks().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].uid, "young");
    let t: String = admin
        .cmd(&["HGET", "quorum-lock:y", "t:young"])
        .await
        .text();
    assert_eq!(t, format!("{:020}{:020}", 20, 1));

    // Readers share: the first by the fast path, the second by the script.
    let r1 = args("r1", &["z"]);
    let r2 = args("r2", &["z"]);
    assert!(locker.rlock(&r1).await.unwrap());
    assert!(locker.rlock(&r2).await.unwrap());
    assert!(!locker.lock(&args("w", &["z"])).await.unwrap());
    assert!(locker.runlock(&r1).await.unwrap());
    assert!(!locker.lock(&args("w", &["z"])).await.unwrap());
    assert!(locker.runlock(&r2).await.unwrap());
    assert!(locker.lock(&args("w", &["z"])).await.unwrap());

    // Several resources: always the script.
    let before = locker.paths();
    let multi = args("multi", &["m1", "m2"]);
    assert!(locker.lock(&multi).await.unwrap());
    assert_eq!(key_type(&admin, "m1").await, "hash");
    assert!(locker.unlock(&multi).await.unwrap());
    let after = locker.paths();
    assert_eq!(after.fast_grants, before.fast_grants);
    assert_eq!(after.script_grants, before.script_grants + 1);
}

#[tokio::test]
async fn a_fast_path_key_expires_with_its_holder() {
    // A real server's clock: the validity leaves a loaded machine room for
    // the three calls before the wait.
    let Some((_server, admin, locker)) = started(Duration::from_secs(1)).await else {
        return;
    };
    assert!(locker.lock(&args("gone", &["x"])).await.unwrap());
    assert!(!locker.lock(&args("other", &["x"])).await.unwrap());
    assert!(locker.unlock(&args("gone", &["x"])).await.unwrap());
    assert!(locker.lock(&args("gone", &["x"])).await.unwrap());
    sleep(Duration::from_millis(1_300)).await;
    assert_eq!(key_type(&admin, "x").await, "none");
    assert!(locker.lock(&args("other", &["x"])).await.unwrap());
    assert!(!locker.refresh(&args("gone", &["x"])).await.unwrap());
}

#[tokio::test]
async fn a_key_written_by_hand_is_refused_as_before() {
    let Some((_server, admin, locker)) = started(Duration::from_secs(30)).await else {
        return;
    };
    for value in ["hello", "Q1w", "Q1w6:holder", "Q1x1:a1:11:o1:s0:0:"] {
        admin.cmd(&["SET", "quorum-lock:hand", value]).await;
        let err = locker.lock(&args("a", &["hand"])).await.expect_err(value);
        assert!(err.to_string().contains("WRONGTYPE"), "{value}: {err}");
        assert!(!locker.unlock(&args("a", &["hand"])).await.unwrap_or(false));
        assert_eq!(
            admin.cmd(&["GET", "quorum-lock:hand"]).await.text(),
            value,
            "left alone"
        );
    }
}

/// The fast path has no clock: it is taken only on a connection where a
/// grant script has seen the quarantine end, so never on a restarted
/// server before that.
#[tokio::test]
async fn no_fast_path_grant_in_quarantine_nor_after_a_restart() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let admin = raw(&server).await;
    let quarantine = Duration::from_secs(2);
    let locker = connect(&server, config(quarantine, quarantine)).await;
    let err = locker.lock(&args("early", &["a"])).await.unwrap_err();
    assert!(quarantined(&err), "{err}");
    assert_eq!(key_type(&admin, "a").await, "none");
    assert_eq!(locker.paths().fast_grants, 0);

    let give_up = Instant::now() + Duration::from_secs(10);
    while locker.quarantine_left().await.unwrap().is_some() {
        assert!(Instant::now() < give_up, "the quarantine never ends");
        sleep(Duration::from_millis(50)).await;
    }
    // The first grant after it is the script's: it sees the clock.
    assert!(locker.lock(&args("first", &["a"])).await.unwrap());
    assert_eq!(locker.paths().fast_grants, 0);
    assert!(locker.unlock(&args("first", &["a"])).await.unwrap());
    // Then the fast path.
    assert!(locker.lock(&args("second", &["a"])).await.unwrap());
    assert_eq!(locker.paths().fast_grants, 1);
    assert_eq!(key_type(&admin, "a").await, "string");

    server.restart_empty();
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        match locker.lock(&args("after", &["b"])).await {
            Err(err) if quarantined(&err) => break,
            Err(_) => {
                // The broken connection, seen by this call.
                assert!(Instant::now() < give_up, "never reconnected");
                sleep(Duration::from_millis(50)).await;
            }
            Ok(granted) => panic!("a restarted server answered {granted} in quarantine"),
        }
    }
    assert_eq!(locker.paths().fast_grants, 1);
    let admin = raw(&server).await;
    assert_eq!(key_type(&admin, "b").await, "none");
}

#[tokio::test]
async fn a_user_without_set_is_served_by_the_scripts() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let admin = raw(&server).await;
    admin
        .cmd(&[
            "ACL", "SETUSER", "noset", "on", ">pw", "~*", "&*", "+@all", "-set",
        ])
        .await;
    let url = format!("redis://noset:pw@127.0.0.1:{}", server.port());
    let locker = RedisLocker::connect(&url, config(Duration::from_secs(30), Duration::ZERO))
        .await
        .expect("connect as noset");
    for uid in ["a", "b"] {
        assert!(locker.lock(&args(uid, &["x"])).await.unwrap());
        assert_eq!(key_type(&admin, "x").await, "hash");
        assert!(locker.unlock(&args(uid, &["x"])).await.unwrap());
    }
    let paths = locker.paths();
    assert_eq!(paths.fast_grants, 0);
    assert_eq!(paths.script_grants, 2, "{paths:?}");
}
