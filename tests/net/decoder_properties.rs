//! Properties of the wire readers (`quorum_lock::net::decoding`, feature
//! `testing`) over every kind of frame, both directions and the
//! handshake: valid encodings of every variant, the same mutated (bit
//! flips, byte changes, insertions, deletions, splices), cut at every
//! position, random bytes, and huge or odd length prefixes. Whatever the
//! bytes, a reader must not panic, must return an error of one line that
//! says what was wrong, and must not allocate beyond its frame limit
//! (counted by this binary's global allocator).
//!
//! `QUORUM_LOCK_PROP_SEED=<n>` replays a run (the seed is printed, and
//! again on failure); `QUORUM_LOCK_PROP_CASES=<n>` sets the cases per test
//! and `QUORUM_LOCK_PROP_SECONDS=<s>` bounds the time of all of them
//! together (each runs one case at least).

#![cfg(all(feature = "net", feature = "testing"))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use quorum_lock::net::decoding::{self, Decoded, Message};
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};

use crate::wire::{frame, read_varint, varint};

/// Counts what the thread that asked for it allocates, while it asks.
struct Counting;

thread_local! {
    static TRACKING: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn grew(size: usize, freed: usize) {
    let _ = TRACKING.try_with(|on| {
        if on.get() {
            LIVE.with(|live| {
                let now = live.get() + size as i64 - freed as i64;
                live.set(now);
                PEAK.with(|peak| peak.set(peak.get().max(now)));
            });
            LARGEST.with(|largest| largest.set(largest.get().max(size)));
        }
    });
}

// SAFETY: every call is passed to the system allocator unchanged; the
// counters are const-initialised thread locals without destructors.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size(), 0);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        grew(0, layout.size());
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size, layout.size());
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// What one call allocated on this thread.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Usage {
    /// The most bytes it held at once.
    pub(crate) peak: usize,
    /// Its largest single allocation.
    pub(crate) largest: usize,
}

pub(crate) fn measured<T>(f: impl FnOnce() -> T) -> (T, Usage) {
    LIVE.with(|c| c.set(0));
    PEAK.with(|c| c.set(0));
    LARGEST.with(|c| c.set(0));
    TRACKING.with(|on| on.set(true));
    let value = f();
    TRACKING.with(|on| on.set(false));
    let usage = Usage {
        peak: PEAK.with(Cell::get).max(0) as usize,
        largest: LARGEST.with(Cell::get),
    };
    (value, usage)
}

/// Room for what decoding holds besides the frame: a list's first
/// allocation (at most `MAX_RESOURCES` names) and small values.
pub(crate) const SLACK: usize = 64 * 1024;

/// Cases per test unless `QUORUM_LOCK_PROP_CASES` says otherwise: a few
/// seconds for all of them in a debug build.
const DEFAULT_CASES: usize = 100;

/// The cases and time of one test, and its seed.
struct Budget {
    test: &'static str,
    seed: u64,
    cases: usize,
    until: Instant,
}

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

impl Budget {
    fn new(test: &'static str) -> Budget {
        let seed = env("QUORUM_LOCK_PROP_SEED").unwrap_or_else(|| rand::rng().random());
        let cases = env("QUORUM_LOCK_PROP_CASES").unwrap_or(DEFAULT_CASES);
        let seconds = env("QUORUM_LOCK_PROP_SECONDS").unwrap_or(30.0f64);
        eprintln!("{test}: seed {seed}, up to {cases} cases or {seconds} s for all tests");
        // One deadline for the tests of the run, which share the cores.
        static START: OnceLock<Instant> = OnceLock::new();
        let start = *START.get_or_init(Instant::now);
        Budget {
            test,
            seed,
            cases,
            until: start + Duration::from_secs_f64(seconds),
        }
    }

    /// Runs `case` with a generator of its own per case until the cases or
    /// the time run out; the seed and case are printed if one fails.
    fn run(&self, mut case: impl FnMut(&mut SmallRng)) {
        let mut done = 0;
        while done < self.cases && (done == 0 || Instant::now() < self.until) {
            let mut rng = SmallRng::seed_from_u64(
                self.seed ^ (done as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            );
            let _report = Report(self, done);
            case(&mut rng);
            done += 1;
        }
        eprintln!("{}: {done} cases", self.test);
    }
}

/// Prints how to replay a case that failed, however it failed.
struct Report<'a>(&'a Budget, usize);

impl Drop for Report<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        eprintln!(
            "{} failed in case {} of seed {}; replay with QUORUM_LOCK_PROP_SEED={}",
            self.0.test, self.1, self.0.seed, self.0.seed
        );
    }
}

