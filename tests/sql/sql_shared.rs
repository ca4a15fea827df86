//! What tests of `SqlLocker` share: the settings, lock arguments, client
//! program runs and MariaDB quarantine wait of the tests where it once
//! broke (`fencing_marks_restores_and_extremes.rs`,
//! `one_statement_grants_and_epochs.rs`), the releases of the
//! one-round-trip tests (`one_round_trip_*.rs`), the arguments of a
//! lock of one name that many tests take, and the client of one locker
//! that the scenes of another role's objects build.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{Dsync, LockArgs, NetLocker, Timeouts};

/// A client of `locker` alone, as `owner`, whose waits look again only
/// every 20 s: a wait that ends sooner was woken by the locker.
pub fn client_of(locker: SqlLocker, owner: &str) -> Dsync {
    Dsync::builder(vec![Arc::new(locker) as Arc<dyn NetLocker>])
        .owner(owner)
        .timeouts(Timeouts {
            wait_recheck: Duration::from_secs(20),
            ..Timeouts::default()
        })
        .build()
        .expect("a client")
}

/// Tables named from `prefix`, holders valid for 60 s, no quarantine.
pub fn config(prefix: &str) -> SqlConfig {
    SqlConfig {
        table_prefix: prefix.into(),
        validity: Duration::from_secs(60),
        quarantine: Duration::ZERO,
        ..SqlConfig::default()
    }
}

/// A quarantine long enough to outlast each test's steps after the event,
/// short enough that MariaDB's own start-up quarantine is waited out.
pub fn guarded(prefix: &str) -> SqlConfig {
    SqlConfig {
        validity: Duration::from_secs(5),
        quarantine: Duration::from_secs(5),
        ..config(prefix)
    }
}

/// A locker of the database at `url` with the [`guarded`] settings.
pub async fn guarded_locker(url: &str, prefix: &str) -> SqlLocker {
    SqlLocker::connect(url, guarded(prefix))
        .await
        .expect("connect")
}

/// The arguments of `uid` for `names`, with the owner `owner` and the
/// source `tests/sql{owner}`.
pub fn args_of(owner: &str, uid: &str, names: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .into(),
        owner: owner.into(),
        source: format!("tests/sql{owner}").into(),
        quorum: 1,
    }
}

/// The arguments of `uid` for the one name `name`, from the owner "test"
/// and the source `source`.
pub fn args_from(source: &str, uid: &str, name: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![name.to_owned()].into(),
        owner: "test".into(),
        source: source.into(),
        quorum: 1,
    }
}

/// Runs a client program; its standard output.
pub fn run(program: &str, argv: &[&str]) -> Vec<u8> {
    let out = std::process::Command::new(program)
        .args(argv)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Waits out MariaDB's start-up quarantine.
pub async fn past_quarantine(locker: &SqlLocker) {
    if let Some(left) = locker.quarantine_left().await.unwrap() {
        tokio::time::sleep(left + Duration::from_millis(100)).await;
    }
    assert_eq!(locker.quarantine_left().await.unwrap(), None);
}

/// Not held, or held in the other mode: nothing released; readers share,
/// and the last one's release frees the name. `args` gives the arguments
/// of a uid for a name.
pub async fn only_holders_release_and_readers_share(
    locker: &SqlLocker,
    args: fn(&str, &str) -> LockArgs,
) {
    assert!(!locker.unlock(&args("u3", "free")).await.expect("unlock"));
    assert!(locker.rlock(&args("r1", "shared")).await.expect("rlock"));
    assert!(locker.rlock(&args("r2", "shared")).await.expect("rlock"));
    assert!(!locker.unlock(&args("r1", "shared")).await.expect("unlock"));
    assert!(locker
        .runlock(&args("r1", "shared"))
        .await
        .expect("runlock"));
    // The other reader still holds: a writer is refused.
    assert!(!locker.lock(&args("w", "shared")).await.expect("lock"));
    assert!(locker
        .runlock(&args("r2", "shared"))
        .await
        .expect("runlock"));
    assert!(locker.lock(&args("w", "shared")).await.expect("lock"));
}

/// A locker of the database at `url` with `config`, once its lock and
/// unlock of "other" (uid "o", arguments from `args`) went through.
pub async fn locking_other(
    url: &str,
    config: SqlConfig,
    args: fn(&str, &str) -> LockArgs,
) -> SqlLocker {
    let other = SqlLocker::connect(url, config).await.expect("a database");
    assert!(other.lock(&args("o", "other")).await.expect("lock"));
    assert!(other.unlock(&args("o", "other")).await.expect("unlock"));
    other
}
