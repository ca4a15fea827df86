//! Shared set-up of the scenes in which an admin forces open one name of
//! each of a client's locks ("A compromised client" in
//! docs/lock-servers.md): the server over a local locker of a short
//! validity, the culprit's lock arguments, the admin's force of each lock's
//! first name, the culprit's refreshes for three validities, and the count
//! of entries the force left; for the scenes that force every name open,
//! the fill until the table is full, the check that it is empty after, and
//! another client's lock in it.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{RemoteLocker, ServerConfig};
use quorum_lock::{LockArgs, NetLocker};
use tokio::sync::oneshot;

use crate::capped::{self, bounded};
use crate::lockers;
use crate::node::TOKEN;

/// The validity of the locker behind every such scene: short, so that
/// three validities pass in three seconds.
pub const VALIDITY: Duration = Duration::from_secs(1);

/// The names of each lock that fills the table: nine, so that forcing one
/// open leaves eight.
pub const NINE: [&str; 9] = ["0", "1", "2", "3", "4", "5", "6", "7", "8"];

/// The arguments of the culprit's calls, as `source` (the test file, to be
/// told apart in listings): owner "culprit", quorum 1.
pub fn culprit_args(source: &'static str) -> impl Fn(&str, &[String]) -> LockArgs + Copy {
    move |uid: &str, names: &[String]| LockArgs {
        uid: uid.into(),
        resources: names.to_vec().into(),
        owner: "culprit".into(),
        source: source.into(),
        quorum: 1,
    }
}

/// A lock server with `config` over a local locker named `name` of
/// [`VALIDITY`] and no quarantine, so that what a force leaves expires
/// within a second; the address and the server's stop.
pub async fn serve(name: &str, config: ServerConfig) -> (String, oneshot::Sender<()>) {
    let locker = lockers::without_quarantine(name, VALIDITY);
    capped::serve(locker, config).await
}

/// The admin forces the first name of each of `locks` open; each force
/// must succeed.
pub async fn force_the_first_name_of_each(
    admin: &RemoteLocker,
    locks: &[LockArgs],
    args: impl Fn(&str, &[String]) -> LockArgs,
) {
    for lock in locks {
        let by_name = args("", &lock.resources[..1]);
        assert_eq!(
            bounded("force", admin.force_unlock(&by_name)).await,
            Ok(true),
            "forced open"
        );
    }
}

/// The culprit refreshes each of `locks` every 200 ms for three
/// validities, whatever the server answers (what is checked is what the
/// table keeps after).
pub async fn refresh_for_three_validities(culprit: &RemoteLocker, locks: &[LockArgs]) {
    let until = tokio::time::Instant::now() + 3 * VALIDITY;
    while tokio::time::Instant::now() < until {
        for lock in locks {
            let _ = bounded("refresh", culprit.refresh(lock)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The admin's listing of the table: how many entries it has, and how
/// many of them are left of the first fill ("hog/1/").
pub async fn entries_and_left_over_of_the_first_fill(admin: &RemoteLocker) -> (usize, usize) {
    let listed = bounded("list", admin.locks()).await.expect("listing");
    let left_over = listed
        .iter()
        .filter(|l| l.resource.starts_with("hog/1/"))
        .count();
    (listed.len(), left_over)
}

/// The culprit takes the locks `lock(0)`, `lock(1)`, ... until the server
/// refuses one (at most 1000): the locks it holds, which must be some but
/// fewer than 1000 (the table filled).
pub async fn locks_until_the_table_is_full(
    culprit: &RemoteLocker,
    lock: impl Fn(usize) -> LockArgs,
) -> Vec<LockArgs> {
    let mut held = Vec::new();
    for i in 0..1000 {
        let lock = lock(i);
        match bounded("lock", culprit.lock(&lock)).await {
            Ok(true) => held.push(lock),
            _ => break,
        }
    }
    assert!(
        !held.is_empty() && held.len() < 1000,
        "the table fills: {} locks",
        held.len()
    );
    held
}

/// The admin's listing must show no entry.
pub async fn assert_the_table_is_empty(admin: &RemoteLocker) {
    assert!(
        bounded("list", admin.locks())
            .await
            .expect("listing")
            .is_empty(),
        "the table holds no entry"
    );
}

/// Another client, connecting to `addr`, asks for `lock` in the table the
/// admin emptied: it must be granted.
pub async fn a_lock_in_the_emptied_table_is_granted(addr: &str, lock: &LockArgs) {
    let victim = capped::connect(addr, TOKEN).await;
    let result = bounded("lock", victim.lock(lock)).await;
    assert_eq!(
        result,
        Ok(true),
        "a lock in a table the admin emptied is refused"
    );
}