fn hex(bytes: &[u8]) -> String {
    let shown: Vec<String> = bytes.iter().take(48).map(|b| format!("{b:02x}")).collect();
    let more = if bytes.len() > 48 { " …" } else { "" };
    format!("{} bytes: {}{more}", bytes.len(), shown.join(" "))
}

/// Reads `stream` as `message`, checking the properties every read has
/// whatever the bytes: no panic, an error of one line that names what
/// was wrong, decoded messages that survive their own re-encoding, and
/// no allocation beyond the frame limit.
fn checked_read(message: Message, stream: &[u8]) -> Result<Vec<Decoded>, String> {
    let (result, usage) =
        measured(|| std::panic::catch_unwind(AssertUnwindSafe(|| decoding::read(message, stream))));
    let Ok(result) = result else {
        panic!("reading {message:?} panicked on {}", hex(stream));
    };
    let limit = message.frame_limit() + 4;
    assert!(
        usage.largest <= (2 * stream.len()).max(limit),
        "reading {message:?} allocated {} bytes at once, over the limit of {limit}: {}",
        usage.largest,
        hex(stream)
    );
    assert!(
        usage.peak <= 4 * stream.len() + limit + SLACK,
        "reading {message:?} held {} bytes: {}",
        usage.peak,
        hex(stream)
    );
    match &result {
        Err(err) => check_error(message, err, stream),
        Ok(decoded) => {
            for d in decoded {
                // What decodes encodes again to what decodes the same.
                let again = decoding::decode(message, &d.encoded());
                let again = again.unwrap_or_else(|e| {
                    panic!(
                        "{message:?} re-encoded does not decode ({e}): {}",
                        hex(stream)
                    )
                });
                if d.oversize().is_none() {
                    assert_eq!(again.shown(), d.shown(), "{}", hex(stream));
                }
            }
        }
    }
    result
}

fn check_error(message: Message, err: &str, input: &[u8]) {
    let context = || format!("{message:?}: {err:?} for {}", hex(input));
    assert!(!err.trim().is_empty(), "{}", context());
    assert!(!err.chars().any(char::is_control), "{}", context());
    assert!(err.len() <= 300, "{}", context());
    // Decoding errors are the library's `InvalidArgument`.
    let err = err.strip_prefix("invalid argument: ").unwrap_or(err);
    if let Some(reason) = err.strip_prefix("malformed ") {
        // Which message, where it went wrong, and how.
        let name = format!("{message:?}");
        assert!(reason.starts_with(&name), "{}", context());
        assert!(reason.contains(" at byte "), "{}", context());
    } else {
        assert!(err.starts_with("bad frame: "), "{}", context());
    }
}

/// Every valid payload of `message` for `seed`, checked to fit the limit.
fn samples(message: Message, seed: u64) -> Vec<Vec<u8>> {
    let samples = decoding::samples(message, seed);
    for s in &samples {
        assert!(s.len() <= message.frame_limit(), "{message:?}: {}", s.len());
    }
    samples
}

/// The variant indexes the decoder knows: those after which zeros (empty
/// strings and lists, `None`, `false`, the first variant) make a message.
fn known_variants(message: Message) -> BTreeSet<u64> {
    let head: &[u8] = match message {
        Message::Hello => return BTreeSet::from([0]),
        Message::Welcome => &[],
        // An id first.
        Message::Request | Message::Response => &[1],
    };
    (0..64u64)
        .filter(|&variant| {
            (0..40).any(|zeros| {
                let payload = [head, &varint(variant), &vec![0; zeros]].concat();
                decoding::decode(message, &payload).is_ok()
            })
        })
        .collect()
}

#[test]
fn every_variant_of_every_message_decodes_as_it_was_encoded() {
    let budget = Budget::new("decoder round trips");
    let known: Vec<usize> = Message::ALL.map(|m| known_variants(m).len()).to_vec();
    let mut seen: Vec<BTreeSet<&'static str>> = vec![BTreeSet::new(); 4];
    budget.run(|rng| {
        for (m, message) in Message::ALL.into_iter().enumerate() {
            let all = samples(message, rng.random());
            assert_eq!(all.len(), known[m], "{message:?}");
            for payload in all {
                let decoded = checked_read(message, &frame(&payload))
                    .unwrap_or_else(|e| panic!("{message:?} sample refused: {e}"));
                assert_eq!(decoded.len(), 1);
                let d = &decoded[0];
                seen[m].insert(d.variant());
                match d.oversize() {
                    None => assert_eq!(d.encoded(), payload, "{}", d.shown()),
                    // A field past a limit decodes empty, with the reason.
                    Some(reason) => assert!(reason.contains("at most"), "{reason}"),
                }
            }
        }
    });
    for (m, message) in Message::ALL.into_iter().enumerate() {
        assert_eq!(
            seen[m].len(),
            known[m],
            "{message:?}: samples of {:?} only",
            seen[m]
        );
    }
}

