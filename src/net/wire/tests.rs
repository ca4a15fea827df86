//! Round trips and bounds of the lock protocol's messages.

use super::*;

#[test]
fn a_version_2_rejection_leads_to_version_2() {
    // The exact reason a version-2 server gives.
    let v2 = "protocol version 3 is not supported; this server speaks 2";
    assert_eq!(fallback_version(v2, 3), Some(2));
    // Ours, as a future client would read it.
    // The exact reason a version-3 server gives.
    let v3 = "protocol version 4 is not supported; this server speaks 2 and 3";
    assert_eq!(fallback_version(v3, 4), Some(3));
    // The exact reason a version-4 server gives.
    let v4 = "protocol version 5 is not supported; this server speaks 2, 3 and 4";
    assert_eq!(fallback_version(v4, 5), Some(4));
    // The exact reason a version-5 server gives.
    let v5 = "protocol version 6 is not supported; this server speaks 2, 3, 4 and 5";
    assert_eq!(fallback_version(v5, 6), Some(5));
    // Ours, as a future client would read it.
    assert_eq!(
        unsupported_version(7),
        "protocol version 7 is not supported; this server speaks 2, 3, 4, 5 and 6"
    );
    assert_eq!(fallback_version(&unsupported_version(7), 7), Some(6));
    assert_eq!(fallback_version(&unsupported_version(9), 4), Some(3));
    assert_eq!(fallback_version(&unsupported_version(9), 3), Some(2));
    // Never upwards, never to a version this build does not speak,
    // never for another reason.
    assert_eq!(fallback_version(v2, 2), None);
    assert_eq!(
        fallback_version(
            "protocol version 3 is not supported; this server speaks 1",
            3
        ),
        None
    );
    assert_eq!(fallback_version("invalid token", 3), None);
    // However the list is written.
    assert_eq!(
        versions_named("protocol version 6 is not supported (this server speaks 2, 3, 4 and 5)")
            .collect::<Vec<_>>(),
        [2, 3, 4, 5]
    );
    assert!(unsupported_version(99).starts_with("protocol version 99 is not supported"));
}

#[test]
fn version_3_messages_round_trip_and_keep_the_old_indexes() {
    let args = WireArgs {
        uid: "u".into(),
        resources: vec!["r".to_owned()].into(),
        owner: "o".into(),
        source: "s".into(),
        quorum: 2,
        oversize: None,
    };
    let wait = Request {
        id: 7,
        op: Op::LockWait {
            args: args.clone(),
            mode: WireMode::Write,
            ticket: WireTicket { at: 5, tiebreak: 6 },
            place_ttl: Duration::from_millis(1500),
            push: true,
        },
    };
    let bytes = encode(&wait).unwrap();
    // id, then the variant index after the eight of version 2.
    assert_eq!(&bytes[..2], &[7, 8]);
    assert_eq!(decode::<Request>(&bytes).unwrap(), wait);
    let fence = Request {
        id: 1,
        op: Op::Fence {
            args,
            mode: WireMode::Read,
            floor: 300,
        },
    };
    let bytes = encode(&fence).unwrap();
    assert_eq!(&bytes[..2], &[1, 9]);
    assert_eq!(decode::<Request>(&bytes).unwrap(), fence);
    let push = Response {
        id: UNSOLICITED,
        reply: Reply::Push {
            uid: "ab".into(),
            event: WirePushEvent::Wounded,
        },
    };
    assert_eq!(encode(&push).unwrap(), [0, 6, 2, b'a', b'b', 1]);
    let queued = Response {
        id: 3,
        reply: Reply::Wait(WireWaitReply::Queued),
    };
    assert_eq!(encode(&queued).unwrap(), [3, 4, 1]);
    let token = Response {
        id: 3,
        reply: Reply::Fence(Some(2)),
    };
    assert_eq!(encode(&token).unwrap(), [3, 5, 1, 2]);
    assert_eq!(Op::Health.since(), 2);
    assert_eq!(fence.op.since(), 3);
}

#[test]
fn version_4_messages_round_trip_and_keep_the_old_indexes() {
    let status = Request {
        id: 2,
        op: Op::Status,
    };
    // id, then the variant index after the ten of versions 2 and 3.
    assert_eq!(encode(&status).unwrap(), [2, 10]);
    assert_eq!(Op::Status.since(), 4);
    let quarantined = Response {
        id: 2,
        reply: Reply::Status {
            quarantine_left: Some(Duration::new(41, 5)),
            entries: 3,
        },
    };
    // The variant index after the seven of versions 2 and 3, then
    // `Some`, seconds, nanoseconds, entries.
    let bytes = encode(&quarantined).unwrap();
    assert_eq!(bytes, [2, 7, 1, 41, 5, 3]);
    assert_eq!(decode::<Response>(&bytes).unwrap(), quarantined);
    let granting = Response {
        id: 2,
        reply: Reply::Status {
            quarantine_left: None,
            entries: 0,
        },
    };
    assert_eq!(encode(&granting).unwrap(), [2, 7, 0, 0]);
}

