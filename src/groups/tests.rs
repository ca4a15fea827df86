use std::collections::HashMap;

use super::*;
use crate::{LocalLocker, NetLocker};

fn cluster(nodes: usize) -> Dsync {
    let lockers: Vec<Arc<dyn NetLocker>> = (0..nodes)
        .map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>)
        .collect();
    Dsync::new(lockers).expect("a coordinator")
}

fn groups(ids: &[&str]) -> Groups {
    Groups::new(ids.iter().map(|id| (*id, cluster(1)))).expect("groups")
}

/// Groups of `ids` whose members are those of `of` where `of` has them
/// (one id, one group), new ones of one locker otherwise.
fn groups_beside(of: &Groups, ids: &[&str]) -> Groups {
    let member = |id: &str| of.dsync(id).cloned().unwrap_or_else(|| cluster(1));
    Groups::new(ids.iter().map(|id| (*id, member(id)))).expect("groups")
}

#[test]
fn a_million_names_spread_evenly_over_eight_groups() {
    let ids: Vec<String> = (0..8).map(|g| format!("group-{g}")).collect();
    let g = Groups::new(ids.iter().map(|id| (id.as_str(), cluster(1)))).expect("groups");
    let mut counts: HashMap<&str, usize> = HashMap::new();
    let names = 1_000_000;
    for n in 0..names {
        *counts.entry(g.group_of(&format!("name-{n}"))).or_default() += 1;
    }
    let mean = names as f64 / 8.0;
    let busiest = counts.values().copied().max().unwrap_or(0) as f64;
    assert_eq!(counts.len(), 8, "{counts:?}");
    assert!(
        busiest <= 1.05 * mean,
        "the busiest group holds {busiest} names, {:.3}× the mean: {counts:?}",
        busiest / mean
    );
}

#[test]
fn adding_a_group_moves_only_the_names_that_go_to_it() {
    let before = groups(&["a", "b", "c", "d"]);
    let after = groups_beside(&before, &["a", "b", "c", "d", "e"]);
    let names = 100_000;
    let mut moved = 0;
    for n in 0..names {
        let name = format!("name-{n}");
        let (was, is) = (before.group_of(&name), after.group_of(&name));
        if was != is {
            assert_eq!(
                is, "e",
                "{name} moved from {was} to {is}, not to the new group"
            );
            moved += 1;
        }
    }
    let share = moved as f64 / names as f64;
    assert!(
        (0.18..0.22).contains(&share),
        "{share:.3} of the names moved, where one in five should"
    );
    // Removing it moves them back, and only them.
    for n in 0..1_000 {
        let name = format!("name-{n}");
        if after.group_of(&name) != "e" {
            assert_eq!(before.group_of(&name), after.group_of(&name));
        }
    }
}

#[test]
fn the_order_the_groups_are_given_in_does_not_matter() {
    let one = groups(&["a", "b", "c"]);
    let other = groups(&["c", "a", "b"]);
    for n in 0..1_000 {
        let name = format!("n{n}");
        assert_eq!(one.group_of(&name), other.group_of(&name));
    }
    assert_eq!(other.ids().collect::<Vec<_>>(), ["a", "b", "c"]);
}

#[test]
fn bad_groups_are_refused_saying_why() {
    let none = Groups::new(Vec::<(&str, Dsync)>::new()).unwrap_err();
    assert!(none.to_string().contains("no group given"), "{none}");
    let twice = Groups::new([("a", cluster(1)), ("a", cluster(1))]).unwrap_err();
    assert!(twice.to_string().contains("given twice"), "{twice}");
    for bad in ["", "a\nb", &"x".repeat(257)] {
        let err = Groups::new([(bad, cluster(1))]).unwrap_err();
        assert!(err.to_string().contains("not usable"), "{err}");
    }
    let old = groups(&["a", "b"]);
    let changing = old
        .changing_to(&groups_beside(&old, &["b", "c"]))
        .expect("a change");
    let again = changing.changing_to(&old).unwrap_err();
    assert!(again.to_string().contains("already changing"), "{again}");
}