#[test]
fn frames_cut_short_are_refused_at_every_length() {
    let budget = Budget::new("decoder truncations");
    budget.run(|rng| {
        for message in Message::ALL {
            // One variant a case: every variant within a few cases.
            let all = samples(message, rng.random());
            let payload = all.choose(rng).expect("every message has variants");
            let framed = frame(payload);
            // Every position for small frames, a few for large ones.
            let cuts: Vec<usize> = if payload.len() <= 512 {
                (0..payload.len()).collect()
            } else {
                (0..16)
                    .map(|_| rng.random_range(0..payload.len()))
                    .collect()
            };
            for cut in cuts {
                // The payload cut, in a frame of its own length.
                let err = checked_read(message, &frame(&payload[..cut]))
                    .err()
                    .unwrap_or_else(|| {
                        panic!("{message:?} cut to {cut} decoded: {}", hex(payload))
                    });
                assert!(err.contains("malformed "), "{err}");
                // The stream ended inside the payload.
                if cut == 0 {
                    continue;
                }
                let err = checked_read(message, &framed[..4 + cut])
                    .err()
                    .unwrap_or_else(|| panic!("{message:?} stream cut at {cut} read"));
                assert!(err.starts_with("bad frame: "), "{err}");
            }
            // The stream ended inside the length: an error. Right after it
            // the codec has taken the length off its buffer, so the end
            // reads as a close between frames: nothing decoded.
            for end in 1..4 {
                let err = checked_read(message, &framed[..end]).expect_err("a part of a length");
                assert!(err.starts_with("bad frame: "), "{err}");
            }
            let read = checked_read(message, &framed[..4]).expect("a length alone");
            assert!(read.is_empty());
        }
    });
}

#[test]
fn bytes_after_a_message_in_its_frame_are_refused() {
    let budget = Budget::new("decoder trailing bytes");
    budget.run(|rng| {
        for message in Message::ALL {
            for payload in samples(message, rng.random()) {
                let extra: Vec<u8> = (0..rng.random_range(1..9)).map(|_| rng.random()).collect();
                let longer = [&payload[..], &extra].concat();
                if longer.len() > message.frame_limit() {
                    continue;
                }
                let err = checked_read(message, &frame(&longer))
                    .err()
                    .unwrap_or_else(|| {
                        panic!(
                            "{message:?} with {} bytes after it decoded: {}",
                            extra.len(),
                            hex(&longer)
                        )
                    });
                assert!(
                    err.contains(&format!("{} bytes after", extra.len())),
                    "{err}"
                );
            }
        }
    });
}

/// `payload` with one to four random changes.
fn mutated(rng: &mut SmallRng, payload: &[u8], other: &[u8]) -> Vec<u8> {
    let mut bytes = payload.to_vec();
    for _ in 0..rng.random_range(1..5) {
        let at = rng.random_range(0..=bytes.len());
        match rng.random_range(0..8u8) {
            0 if at < bytes.len() => bytes[at] ^= 1 << rng.random_range(0..8),
            1 if at < bytes.len() => bytes[at] = rng.random(),
            // Values that make varints long and lengths large.
            2 if at < bytes.len() => bytes[at] = [0x00, 0x7f, 0x80, 0xff][rng.random_range(0..4)],
            3 => bytes.insert(at, rng.random()),
            4 if at < bytes.len() => {
                bytes.remove(at);
            }
            5 => {
                let run = [0xff; 10][..rng.random_range(1..=10)].to_vec();
                bytes.splice(at..at, run);
            }
            // Part of another message spliced in.
            6 if !other.is_empty() => {
                let from = rng.random_range(0..other.len());
                let to = rng.random_range(from..=other.len());
                let end = (at + rng.random_range(0..8)).min(bytes.len());
                bytes.splice(at..end, other[from..to].iter().copied());
            }
            _ => {
                let dup = bytes[at..].iter().take(8).copied().collect::<Vec<u8>>();
                bytes.splice(at..at, dup);
            }
        }
    }
    bytes
}

#[test]
fn mutated_messages_never_panic_and_errors_say_what_was_wrong() {
    let budget = Budget::new("decoder mutations");
    let (mut refused, mut decoded) = (0usize, 0usize);
    budget.run(|rng| {
        for message in Message::ALL {
            let all = samples(message, rng.random());
            let payload = &all[rng.random_range(0..all.len())];
            let other = &all[rng.random_range(0..all.len())];
            for _ in 0..8 {
                let bytes = mutated(rng, payload, other);
                let stream = if bytes.len() <= message.frame_limit() {
                    frame(&bytes)
                } else {
                    bytes
                };
                match checked_read(message, &stream) {
                    Ok(_) => decoded += 1,
                    Err(_) => refused += 1,
                }
            }
        }
    });
    eprintln!("mutations: {refused} refused, {decoded} decoded");
    assert!(
        refused > 0,
        "no mutation was refused: the generator is broken"
    );
}

