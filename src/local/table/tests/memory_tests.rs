//! What a shard keeps in memory: the room it gives back after a peak, and
//! what its entries keep alive.

use super::*;

/// Issue #21, break 7: the expiry index held the request's `Name`, so
/// every entry of a multi-name lock kept the request's whole list of
/// names alive besides the key copy the map holds.
#[test]
fn entries_of_a_multi_name_request_keep_none_of_its_list() {
    let args = LockArgs {
        uid: "u".into(),
        resources: vec!["a".to_string(), "b".to_string()].into(),
        owner: "o".into(),
        source: "s".into(),
        quorum: 1,
    };
    let mut shard = Shard::default();
    let now = Instant::now();
    for pos in 0..2 {
        let name = Name::new(&args.resources, pos);
        shard.grant(
            name,
            &args,
            LockMode::Write,
            now,
            None,
            None,
            &mut Vec::new(),
        );
    }
    assert_eq!(shard.entries(), 2);
    assert_eq!(std::sync::Arc::strong_count(&args.resources), 1);
}

/// A shard gives back the room of entries that went, and
/// the entries it keeps still refresh and expire in order after their
/// nodes moved.
#[test]
fn a_shard_shrinks_after_a_peak_and_keeps_its_order() {
    let args = |uid: String, name: String| LockArgs {
        uid: uid.into(),
        resources: vec![name].into(),
        owner: "o".into(),
        source: "s".into(),
        quorum: 1,
    };
    let mut shard = Shard::default();
    let start = Instant::now();
    let at = |i: u64| start + Duration::from_millis(i);
    let held: Vec<LockArgs> = (0..2000u64)
        .map(|i| {
            let a = args(format!("w{i}"), format!("n{i}"));
            shard.grant(
                Name::new(&a.resources, 0),
                &a,
                LockMode::Write,
                at(i),
                None,
                None,
                &mut Vec::new(),
            );
            a
        })
        .collect();
    let readers: Vec<LockArgs> = (0..2000u64)
        .map(|i| {
            let a = args(format!("r{i}"), "shared".into());
            shard.grant(
                Name::new(&a.resources, 0),
                &a,
                LockMode::Read,
                at(i),
                None,
                None,
                &mut Vec::new(),
            );
            a
        })
        .collect();
    let (map_peak, slab_peak) = (shard.map.capacity(), shard.by_refresh.nodes.capacity());
    let mut freed = Vec::new();
    // Keep every 100th writer and reader.
    for (i, a) in held.iter().chain(&readers).enumerate() {
        if i % 100 != 0 {
            assert!(shard.release(Name::new(&a.resources, 0), &a.uid, None, &mut freed));
        }
    }
    assert_eq!(shard.entries(), 40);
    assert!(shard.map.capacity() * 8 < map_peak, "the map shrank");
    assert!(
        shard.by_refresh.nodes.capacity() * 8 < slab_peak,
        "the slab shrank"
    );
    let Some(Holders::Readers(v)) = shard.get("shared") else {
        panic!("readers kept");
    };
    assert!(v.capacity() <= 2 * v.len(), "the readers' list shrank");
    // Refresh the oldest writer: the others expire first, in order
    // (15 writers and 16 readers by 1.5 s, then 4 and 4 by 2.1 s).
    assert!(shard.refresh("n0", "w0", at(5000)));
    let validity = Duration::from_millis(1000);
    assert_eq!(shard.expire(at(2500), validity, &mut freed), 31);
    assert!(shard.holds("n0", "w0", LockMode::Write));
    assert!(shard.get("n100").is_none());
    assert_eq!(shard.expire(at(3100), validity, &mut freed), 8);
    assert_eq!(shard.entries(), 1);
    assert!(shard.release(Name::new(&held[0].resources, 0), "w0", None, &mut freed));
    assert_eq!(shard.entries(), 0);
}

/// A line that emptied under a holder gives its room back.
#[test]
fn an_emptied_line_keeps_no_room() {
    let args = |uid: &str| LockArgs {
        uid: uid.into(),
        resources: vec!["a".to_string()].into(),
        owner: "o".into(),
        source: "s".into(),
        quorum: 1,
    };
    let (holder, waiter) = (args("h"), args("w"));
    let mut shard = Shard::default();
    let now = Instant::now();
    let name = |a: &LockArgs| Name::new(&a.resources, 0);
    shard.grant(
        name(&holder),
        &holder,
        LockMode::Write,
        now,
        None,
        None,
        &mut Vec::new(),
    );
    let ticket = Ticket { at: 1, tiebreak: 1 };
    let later = now + Duration::from_secs(60);
    let mut notices = Vec::new();
    shard.enqueue(
        name(&waiter),
        &waiter,
        LockMode::Write,
        ticket,
        later,
        None,
        &mut notices,
        &mut Default::default(),
        &mut Vec::new(),
    );
    assert_eq!(shard.map["a"].queue.capacity(), 1, "room for one place");
    assert!(shard.leave(name(&waiter), "w", None, None, &mut Vec::new()));
    assert_eq!(shard.map["a"].queue.capacity(), 0);
}