#[test]
fn an_id_that_names_other_lockers_in_the_new_groups_is_refused() {
    let local = |name: &str| Arc::new(LocalLocker::with_config(name, Default::default()));
    let dsync = |names: &[&str]| {
        let lockers: Vec<Arc<dyn NetLocker>> = names
            .iter()
            .map(|n| local(n) as Arc<dyn NetLocker>)
            .collect();
        Dsync::new(lockers).expect("a coordinator")
    };
    let old = Groups::new([("a", dsync(&["n1", "n2", "n3"]))]).expect("groups");
    let same =
        Groups::new([("a", dsync(&["n3", "n2", "n1"])), ("b", dsync(&["m1"]))]).expect("groups");
    assert!(
        old.changing_to(&same).is_ok(),
        "the same lockers, in another order"
    );
    let other = Groups::new([("a", dsync(&["n1", "n2", "n4"]))]).expect("groups");
    let err = old.changing_to(&other).unwrap_err();
    assert!(err.to_string().contains("names other lockers"), "{err}");
}

#[test]
fn a_moving_name_lives_in_both_its_groups_while_the_groups_change() {
    let old = groups(&["a", "b", "c"]);
    let new = groups_beside(&old, &["b", "c", "d"]);
    let changing = old.changing_to(&new).expect("a change");
    assert!(changing.is_changing());
    let (mut moving, mut staying) = (0, 0);
    for n in 0..2_000 {
        let name = format!("n{n}");
        let m = changing.rw_mutex([name.as_str()]).expect("a mutex");
        let parts: Vec<&str> = m.groups().map(|(id, _)| id).collect();
        let (was, is) = (old.group_of(&name), new.group_of(&name));
        if was == is {
            assert_eq!(parts, [was], "{name}");
            assert!(changing.election(&name).is_ok(), "an election that stays");
            staying += 1;
        } else {
            let mut both = vec![was, is];
            both.sort_unstable();
            assert_eq!(parts, both, "{name}: taken in the order of the ids");
            moving += 1;
            let err = changing.election(&name).unwrap_err();
            assert!(err.to_string().contains("moves from group"), "{err}");
            assert!(
                changing.semaphore(&name, 2).is_err(),
                "a semaphore that moves"
            );
        }
        assert_eq!(changing.group_of(&name), is);
    }
    assert!(
        moving > 0 && staying > 0,
        "{moving} moving, {staying} staying"
    );
}

