//! A release in any mode (write, read, forced by uid), naming other
//! names than its place, ends the waiter's place on every name: nothing
//! of it stays in the table, counted against no connection's limit or
//! charged to nobody.
#![cfg(feature = "net")]

use crate::node::{args, names, remote, reservation, start, TOKEN};
use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, WaitReply};

#[derive(Clone, Copy, Debug)]
enum Release {
    Write,
    Read,
    Forced,
}

async fn run(release: Release, mode: LockMode) -> Result<(), String> {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 2;
    config.max_bytes_per_connection = 64 << 20;
    let node = start(config).await;
    let client = remote(&node).await;
    assert!(client
        .lock(&args("holder", &["held".to_string()]))
        .await
        .unwrap());
    let holders = node.stats.lock_bytes();
    for step in 0..6 {
        let uid = format!("w{step:03}");
        let reply = client
            .lock_wait(&args(&uid, &names(step)), mode, &reservation())
            .await;
        match reply {
            Ok(WaitReply::Refused) => {}
            other => return Err(format!("step {step}: the wait got {other:?}")),
        }
        let elsewhere = args(&uid, &["elsewhere".to_string()]);
        let released = match release {
            Release::Write => client.unlock(&elsewhere).await,
            Release::Read => client.runlock(&elsewhere).await,
            Release::Forced => client.force_unlock(&elsewhere).await,
        };
        if let Err(err) = released {
            return Err(format!("step {step}: the release failed: {err}"));
        }
    }
    let places = node.locker.waiting();
    let charged = node.stats.lock_bytes() - holders;
    if places > 0 && charged == 0 {
        return Err(format!("{places} places left in the table, uncharged"));
    }
    if places > 2 * 201 {
        return Err(format!(
            "{places} places left in the table ({} requests), beyond the limit of 2",
            places / 201
        ));
    }
    Ok(())
}

/// Waits in write and read mode, each released by its uid in every mode
/// on a name it does not wait on.
#[tokio::test]
async fn a_release_in_any_mode_leaves_no_uncounted_place_behind() {
    let mut broken = Vec::new();
    for release in [Release::Write, Release::Read, Release::Forced] {
        for mode in [LockMode::Write, LockMode::Read] {
            if let Err(why) = run(release, mode).await {
                broken.push(format!("{release:?} release of a {mode:?} place: {why}"));
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}
