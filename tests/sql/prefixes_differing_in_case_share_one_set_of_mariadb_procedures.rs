//! Reproduces a past break: on MariaDB, whose procedure names are case-insensitive while its table names are not, a locker with the prefix `PC_` found and called the procedures a locker with `pc_` had made over `pc_entries`, so its one-round-trip grants were made in another locker's table while its transactions used its own, and two writers held one name.
//!
//! A locker with the prefix `cs_` is set up first: its procedures
//! `cs_grant_v1` and `cs_release_v1` are made over `cs_entries`. A locker
//! with `CS_` is then set up over `CS_entries`: its grant of a free name,
//! and a second writer's grant of the same name through the same locker,
//! must not both succeed.

use std::time::Duration;

use quorum_lock::sql::SqlLocker;
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::Servers;

fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["x".to_owned()].into(),
        owner: "test".into(),
        source: "tests/sql/prefixes_differing_in_case_share_one_set_of_mariadb_procedures.rs"
            .into(),
        quorum: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_locker_never_grants_one_name_to_two_writers_beside_a_prefix_of_another_case() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let url = servers.maria.clone();
    let lower = SqlLocker::connect(&url, config("cs_", Duration::from_secs(60), Duration::ZERO))
        .await
        .expect("a database");
    // Its setup makes the procedures over cs_entries.
    assert!(lower.lock(&args("unrelated")).await.expect("a lock on cs_"));
    assert!(lower
        .unlock(&args("unrelated"))
        .await
        .expect("an unlock on cs_"));
    let upper = SqlLocker::connect(&url, config("CS_", Duration::from_secs(60), Duration::ZERO))
        .await
        .expect("a database");
    let first = tokio::time::timeout(Duration::from_secs(5), upper.lock(&args("first")))
        .await
        .expect("within the timeout")
        .expect("a lock");
    let second = tokio::time::timeout(Duration::from_secs(5), upper.lock(&args("second")))
        .await
        .expect("within the timeout")
        .expect("a lock");
    assert!(
        !(first && second),
        "one CS_ locker granted the name x to two writers: the first grant went to cs_entries \
         through the cs_ procedures, the second to CS_entries"
    );
}
