//! A `LockServer` serves a `LocalLocker` the program may also lock
//! directly (`LockServer::new` takes an `Arc<LocalLocker>`). PROTOCOL.md,
//! "Versioning": a client refuses "a page that says `more` with less than
//! 512 KiB (an honest one is full but for the next entry)", which holds
//! only while no entry is large. Reproduces a past break: a `LocalLocker`
//! took an owner of any length, and an honest server whose next entry (a
//! 700 KiB owner its own program set) did not fit what was left of its
//! page sent a page the client refused, so the admin could not list it.
//! Every locker now takes the uid, owner and source only up to the lock
//! protocol's limits, and a table of entries at those limits comes whole.
#![cfg(feature = "net")]

use std::sync::Arc;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{Error, LocalLocker, LockArgs, NetLocker, MAX_OWNER_LEN, MAX_SOURCE_LEN};

use crate::loopback;

const TOKEN: &str = "client-secret";
const ADMIN: &str = "admin-secret";

fn args(uid: &str, name: &str, owner: String) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![name.to_owned()].into(),
        owner: owner.into(),
        source: "s".repeat(MAX_SOURCE_LEN).into(),
        quorum: 1,
    }
}

#[tokio::test]
async fn a_table_of_entries_at_the_text_limits_is_listed_whole_and_longer_text_refused() {
    let locker = Arc::new(LocalLocker::new());
    // 1,500 entries of about 1.1 KiB each: two pages and a bit, each
    // page cut where its next entry does not fit.
    for n in 0..1500 {
        let granted = locker
            .lock(&args(
                &format!("uid-{n}"),
                &format!("a/{n:04}"),
                "o".repeat(MAX_OWNER_LEN),
            ))
            .await
            .expect("a local lock at the limits");
        assert!(granted, "entry {n} granted");
    }
    // An owner of 700 KiB, set by the program itself, not over the wire.
    let refused = locker
        .lock(&args("uid-big", "b", "o".repeat(700 << 10)))
        .await;
    match refused {
        Err(Error::InvalidArgument(reason)) => assert!(
            reason.contains("owner") && reason.contains(&MAX_OWNER_LEN.to_string()),
            "{reason}"
        ),
        other => panic!("an owner of 700 KiB was not refused: {other:?}"),
    }
    let whole = locker.snapshot().len();
    assert_eq!(whole, 1500);

    let config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    let server = LockServer::new(locker.clone(), config).expect("valid config");
    let (bound, _stop) = loopback::serve(server).await;

    let admin = RemoteLocker::connect(bound.to_string(), RemoteConfig::new(ADMIN))
        .await
        .expect("connect");
    match admin.locks().await {
        Ok(listed) => assert_eq!(listed.len(), whole, "the listing came whole"),
        Err(err) => panic!("an honest server holding {whole} entries could not be listed: {err}"),
    }
}
