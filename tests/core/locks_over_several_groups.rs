//! The lock API over several groups (`Groups`, three in-process clusters of
//! three lockers): exclusion and sharing across groups, no deadlock between
//! locks that name the same groups in any order, a dropped acquisition
//! leaving nothing behind, fencing per part, and a semaphore living in its
//! name's group.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::{Dsync, Error, Groups, LocalLocker, NetLocker};
use tokio::time::{sleep, timeout};

/// Groups "a", "b" and "c" of three lockers each; the lockers are kept so
/// that the tests can look into their tables.
fn three_groups(seed: u64) -> (Groups, Vec<Vec<Arc<LocalLocker>>>) {
    let tables: Vec<Vec<Arc<LocalLocker>>> = (0..3)
        .map(|_| (0..3).map(|_| Arc::new(LocalLocker::new())).collect())
        .collect();
    (another_client(&tables, seed), tables)
}

/// A client of the same lockers with a coordinator of its own.
fn another_client(tables: &[Vec<Arc<LocalLocker>>], seed: u64) -> Groups {
    let members = ["a", "b", "c"]
        .into_iter()
        .zip(tables)
        .enumerate()
        .map(|(g, (id, lockers))| {
            let net: Vec<Arc<dyn NetLocker>> = lockers
                .iter()
                .map(|l| l.clone() as Arc<dyn NetLocker>)
                .collect();
            let ds = Dsync::builder(net)
                .rng_seed(seed + g as u64)
                .build()
                .expect("a coordinator");
            (id, ds)
        });
    Groups::new(members).expect("three groups")
}

/// One name in each of the groups "a", "b" and "c".
fn one_name_per_group(g: &Groups) -> Vec<String> {
    ["a", "b", "c"]
        .iter()
        .map(|id| {
            (0..1000)
                .map(|i| format!("orders/{i}"))
                .find(|name| g.group_of(name) == *id)
                .unwrap_or_else(|| panic!("no name of 1000 lives in group {id}"))
        })
        .collect()
}

fn entries(tables: &[Vec<Arc<LocalLocker>>]) -> usize {
    tables.iter().flatten().map(|l| l.snapshot().len()).sum()
}

#[tokio::test(start_paused = true)]
async fn a_write_lock_over_three_groups_excludes_writers_and_readers_of_any_of_its_names() {
    let (mine, tables) = three_groups(1);
    let theirs = another_client(&tables, 100);
    let names = one_name_per_group(&mine);
    let held = mine
        .rw_mutex(&names)
        .expect("a mutex")
        .lock()
        .await
        .expect("granted");
    assert_eq!(held.parts().count(), 3);
    for name in &names {
        let one = theirs.rw_mutex([name]).expect("a mutex");
        assert!(
            matches!(one.try_lock().await, Err(Error::WouldBlock)),
            "{name}"
        );
        assert!(
            matches!(one.try_read().await, Err(Error::WouldBlock)),
            "{name}"
        );
    }
    held.unlock().await.expect("released");
    let after = theirs.rw_mutex(&names).expect("a mutex").try_lock().await;
    after
        .expect("free once released")
        .unlock()
        .await
        .expect("released");
    assert_eq!(entries(&tables), 0, "entries left after both unlocks");
}

#[tokio::test(start_paused = true)]
async fn read_locks_over_several_groups_share_and_keep_a_writer_out_until_the_last_goes() {
    let (mine, tables) = three_groups(2);
    let theirs = another_client(&tables, 200);
    let names = one_name_per_group(&mine);
    let first = mine
        .rw_mutex(&names)
        .expect("a mutex")
        .read()
        .await
        .expect("a reader");
    let second = theirs
        .rw_mutex(&names[1..])
        .expect("a mutex")
        .try_read()
        .await
        .expect("readers share");
    let writer = theirs.rw_mutex([&names[2]]).expect("a mutex");
    assert!(matches!(writer.try_lock().await, Err(Error::WouldBlock)));
    first.unlock().await.expect("released");
    assert!(
        matches!(writer.try_lock().await, Err(Error::WouldBlock)),
        "the second reader still holds"
    );
    second.unlock().await.expect("released");
    writer
        .try_lock()
        .await
        .expect("free")
        .unlock()
        .await
        .expect("released");
}

