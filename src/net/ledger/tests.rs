use super::*;

fn args(uid: &str, names: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .into(),
        owner: "o".into(),
        source: "s".into(),
        quorum: 1,
    }
}

fn ledger(total: usize, per_conn: usize) -> Ledger {
    Ledger::new(Limits {
        validity: Duration::from_secs(60),
        lapse: Duration::from_secs(60),
        total_bytes: total,
        bytes_per_connection: per_conn,
        locks_per_connection: 100,
    })
}

#[tokio::test(start_paused = true)]
async fn charges_follow_grants_releases_and_lapses() {
    let one = lock_bytes(&args("u1", &["a"]));
    let l = ledger(4 * one, 3 * one);
    assert!(matches!(
        l.reserve(1, &args("u1", &["a"])),
        Ok(Reserved::Added(hash, _)) if hash == l.set_hash(&["a".into()])
    ));
    assert!(matches!(
        l.reserve(1, &args("u1", &["a"])),
        Ok(Reserved::Already(..))
    ));
    l.reserve(1, &args("u2", &["b"])).unwrap();
    l.reserve(1, &args("u3", &["c"])).unwrap();
    let err = l.reserve(1, &args("u4", &["d"])).unwrap_err();
    assert!(err.message.contains("over its limit"), "{err:?}");
    assert_eq!(err.limit, Limit::BytesPerConnection);
    // A release naming another set keeps the charge.
    l.release("u1", Some(&["zz".to_string()]));
    assert_eq!(l.usage(1).locks, 3);
    l.release("u1", Some(&["a".to_string()]));
    let usage = l.usage(1);
    assert_eq!((usage.locks, usage.bytes), (2, 2 * one));
    // Another connection refreshing a lock takes it over.
    assert!(l.touch(2, "u2"));
    assert_eq!(l.usage(2).locks, 1);
    assert_eq!(l.usage(1).locks, 1);
    // Closing keeps the total; lapsing frees it.
    l.close(1);
    l.close(2);
    assert_eq!(l.total(), 2 * one);
    tokio::time::sleep(Duration::from_secs(61)).await;
    l.reserve(3, &args("u5", &["e"])).unwrap();
    l.reserve(3, &args("u6", &["f"])).unwrap();
    // Over the total: the lapsed charges of u2 and u3 are pruned.
    l.reserve(3, &args("u7", &["g"])).unwrap();
    assert_eq!(l.total(), 3 * one, "lapsed charges were pruned");
}