#[test]
fn random_bytes_never_panic_and_errors_say_what_was_wrong() {
    let budget = Budget::new("decoder random bytes");
    budget.run(|rng| {
        for message in Message::ALL.repeat(4) {
            let len = match rng.random_range(0..4u8) {
                0 => rng.random_range(0..8),
                1 => rng.random_range(0..64),
                _ => rng.random_range(0..600),
            };
            let bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            // As a payload in a frame of its length, and as a raw stream.
            let _ = checked_read(message, &frame(&bytes));
            let _ = checked_read(message, &bytes);
        }
        // What each side says about a peer that sent such bytes first.
        let bytes: Vec<u8> = (0..rng.random_range(0..80)).map(|_| rng.random()).collect();
        let (answer, client) = decoding::sniffed(&bytes);
        for text in std::iter::once(&answer).chain(client.as_ref()) {
            assert!(!text.chars().any(char::is_control), "{text:?}");
            assert!(text.len() <= 400, "{text:?}");
        }
    });
}

#[test]
fn length_prefixes_past_the_limit_are_refused_before_anything_is_allocated() {
    let budget = Budget::new("decoder length prefixes");
    budget.run(|rng| {
        for message in Message::ALL {
            let limit = message.frame_limit();
            let len: u32 = match rng.random_range(0..5u8) {
                0 => u32::MAX,
                1 => limit as u32 + 1,
                2 => 0x8000_0000,
                3 => rng.random_range(limit as u32 + 1..=u32::MAX),
                _ => rng.random_range(limit as u32 + 1..limit as u32 + 64),
            };
            let tail: Vec<u8> = (0..rng.random_range(0..64)).map(|_| rng.random()).collect();
            let mut stream = len.to_be_bytes().to_vec();
            stream.extend(&tail);
            // Also after a valid frame.
            if rng.random() {
                let all = samples(message, rng.random());
                let first = frame(&all[rng.random_range(0..all.len())]);
                stream.splice(0..0, first);
            }
            let (result, usage) = measured(|| decoding::read(message, &stream));
            let err = result.err().unwrap_or_else(|| panic!("length {len} read"));
            check_error(message, &err, &stream);
            assert!(
                err.contains(&len.to_string()) && err.contains(&limit.to_string()),
                "the error names neither the length nor the limit: {err}"
            );
            assert!(
                usage.peak <= 4 * stream.len() + SLACK,
                "{} bytes held for a refused length {len}",
                usage.peak
            );
        }
    });
}

#[test]
fn length_prefixes_within_the_limit_allocate_at_most_the_frame() {
    let budget = Budget::new("decoder large frames");
    budget.run(|rng| {
        for message in Message::ALL {
            let limit = message.frame_limit();
            let len = match rng.random_range(0..3u8) {
                0 => limit,
                1 => limit - rng.random_range(0..16),
                _ => rng.random_range(0..=limit),
            };
            let tail: Vec<u8> = (0..rng.random_range(0..64)).map(|_| rng.random()).collect();
            let stream = [&(len as u32).to_be_bytes()[..], &tail].concat();
            if len == limit && !tail.is_empty() {
                // The codec makes room for the whole frame it was told of:
                // the counter sees it, and it is the most a peer can cause.
                let (_, usage) = measured(|| decoding::read(message, &stream));
                assert!(
                    usage.largest >= limit,
                    "{usage:?}: the counter counts nothing"
                );
            }
            // Only a frame that arrived whole can decode; the rest is the
            // stream ending inside a frame. Either way the reader held no
            // more than the frame (checked by `checked_read`).
            match checked_read(message, &stream) {
                Ok(read) => assert!(
                    len <= tail.len() || (tail.is_empty() && read.is_empty()),
                    "a frame of {len} decoded"
                ),
                Err(err) => assert!(err.starts_with("bad frame: ") || len <= tail.len(), "{err}"),
            }
        }
    });
}

#[test]
fn samples_come_one_per_variant_index_in_order() {
    // The hand-written encoder of the test support reads the same ids and
    // variant indexes as the library's samples: the encoding is pinned.
    for message in [Message::Request, Message::Response] {
        let variants: Vec<u64> = samples(message, 7)
            .iter()
            .map(|payload| {
                let (_id, rest) = read_varint(payload).expect("an id");
                read_varint(rest).expect("a variant").0
            })
            .collect();
        let known: Vec<u64> = known_variants(message).into_iter().collect();
        assert_eq!(variants, known, "{message:?}");
    }
}