/// Six clients lock the same three groups' names, each listing them in its
/// own order and some only two of them: every lock is granted in the end
/// (the groups are always taken in the order of their ids) and no two
/// holders overlap.
#[tokio::test(start_paused = true)]
async fn locks_naming_the_same_groups_in_any_order_never_deadlock_nor_overlap() {
    const CLIENTS: usize = 6;
    const ROUNDS: usize = 10;
    let (first, tables) = three_groups(3);
    let names = one_name_per_group(&first);
    let inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let client = another_client(&tables, 300 + 10 * c as u64);
        let mut order = names.clone();
        order.rotate_left(c % 3);
        if c >= 3 {
            order.reverse();
            order.pop();
        }
        let (inside, done) = (inside.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mutex = client.rw_mutex(&order).expect("a mutex");
            for round in 0..ROUNDS {
                let guard = mutex.lock().await.expect("granted");
                // Every client names the name of group b or c, so every
                // two of them exclude each other.
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "client {c} round {round}: two holders"
                );
                sleep(Duration::from_millis(3)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.expect("released");
                done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    let all = futures::future::try_join_all(tasks);
    timeout(Duration::from_secs(600), all)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "deadlocked: {} of {} locks granted",
                done.load(Ordering::SeqCst),
                CLIENTS * ROUNDS
            )
        })
        .expect("every client ran");
    assert_eq!(done.load(Ordering::SeqCst), CLIENTS * ROUNDS);
    assert_eq!(entries(&tables), 0, "entries left after every unlock");
}

#[tokio::test(start_paused = true)]
async fn a_grouped_lock_dropped_while_it_waits_for_a_later_group_leaves_nothing_behind() {
    let (mine, tables) = three_groups(4);
    let theirs = another_client(&tables, 400);
    let names = one_name_per_group(&mine);
    // Group c's name is held: the lock takes a and b, then waits for c.
    let blocker = theirs
        .rw_mutex([&names[2]])
        .expect("a mutex")
        .lock()
        .await
        .expect("granted");
    let waiting = mine.rw_mutex(&names).expect("a mutex");
    let cut = timeout(Duration::from_secs(2), waiting.lock()).await;
    assert!(cut.is_err(), "granted though c was held");
    mine.finish_releases(Duration::from_secs(5))
        .await
        .expect("released");
    // Only the blocker's entries stand: two or three lockers of group c.
    let left: usize = tables[..2]
        .iter()
        .flatten()
        .map(|l| l.snapshot().len())
        .sum();
    assert_eq!(left, 0, "groups a and b keep entries of the dropped lock");
    let a_and_b = theirs
        .rw_mutex(&names[..2])
        .expect("a mutex")
        .try_lock()
        .await;
    a_and_b
        .expect("a and b free")
        .unlock()
        .await
        .expect("released");
    blocker.unlock().await.expect("released");
}

#[tokio::test(start_paused = true)]
async fn each_part_is_fenced_by_its_own_groups_tokens_which_only_grow() {
    let (mine, _tables) = three_groups(5);
    let names = one_name_per_group(&mine);
    let mutex = mine.rw_mutex(&names).expect("a mutex");
    let mut last: Vec<(String, u64)> = Vec::new();
    for round in 0..3 {
        let guard = mutex.lock().await.expect("granted");
        let mut tokens = Vec::new();
        for (id, part) in guard.parts() {
            tokens.push((id.to_owned(), part.fencing_token().await.expect("a token")));
        }
        assert_eq!(
            tokens.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        for (before, now) in last.iter().zip(&tokens) {
            assert!(
                now.1 > before.1,
                "round {round}: group {}'s token went from {} to {}",
                now.0,
                before.1,
                now.1
            );
        }
        last = tokens;
        guard.unlock().await.expect("released");
    }
}

#[tokio::test(start_paused = true)]
async fn a_semaphore_lives_in_its_names_group_and_holds_its_permits_there() {
    let (mine, tables) = three_groups(6);
    let theirs = another_client(&tables, 600);
    let name = "workers";
    let home = ["a", "b", "c"]
        .iter()
        .position(|id| *id == mine.group_of(name))
        .expect("a group");
    let first = mine
        .semaphore(name, 2)
        .expect("a semaphore")
        .acquire()
        .await
        .expect("a permit");
    let second = theirs
        .semaphore(name, 2)
        .expect("a semaphore")
        .acquire()
        .await
        .expect("a permit");
    let third = theirs.semaphore(name, 2).expect("a semaphore");
    assert!(
        matches!(third.try_acquire().await, Err(Error::WouldBlock)),
        "a third permit of two"
    );
    for (g, lockers) in tables.iter().enumerate() {
        let held: usize = lockers.iter().map(|l| l.snapshot().len()).sum();
        assert_eq!(
            held > 0,
            g == home,
            "group {g} holds {held} entries; the semaphore lives in group {home}"
        );
    }
    // An acquire that waited on every slot gives back the waits it did
    // not need in the background; a try right after the release below
    // could meet one of them granted the freed slot.
    theirs
        .finish_releases(Duration::from_secs(5))
        .await
        .expect("background releases done");
    first.unlock().await.expect("released");
    third
        .try_acquire()
        .await
        .expect("a permit freed")
        .unlock()
        .await
        .expect("released");
    second.unlock().await.expect("released");
}