#[tokio::test(start_paused = true)]
async fn a_connection_whose_charges_all_lapsed_holds_nothing() {
    let l = ledger(1 << 20, 1 << 20);
    l.reserve(1, &args("u1", &["a"])).unwrap();
    l.reserve(1, &args("u2", &["b"])).unwrap();
    tokio::time::advance(Duration::from_secs(30)).await;
    assert!(l.touch(1, "u2"));
    tokio::time::advance(Duration::from_secs(40)).await;
    // u1 lapsed, u2 was touched 40 s ago: still held.
    assert!(l.holds(1));
    tokio::time::advance(Duration::from_secs(20)).await;
    assert!(!l.holds(1), "every charge of it lapsed");
    assert_eq!(l.total(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_total_is_bounded_across_connections() {
    let one = lock_bytes(&args("u0", &["a"]));
    let l = ledger(4 * one, 100 * one);
    for conn in 0..4u64 {
        l.reserve(conn, &args(&format!("u{conn}"), &["a"])).unwrap();
        l.close(conn);
    }
    let err = l.reserve(9, &args("u9", &["a"])).unwrap_err();
    assert!(err.message.contains("lock table is full"), "{err:?}");
    assert_eq!(err.limit, Limit::LockBytes);
    // An undo naming a uid never charged changes nothing.
    let other = ledger(4 * one, 4 * one);
    let Ok(Reserved::Added(_, before)) = other.reserve(1, &args("u1", &["a"])) else {
        panic!("one lock fits an empty ledger")
    };
    other.undo("u9", Reserved::Added(0, before));
    assert_eq!(other.total(), one);
}

#[tokio::test(start_paused = true)]
async fn proclamations_and_watches_are_charged_and_go_with_their_lock() {
    let lock = args("leader", &["e"]);
    let one = lock_bytes(&lock);
    let value = proclamation_bytes(&lock, 4096);
    let l = ledger(100 * value, one + value + 100);
    l.reserve(1, &lock).unwrap();
    let r = l
        .reserve_board(1, &lock, Board::Proclamation, value)
        .unwrap();
    assert_eq!(l.total(), one + value);
    assert_eq!(l.usage(1).locks, 1, "the same uid: one lock");
    // Undone (the locker kept nothing): back as before.
    l.undo_board("leader", r);
    assert_eq!(l.total(), one);
    l.reserve_board(1, &lock, Board::Proclamation, value)
        .unwrap();
    // A second, smaller value of the same uid keeps the larger charge;
    // one that does not fit is refused with the per-connection limit.
    let small = proclamation_bytes(&lock, 1);
    l.reserve_board(1, &lock, Board::Proclamation, small)
        .unwrap();
    assert_eq!(l.total(), one + value);
    let other = args("other", &["f"]);
    let err = l
        .reserve_board(1, &other, Board::Proclamation, value)
        .unwrap_err();
    assert_eq!(err.limit, Limit::BytesPerConnection, "{err:?}");
    // The release of the lock on the election's name takes the
    // proclamation with it, once the server found the entry gone.
    assert!(l.proclaims("leader"));
    l.release("leader", Some(&["e".to_string()]));
    assert!(l.proclaims("leader"), "a release leaves the proclamation");
    l.release_proclamations("leader", &["e".to_string()]);
    assert_eq!(l.total(), 0);
    let usage = l.usage(1);
    assert_eq!((usage.locks, usage.bytes), (0, 0));
    // A watch is charged once per uid and resource, and lapses as a
    // lock does, not with a release.
    let observer = args("observer", &["e"]);
    let watch = watch_bytes(&observer);
    l.reserve_board(2, &observer, Board::Watch, watch).unwrap();
    l.reserve_board(2, &observer, Board::Watch, watch).unwrap();
    assert_eq!(l.total(), watch);
    l.release("observer", Some(&["e".to_string()]));
    assert_eq!(l.total(), watch);
    tokio::time::sleep(Duration::from_secs(61)).await;
    let tight = ledger(watch, watch);
    tight
        .reserve_board(3, &observer, Board::Watch, watch)
        .unwrap();
    tight.close(3);
    tokio::time::sleep(Duration::from_secs(61)).await;
    // Over the total: the lapsed watch is pruned to make room.
    tight
        .reserve_board(4, &args("o2", &["e"]), Board::Watch, watch)
        .unwrap();
    assert_eq!(tight.total(), watch);
}

/// A refused request that named a set already charged puts back the touch
/// its reservation made, as one that charged a new set does: a lock that
/// expired without a release counts for the idle close a validity after it
/// was last granted or refreshed, not after a later refused request.
#[tokio::test(start_paused = true)]
async fn a_refused_request_for_a_set_already_charged_puts_back_its_touch() {
    let lock = args("u1", &["a"]);
    let l = ledger(100 * lock_bytes(&lock), 100 * lock_bytes(&lock));
    l.reserve(1, &lock).unwrap();
    let granted = l.usage(1).touched;
    tokio::time::sleep(Duration::from_secs(59)).await;
    let again = l.reserve(1, &lock).unwrap();
    assert!(matches!(again, Reserved::Already(..)));
    assert_ne!(l.usage(1).touched, granted, "a reservation touches");
    l.undo(&lock.uid, again);
    assert_eq!(l.usage(1).touched, granted);
    assert!(l.covers(&lock), "the set stays charged");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!l.holds(1), "the lock expired a validity after its grant");
}

/// A place charged beside its uid's own entries on the same names is a
/// charge apart: refused, it takes back only itself; the release of the
/// names gives back both (a release ends the place too).
#[tokio::test(start_paused = true)]
async fn a_place_beside_its_uids_entries_is_charged_apart_and_released_with_them() {
    let lock = args("u1", &["a", "b"]);
    let one = lock_bytes(&lock);
    let l = ledger(100 * one, 100 * one);
    l.reserve(1, &lock).unwrap();
    let beside = l.reserve_beside(1, &lock).unwrap();
    assert!(matches!(beside, Reserved::Added(..)));
    assert_eq!(l.total(), 2 * one);
    l.undo(&lock.uid, beside);
    assert_eq!(l.total(), one, "the refused place's charge alone goes");
    assert!(l.covers(&lock));
    l.reserve_beside(1, &lock).unwrap();
    l.release(&lock.uid, Some(&lock.resources));
    assert_eq!(
        l.total(),
        0,
        "the release gives back the lock's and the place's"
    );
    assert_eq!(l.usage(1).locks, 0);
}

#[tokio::test(start_paused = true)]
async fn a_refused_request_leaves_its_uids_charge_with_the_connection_it_was_on() {
    let (a, b) = (
        lock_bytes(&args("u", &["a"])),
        lock_bytes(&args("u", &["b"])),
    );
    let l = ledger(1 << 20, 1 << 20);
    l.reserve(1, &args("u", &["a"])).unwrap();
    l.reserve(2, &args("v", &["z"])).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    // A new set over connection 2, refused: the charge goes back.
    let added = l.reserve(2, &args("u", &["b"])).unwrap();
    assert_eq!(l.owner("u"), Some(2), "reserved over 2");
    assert_eq!(l.usage(2).bytes, a + b + lock_bytes(&args("v", &["z"])));
    l.undo("u", added);
    assert_eq!(l.owner("u"), Some(1));
    let (one, two) = (l.usage(1), l.usage(2));
    assert_eq!((one.locks, one.bytes), (1, a));
    assert_eq!(two.locks, 1, "v's lock only");
    // The set already charged, asked over 2 and refused: the same.
    let already = l.reserve(2, &args("u", &["a"])).unwrap();
    assert!(matches!(already, Reserved::Already(..)));
    l.undo("u", already);
    assert_eq!(l.owner("u"), Some(1));
    // Touched over 2 after the reservation (a refresh there): it stays.
    let added = l.reserve(2, &args("u", &["b"])).unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(l.touch(2, "u"));
    l.undo("u", added);
    assert_eq!(l.owner("u"), Some(2));
    // Moved from a connection that closed since: back there, counted in
    // the total only.
    let total = l.total();
    let added = l.reserve(1, &args("u", &["b"])).unwrap();
    l.close(2);
    l.undo("u", added);
    assert_eq!(l.owner("u"), Some(2));
    assert_eq!((l.usage(1).locks, l.usage(1).bytes), (0, 0));
    assert_eq!(
        l.usage(2),
        Usage::default(),
        "no usage for a closed connection"
    );
    assert_eq!(l.total(), total);
}

#[tokio::test(start_paused = true)]
async fn a_set_charged_for_a_place_pays_for_entries_once_granted() {
    let l = ledger(1 << 20, 1 << 20);
    let both = args("u", &["a", "b"]);
    l.reserve_place(1, &both).unwrap();
    assert!(l.for_place_alone(&both));
    // Renewed, over this connection or another: still the place's.
    l.reserve_place(2, &both).unwrap();
    assert!(l.for_place_alone(&both));
    // A refresh grants nothing.
    l.reserve_refresh(2, &both).unwrap();
    assert!(l.for_place_alone(&both));
    // A lock call that is refused gives the set back to the place.
    tokio::time::sleep(Duration::from_millis(1)).await;
    let refused = l.reserve(2, &both).unwrap();
    assert!(!l.for_place_alone(&both));
    l.undo("u", refused);
    assert!(l.for_place_alone(&both));
    // Granted when the waiter asked again, or by a push, or by a lock call.
    l.granted_set(&both);
    assert!(!l.for_place_alone(&both));
    // A push grants the set of the place it names, not the uid's others.
    let other = args("u", &["c"]);
    l.reserve_place(2, &other).unwrap();
    let elsewhere = args("u", &["e"]);
    l.reserve_place(3, &elsewhere).unwrap();
    l.granted("u", Some(&other.resources));
    assert!(!l.for_place_alone(&other));
    assert!(l.for_place_alone(&elsewhere));
    // A push whose wait its connection no longer knows grants none.
    l.granted("u", None);
    assert!(l.for_place_alone(&elsewhere));
    let third = args("u", &["d"]);
    l.reserve_place(2, &third).unwrap();
    l.reserve(2, &third).unwrap();
    assert!(!l.for_place_alone(&third));
}

/// Two requests of one uid for one set at once, over two connections: the
/// first adds the set, the second finds it charged. The first refused,
/// its undo must leave the set to the second, which the table may have
/// granted; likewise for an election board's record.
#[tokio::test(start_paused = true)]
async fn a_refused_request_that_added_a_set_another_found_leaves_it_charged() {
    let l = ledger(1 << 20, 1 << 20);
    let lock = args("u", &["a", "b"]);
    let added = l.reserve(1, &lock).unwrap();
    assert!(matches!(added, Reserved::Added(..)));
    let found = l.reserve(2, &lock).unwrap();
    assert!(matches!(found, Reserved::Already(..)));
    let charged = l.total();
    l.undo("u", added);
    assert_eq!(
        l.total(),
        charged,
        "the set the second request stands on stays"
    );
    // Alone, a refused request's set goes.
    let alone = args("v", &["c"]);
    let before = l.total();
    let added = l.reserve(1, &alone).unwrap();
    l.undo("v", added);
    assert_eq!(l.total(), before);

    let leader = args("w", &["e"]);
    let first = l
        .reserve_board(1, &leader, Board::Proclamation, 100)
        .unwrap();
    l.reserve_board(2, &leader, Board::Proclamation, 100)
        .unwrap();
    let charged = l.total();
    l.undo_board("w", first);
    assert_eq!(
        l.total(),
        charged,
        "the record the second call stands on stays"
    );
}

#[tokio::test(start_paused = true)]
async fn a_set_asked_again_with_a_longer_owner_grows_within_the_limits_and_a_refusal_gives_it_back()
{
    let short = args("u", &["a"]);
    let long = LockArgs {
        owner: "o".repeat(512).into(),
        source: "s".repeat(512).into(),
        ..short.clone()
    };
    let (small, large) = (lock_bytes(&short), lock_bytes(&long));
    assert!(large > small + 1000);
    let l = ledger(10 * large, large + small - 1);
    l.reserve_place(1, &short).unwrap();
    assert_eq!(l.usage(1).bytes, small);
    // Asked again with longer text: the set grows to what the table keeps.
    let grown = l.reserve_place(1, &long).unwrap();
    assert!(matches!(grown, Reserved::Already(_, false, g) if g == large - small));
    assert_eq!((l.usage(1).bytes, l.total()), (large, large));
    // Refused: the growth goes back, as nothing touched the set since.
    l.undo("u", grown);
    assert_eq!((l.usage(1).bytes, l.total()), (small, small));
    // The growth is admitted against the connection's limit like a lock.
    l.reserve(1, &args("v", &["b"])).unwrap();
    let err = l.reserve(1, &long).unwrap_err();
    assert_eq!(err.limit, Limit::BytesPerConnection, "{err:?}");
    assert_eq!(
        l.usage(1).bytes,
        2 * small,
        "a refused growth charges nothing"
    );
    // Shorter text later keeps the longest charge (counting too much).
    l.reserve(1, &short).unwrap();
    assert_eq!(l.usage(1).bytes, 2 * small);
}