#[test]
fn a_lock_over_names_of_several_groups_takes_one_part_per_group() {
    let g = groups(&["a", "b", "c"]);
    let names: Vec<String> = (0..30).map(|n| format!("n{n}")).collect();
    let m = g.rw_mutex(names.iter().rev().cloned()).expect("a mutex");
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(m.resources(), sorted);
    let parts: Vec<(&str, &[String])> = m.groups().collect();
    assert_eq!(
        parts.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    for (id, names) in parts {
        assert!(names.iter().all(|n| g.group_of(n) == id), "{id}: {names:?}");
    }
    assert!(g.rw_mutex(Vec::<String>::new()).is_err());
    assert!(g.rw_mutex(["bad\nname"]).is_err());
}

#[tokio::test(start_paused = true)]
async fn a_grouped_lock_is_all_or_nothing() {
    let g = groups(&["a", "b"]);
    let (in_a, in_b) = {
        let mut a = None;
        let mut b = None;
        for n in 0..100 {
            let name = format!("n{n}");
            match g.group_of(&name) {
                "a" if a.is_none() => a = Some(name),
                "b" if b.is_none() => b = Some(name),
                _ => {}
            }
        }
        (a.expect("a name in a"), b.expect("a name in b"))
    };
    // Someone holds the name in b: the lock on both takes nothing.
    let other = g.rw_mutex([in_b.as_str()]).expect("a mutex");
    let held = other.lock().await.expect("granted");
    let both = g.rw_mutex([in_a.as_str(), in_b.as_str()]).expect("a mutex");
    assert!(matches!(both.try_lock().await, Err(Error::WouldBlock)));
    assert!(matches!(
        both.lock_timeout(Duration::from_millis(300)).await,
        Err(Error::Timeout)
    ));
    let alone = g.rw_mutex([in_a.as_str()]).expect("a mutex");
    let a_free = alone
        .try_lock()
        .await
        .expect("the part in a was given back");
    drop(a_free);
    held.unlock().await.expect("released");
    g.finish_releases(Duration::from_secs(5))
        .await
        .expect("released");
    let guard = both.lock().await.expect("granted");
    assert_eq!(guard.parts().count(), 2);
    assert!(!guard.is_lost());
    assert!(matches!(other.try_lock().await, Err(Error::WouldBlock)));
    guard.unlock().await.expect("released");
    let again = other.try_read().await.expect("free again");
    drop(again);
}

/// Two names, one in group `a` and one in group `b` of `g`.
fn a_name_in_each(g: &Groups) -> (String, String) {
    let mut a = None;
    let mut b = None;
    for n in 0..100 {
        let name = format!("n{n}");
        match g.group_of(&name) {
            "a" if a.is_none() => a = Some(name),
            "b" if b.is_none() => b = Some(name),
            _ => {}
        }
    }
    (a.expect("a name in a"), b.expect("a name in b"))
}

/// `GroupedMutex::lock_timeout`: "[`lock`](Self::lock) within `timeout`
/// for all the parts together; fails with [`Error::Timeout`] after it".
/// A part's own `DRWMutex::lock_timeout` takes `Duration::MAX` (waiting as
/// long as it takes: tokio's timer saturates); the grouped one, over the
/// same names, must neither panic nor fail on it.
#[tokio::test(start_paused = true)]
async fn a_grouped_lock_timeout_of_duration_max_waits_as_a_parts_does() {
    use futures::FutureExt;
    use std::panic::AssertUnwindSafe;

    let g = groups(&["a", "b"]);
    let (in_a, in_b) = a_name_in_each(&g);
    // One group's own mutex takes it.
    let single = g
        .dsync("a")
        .expect("group a")
        .rw_mutex([in_a.as_str()])
        .expect("a mutex");
    let guard = single
        .lock_timeout(Duration::MAX)
        .await
        .expect("DRWMutex::lock_timeout(Duration::MAX) is granted");
    guard.unlock().await.expect("released");

    let both = g.rw_mutex([in_a.as_str(), in_b.as_str()]).expect("a mutex");
    let write = AssertUnwindSafe(both.lock_timeout(Duration::MAX))
        .catch_unwind()
        .await;
    let write = write.unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("GroupedMutex::lock_timeout(Duration::MAX) panicked: {why}")
    });
    write
        .expect("granted: the names are free")
        .unlock()
        .await
        .expect("released");
    let read = AssertUnwindSafe(both.read_timeout(Duration::MAX))
        .catch_unwind()
        .await;
    assert!(
        read.is_ok(),
        "GroupedMutex::read_timeout(Duration::MAX) panicked"
    );
}

/// docs/groups.md: "No deadlock between two such locks", "a panic or an
/// unclear error on bad input" aside; and `changing_to`: "one id, one
/// group". A group whose lockers keep their entries but get a new id (a
/// rename: `b` becomes `c`, the same lockers) is either refused by
/// `changing_to`, as an id naming other lockers is, or its moving names can
/// still be locked on the changing list. Here nobody else holds anything.
#[tokio::test(start_paused = true)]
async fn a_group_given_a_new_id_for_the_same_lockers_is_refused_or_its_moving_names_can_be_locked()
{
    let old = groups(&["a", "b"]);
    let shared = old.dsync("b").expect("group b").clone();
    let new = Groups::new([
        ("a", old.dsync("a").expect("group a").clone()),
        ("c", shared),
    ])
    .expect("groups");
    let changing = match old.changing_to(&new) {
        Err(Error::InvalidArgument(_)) => return,
        Err(other) => panic!("refused, but not as an invalid argument: {other}"),
        Ok(changing) => changing,
    };
    // A name that moves from b to c: both parts on the same lockers.
    let name = (0..200)
        .map(|n| format!("n{n}"))
        .find(|n| old.group_of(n) == "b" && new.group_of(n) == "c")
        .expect("a name moving from b to c");
    let mutex = changing.rw_mutex([name.as_str()]).expect("a mutex");
    let parts: Vec<&str> = mutex.groups().map(|(id, _)| id).collect();
    assert_eq!(parts, ["b", "c"]);
    let tried = mutex.try_lock().await.map(drop);
    g_finish(&changing).await;
    let waited = mutex.lock_timeout(Duration::from_secs(60)).await.map(drop);
    assert!(
        tried.is_ok() && waited.is_ok(),
        "the free name {name} on the changing list: try_lock gave {tried:?}, \
         lock_timeout(60s) gave {waited:?} (the part in c waits for the part in b, \
         on the same lockers)"
    );
}

