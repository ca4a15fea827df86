//! A client reads whatever a server sends, and a hostile server (or,
//! without TLS, whoever answers in its place) chooses the bytes. The wire
//! readers promise (`quorum_lock::net::decoding`): "whatever the bytes, a
//! reader returns messages or an error ..., never panics, and allocates
//! within its frame limit", held by the decoder properties to a peak of
//! four times the bytes read, plus the frame limit and a little slack. A
//! listing reply (`Locks`, `LocksPage`) of many entries with empty text
//! takes 9 bytes an entry on the wire and many times that once decoded.
//! Reproduces a past break: a frame of such entries held 17 times the
//! frame. A reply now carries at most 4096 entries (PROTOCOL.md): one of
//! more is refused before room is made for it, and one of 4096 decodes
//! within the bound.
#![cfg(all(feature = "net", feature = "testing"))]

use quorum_lock::net::decoding::{self, Message};

use crate::decoder_properties::{measured, SLACK};
use crate::wire::{frame, varint, REPLY_LOCKS_PAGE};

/// `Reply::Locks`, the listing before version 6.
const REPLY_LOCKS: u8 = 1;

/// The most entries a listing reply may carry.
const MOST: usize = 4096;

/// `Response { id: 1, reply }` for a listing reply of `variant` with
/// `count` entries of empty text, or as many as fit one frame.
fn listing_of_empty_entries(variant: u8, count: Option<usize>) -> Vec<u8> {
    let limit = Message::Response.frame_limit();
    // resource, uid, owner, source (empty), mode, two zero durations.
    let entry: [u8; 9] = [0, 0, 0, 0, 1, 0, 0, 0, 0];
    let count = count.unwrap_or((limit - 64) / entry.len());
    let mut payload = varint(1);
    payload.push(variant);
    payload.extend(varint(count as u64));
    for _ in 0..count {
        payload.extend_from_slice(&entry);
    }
    if variant == REPLY_LOCKS_PAGE {
        payload.push(0); // more: false
    }
    assert!(payload.len() <= limit, "{} bytes", payload.len());
    frame(&payload)
}

fn check(variant: u8, name: &str) {
    for count in [Some(MOST), None] {
        let stream = listing_of_empty_entries(variant, count);
        let (decoded, usage) = measured(|| decoding::read(Message::Response, &stream));
        match (count, decoded) {
            (Some(_), Ok(decoded)) => {
                assert_eq!(decoded.len(), 1, "one response");
                assert_eq!(decoded[0].variant(), name);
            }
            (None, Err(err)) => assert!(
                err.to_string().contains("more entries than one may carry"),
                "a {name} reply of more than {MOST} entries refused for another reason: {err}"
            ),
            (count, result) => panic!("{name} of {count:?} entries: {result:?}"),
        }
        let limit = Message::Response.frame_limit() + 4;
        let bound = 4 * stream.len() + limit + SLACK;
        assert!(
            usage.peak <= bound,
            "reading a {name} reply of {} bytes held {} bytes at its peak ({:.1} times the \
             frame), over the decoder's bound of {bound}",
            stream.len(),
            usage.peak,
            usage.peak as f64 / stream.len() as f64
        );
    }
}

#[test]
fn a_listing_page_of_empty_entries_decodes_within_the_frame_limit() {
    check(REPLY_LOCKS_PAGE, "LocksPage");
}

#[test]
fn a_whole_listing_of_empty_entries_decodes_within_the_frame_limit() {
    check(REPLY_LOCKS, "Locks");
}
