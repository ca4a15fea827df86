//! Unit tests of `SqlLocker`'s pieces that need no database.

use super::*;

/// The DDL that docs/sql.md shows for teams that create the tables by
/// hand is exactly what the locker runs.
#[test]
fn the_documented_ddl_is_the_ddl_the_locker_runs() {
    let doc = include_str!("../../docs/sql.md");
    let backends = [
        #[cfg(feature = "postgres")]
        Backend::Postgres,
        #[cfg(feature = "mysql")]
        Backend::MySql,
    ];
    for backend in backends {
        for statement in schema(backend, &SqlConfig::default()).expect("the default config") {
            // Procedures are shown between `DELIMITER //` lines.
            assert!(
                doc.contains(&format!("{statement};")) || doc.contains(&format!("{statement}//")),
                "docs/sql.md lacks this {} statement:\n{statement};",
                backend.name()
            );
        }
    }
}

#[test]
fn prefixes_and_schemas_that_are_not_plain_identifiers_are_refused() {
    for prefix in ["a-b", "x;drop", "1abc", &"p".repeat(41)] {
        let config = SqlConfig {
            table_prefix: prefix.to_owned(),
            ..SqlConfig::default()
        };
        let err = SqlLocker::new("postgres://h/db", config).expect_err(prefix);
        assert!(err.to_string().contains("table prefix"), "{err}");
    }
    let config = SqlConfig {
        schema: Some("public\"; --".into()),
        ..SqlConfig::default()
    };
    assert!(SqlLocker::new("postgres://h/db", config).is_err());
}

#[test]
fn urls_that_are_no_database_are_refused_without_their_credentials() {
    for url in ["http://user:pw@h/x", "redis://:pw@h:6379", "h:7001"] {
        let err = SqlLocker::new(url, SqlConfig::default()).expect_err(url);
        let text = err.to_string();
        assert!(text.contains("postgres://"), "{text}");
        assert!(!text.contains("pw"), "{text}");
    }
}

#[tokio::test]
async fn debug_and_endpoint_never_show_the_password() {
    let locker = SqlLocker::new(
        "postgres://app:s3cr3t@db.internal:5432/app",
        SqlConfig::default(),
    )
    .expect("a URL");
    assert_eq!(locker.endpoint(), "postgres://db.internal:5432/app");
    assert!(!format!("{locker:?}").contains("s3cr3t"));
}

#[test]
fn a_start_told_by_a_whole_second_uptime_is_never_taken_as_earlier_than_it_was() {
    use super::dialect::latest_start_ms;
    // A server that started at `start` ms and is asked at `now` ms: both
    // its clocks tick in whole seconds, so it says `now / 1000 - start /
    // 1000`. The estimate must never fall before the real start.
    for start in (0..3000).step_by(7) {
        for elapsed in (0..4000).step_by(11) {
            let now = start + elapsed;
            let uptime = now / 1000 - start / 1000;
            let estimate = latest_start_ms(now, uptime);
            assert!(
                estimate >= start,
                "start {start} ms, asked at {now} ms, uptime {uptime} s: estimated {estimate} ms"
            );
            assert!(
                estimate <= now,
                "a start after the question: {estimate} > {now}"
            );
        }
    }
}

/// The shape a MySQL locker checks its tables against is the shape it
/// makes them with.
#[cfg(feature = "mysql")]
#[test]
fn the_mysql_shape_checked_is_the_shape_made() {
    use super::dialect::{MYSQL_ENTRY_COLUMNS, MYSQL_FENCE_COLUMNS};
    let made = schema(Backend::MySql, &SqlConfig::default())
        .expect("the default config")
        .join("\n");
    for (column, kind, collation, nullable, default) in
        MYSQL_ENTRY_COLUMNS.iter().chain(&MYSQL_FENCE_COLUMNS)
    {
        // A primary key's column is NOT NULL without saying so.
        let (kind, nullable) = match *kind {
            "int" if *column == "id" => ("int PRIMARY KEY", &true),
            kind => (kind, nullable),
        };
        let collated = match *collation {
            "" => String::new(),
            collation => format!(" CHARACTER SET ascii COLLATE {collation}"),
        };
        let null = if *nullable { "" } else { " NOT NULL" };
        let default = match default {
            Some("") => " DEFAULT ''".to_owned(),
            Some(d) => format!(" DEFAULT {d}"),
            None => String::new(),
        };
        let line = format!("{column} {kind}{collated}{null}{default}");
        assert!(
            made.contains(&line),
            "schema() makes no column `{line}`:\n{made}"
        );
    }
}

/// The hint that sends a call past the one-round-trip routines counts the
/// other waits on a name, and forgets a wait once it is released,
/// re-registered under other names, or stale.
#[tokio::test(start_paused = true)]
async fn the_hint_of_other_waiters_follows_the_waits() {
    use crate::locker::wait::{PushEvent, PushSink, Wake};
    struct Nobody;
    impl PushSink for Nobody {
        fn push(&self, _: usize, _: &str, _: PushEvent) {}
    }
    let wake = Wake::new(Arc::new(Nobody), 0);
    let args = |uid: &str, names: &[&str]| LockArgs {
        uid: uid.into(),
        resources: names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .into(),
        owner: "o".into(),
        source: "s".into(),
        quorum: 1,
    };
    let names = |n: &[&str]| n.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let ttl = Duration::from_secs(10);
    let waits = waits::Waits::default();
    waits.register(
        &args("a", &["x"]),
        LockMode::Write,
        "1".into(),
        ttl,
        wake.clone(),
    );
    assert!(
        !waits.others_wait_on(&names(&["x"]), "a"),
        "its own wait is no other's"
    );
    assert!(waits.others_wait_on(&names(&["x"]), "b"));
    assert!(!waits.others_wait_on(&names(&["y"]), "b"));
    waits.register(
        &args("b", &["x", "y"]),
        LockMode::Write,
        "2".into(),
        ttl,
        wake.clone(),
    );
    assert!(waits.others_wait_on(&names(&["x"]), "a"));
    assert!(waits.others_wait_on(&names(&["z", "y"]), "a"));
    // Asked again for another name: its old one is no longer counted.
    waits.register(
        &args("b", &["z"]),
        LockMode::Write,
        "2".into(),
        ttl,
        wake.clone(),
    );
    assert!(!waits.others_wait_on(&names(&["x", "y"]), "a"));
    assert!(waits.others_wait_on(&names(&["z"]), "a"));
    waits.forget("b");
    assert!(!waits.others_wait_on(&names(&["z"]), "a"));
    // Stale after two place lifetimes without asking again.
    tokio::time::advance(ttl * 2).await;
    let _ = waits.watched_names(true);
    assert!(!waits.others_wait_on(&names(&["x"]), "b"));
}