async fn g_finish(g: &Groups) {
    g.finish_releases(Duration::from_secs(5))
        .await
        .expect("released");
}

/// docs/groups.md: "Elections and semaphores live in the group of their
/// name (`Groups::election`, `Groups::semaphore`)"; `group_of`: "The id of
/// the group `name` lives in". The election `name` is held by the lockers
/// of `group_of(name)`.
#[tokio::test(start_paused = true)]
async fn an_election_lives_in_the_group_of_its_name() {
    let g = groups(&["a", "b", "c"]);
    // A name whose election resource hashes elsewhere than the name.
    let name = (0..200)
        .map(|n| format!("leader-{n}"))
        .find(|n| g.group_of(n) != g.group_of(&format!("election/{n}")))
        .expect("such a name");
    let election = g.election(&name).expect("an election");
    let leadership = election.try_campaign(&b"me"[..]).await.expect("leader");
    let mut holders = Vec::new();
    for id in ["a", "b", "c"] {
        for locker in g.dsync(id).expect("a group").lockers() {
            if !locker.locks().await.expect("locks").is_empty() {
                holders.push(id);
            }
        }
    }
    assert_eq!(
        holders,
        [g.group_of(&name)],
        "the election {name:?} is held in group(s) {holders:?}, while group_of({name:?}) is {:?}",
        g.group_of(&name)
    );
    drop(leadership);
}

/// The brief's "a panic or an unclear error on bad input", and
/// `Groups::semaphore`/`Groups::election`: they fail "as
/// [`Dsync::semaphore`]/[`Dsync::election`] do" and, while the groups
/// change, refuse a moving name "with `Error::InvalidArgument`: resign, and
/// campaign again once every client runs `new`". A request that is bad in
/// itself (no permits, a name with a newline) is told what is wrong with
/// it on the changing list too, not told to wait for the change to end
/// (after which it fails anyway).
#[test]
fn bad_input_on_the_changing_list_is_refused_for_what_is_wrong_with_it() {
    let old = groups(&["a", "b", "c"]);
    let new = groups_beside(&old, &["b", "c", "d"]);
    let changing = old.changing_to(&new).expect("a change");
    let moves = |resource: String| old.group_of(&resource) != new.group_of(&resource);
    let semaphore = (0..200)
        .map(|n| format!("pool-{n}"))
        .find(|n| moves(format!("semaphore/{n}")))
        .expect("a semaphore that moves");
    let election = (0..200)
        .map(|n| format!("bad\nleader-{n}"))
        .find(|n| moves(format!("election/{n}")))
        .expect("an election that moves");
    let mut unclear = Vec::new();
    let plain = old.semaphore(&semaphore, 0).expect_err("no permits");
    let told = changing.semaphore(&semaphore, 0).expect_err("no permits");
    if told.to_string() != plain.to_string() {
        unclear.push(format!(
            "semaphore({semaphore:?}, 0): {told} (not: {plain})"
        ));
    }
    let plain = old.election(&election).expect_err("a newline");
    let told = changing.election(&election).expect_err("a newline");
    if told.to_string() != plain.to_string() {
        unclear.push(format!("election({election:?}): {told} (not: {plain})"));
    }
    assert!(unclear.is_empty(), "{unclear:#?}");
}

/// `Groups::place` is documented as the rule `group_of` follows, for
/// programs that place a name without building the groups.
#[test]
fn place_agrees_with_group_of_whatever_the_order_of_the_ids() {
    let ids = ["east", "west", "north", "1", "2"];
    let g = groups(&ids);
    let mut reversed = ids;
    reversed.reverse();
    for n in 0..10_000 {
        let name = format!("name-{n}");
        assert_eq!(Groups::place(ids, &name), Some(g.group_of(&name)), "{name}");
        assert_eq!(
            Groups::place(reversed, &name),
            Some(g.group_of(&name)),
            "{name}"
        );
    }
    assert_eq!(Groups::place(["east", "east"], "x"), Some("east"));
    assert_eq!(Groups::place(std::iter::empty(), "x"), None);
}