#[test]
fn version_5_messages_round_trip_and_keep_the_old_indexes() {
    let args = WireArgs {
        uid: "u".into(),
        resources: vec!["e".to_owned()].into(),
        owner: "o".into(),
        source: "s".into(),
        quorum: 2,
        oversize: None,
    };
    let p = Proclamation::new(7, 1, &b"ab"[..]).unwrap();
    let proclaim = Request {
        id: 3,
        op: Op::Proclaim {
            args: args.clone(),
            proclamation: WireProclamation::from(&p),
        },
    };
    let bytes = encode(&proclaim).unwrap();
    // id, then the variant index after the eleven of versions 2 to 4.
    assert_eq!(&bytes[..2], &[3, 11]);
    // ... the arguments, then term, seq and the value's length and bytes.
    assert!(bytes.ends_with(&[7, 1, 2, b'a', b'b']));
    assert_eq!(decode::<Request>(&bytes).unwrap(), proclaim);
    assert_eq!(proclaim.op.since(), 5);
    let leader = Request {
        id: 4,
        op: Op::Leader {
            args,
            watch: Some(Duration::from_secs(3)),
        },
    };
    let bytes = encode(&leader).unwrap();
    assert_eq!(&bytes[..2], &[4, 12]);
    assert!(bytes.ends_with(&[1, 3, 0]));
    assert_eq!(decode::<Request>(&bytes).unwrap(), leader);
    assert_eq!(leader.op.since(), 5);
    // The variant index after the eight replies of versions 2 to 4.
    let found = Response {
        id: 4,
        reply: Reply::Leader(Some(WireProclamation::from(&p))),
    };
    let bytes = encode(&found).unwrap();
    assert_eq!(bytes, [4, 8, 1, 7, 1, 2, b'a', b'b']);
    assert_eq!(decode::<Response>(&bytes).unwrap(), found);
    assert_eq!(
        encode(&Response {
            id: 4,
            reply: Reply::Leader(None)
        })
        .unwrap(),
        [4, 8, 0]
    );
    let changed = Response {
        id: UNSOLICITED,
        reply: Reply::Push {
            uid: "ab".into(),
            event: WirePushEvent::Changed,
        },
    };
    assert_eq!(encode(&changed).unwrap(), [0, 6, 2, b'a', b'b', 2]);
}

#[test]
fn version_6_listing_pages_round_trip_and_keep_the_old_indexes() {
    let ask = Request {
        id: 5,
        op: Op::ListPage {
            after: Some(("r".into(), "u".into())),
        },
    };
    let bytes = encode(&ask).unwrap();
    // id, then the variant index after the thirteen of versions 2 to 5,
    // then the cursor: present, resource, uid.
    assert_eq!(bytes, [5, 13, 1, 1, b'r', 1, b'u']);
    assert_eq!(decode::<Request>(&bytes).unwrap(), ask);
    assert_eq!(ask.op.since(), 6);
    let first = Request {
        id: 6,
        op: Op::ListPage { after: None },
    };
    assert_eq!(encode(&first).unwrap(), [6, 13, 0]);
    // The variant index after the nine replies of versions 2 to 5.
    let page = Response {
        id: 5,
        reply: Reply::LocksPage {
            entries: Vec::new(),
            more: true,
        },
    };
    let bytes = encode(&page).unwrap();
    assert_eq!(bytes, [5, 9, 0, 1]);
    assert_eq!(decode::<Response>(&bytes).unwrap(), page);
}

#[test]
fn an_oversized_value_decodes_empty_and_marked() {
    let long = vec![7u8; MAX_VALUE_LEN + 1];
    let p = Proclamation {
        term: 1,
        seq: 0,
        value: long.into(),
    };
    let bytes = encode(&WireProclamation::from(&p)).unwrap();
    let decoded: WireProclamation = decode(&bytes).unwrap();
    assert_eq!(decoded.value.oversize, Some(MAX_VALUE_LEN + 1));
    assert!(decoded.value.bytes.is_empty());
    let err = decoded.into_proclamation().unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let fits = Proclamation::new(1, 0, vec![1u8; MAX_VALUE_LEN]).unwrap();
    let bytes = encode(&WireProclamation::from(&fits)).unwrap();
    let decoded: WireProclamation = decode(&bytes).unwrap();
    assert_eq!(decoded.into_proclamation().unwrap(), fits);
}
