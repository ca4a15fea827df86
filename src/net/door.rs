//! The door: where a connection that found every slot taken waits, without
//! a slot, for its first bytes or for a slot to free.
//!
//! Invariants:
//! - at most `room` connections wait; each holds a descriptor and nothing
//!   else;
//! - a silent one waits at most [`SILENT_GRACE`], one that spoke is let in
//!   by the server as soon as a slot frees, and given up after twice that;
//! - when the door is full, the oldest one that has been silent there for
//!   [`QUIET`] makes room; with none such, the oldest one, and if it spoke
//!   the server first tries to give it a slot.
//!
//! Why: the server accepts in bursts after its task was held up (a loaded
//! machine), hundreds of a flood's silent connections at a time, before
//! its next look at the door. Were the oldest simply closed, a client
//! whose handshake came just behind its connection would be closed by the
//! silent ones accepted after it. The few milliseconds of [`QUIET`] keep a
//! flood that speaks, whose bytes lag its connections by a moment, from
//! being taken for a silent one.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

use super::refusals::Cause;

/// How long a connection that had sent nothing when it was accepted is
/// kept from being evicted by another such one, and may wait at the door
/// for its first bytes: long enough for a client's handshake to arrive,
/// far shorter than the handshake timeout.
pub(super) const SILENT_GRACE: Duration = Duration::from_millis(100);

/// How long a connection must have been silent at the door before it is
/// closed, ahead of older ones, to make room there.
const QUIET: Duration = Duration::from_millis(10);

/// How often the connections at the door are looked at (each look is a
/// system call per connection there not yet known to have spoken).
pub(super) const DOOR_TICK: Duration = Duration::from_millis(2);

/// A connection waiting at the door.
pub(super) struct Waiting {
    pub(super) stream: TcpStream,
    pub(super) peer: SocketAddr,
    /// When it came to the door.
    pub(super) since: Instant,
    /// Known to have sent bytes (once seen, a peek need not be repeated).
    spoke: bool,
}

impl Waiting {
    /// Whether it has sent bytes, looking only while not yet known.
    fn spoke(&mut self) -> bool {
        if !self.spoke {
            self.spoke = has_spoken(&self.stream);
        }
        self.spoke
    }
}

/// The connection that leaves a full door to make room there.
pub(super) enum Leaving {
    /// Closed: its peer, and why.
    Closed(SocketAddr, Cause),
    /// The oldest there, which spoke: it gets a slot if one can be had,
    /// and is closed ([`Cause::NoSlotAtDoor`]) if not.
    Spoke(Waiting),
}

/// Connections that found no slot free for them, oldest first.
pub(super) struct Door {
    room: usize,
    waiting: VecDeque<Waiting>,
}

impl Door {
    pub(super) fn new(room: usize) -> Door {
        Door {
            room,
            waiting: VecDeque::new(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Puts `stream` (which had sent bytes when accepted, if `spoke`) at
    /// the door, and returns the one that leaves to keep the door within
    /// its room, if any.
    pub(super) fn push(
        &mut self,
        stream: TcpStream,
        peer: SocketAddr,
        spoke: bool,
    ) -> Option<Leaving> {
        let newcomer = Waiting {
            stream,
            peer,
            since: Instant::now(),
            spoke,
        };
        if self.room == 0 {
            let cause = if newcomer.spoke {
                Cause::NoSlotAtDoor
            } else {
                Cause::SilentAtDoor
            };
            return Some(Leaving::Closed(newcomer.peer, cause));
        }
        let out = if self.waiting.len() < self.room {
            None
        } else if let Some(at) = self
            .waiting
            .iter_mut()
            .position(|w| w.since.elapsed() >= QUIET && !w.spoke())
        {
            self.waiting
                .remove(at)
                .map(|w| Leaving::Closed(w.peer, Cause::DoorFull))
        } else {
            self.waiting.pop_front().map(|mut w| {
                if w.spoke() {
                    Leaving::Spoke(w)
                } else {
                    Leaving::Closed(w.peer, Cause::DoorFull)
                }
            })
        };
        self.waiting.push_back(newcomer);
        out
    }

    /// Those that spoke, taken from the door, oldest first.
    pub(super) fn take_ready(&mut self) -> Vec<Waiting> {
        let mut ready = Vec::new();
        let mut at = 0;
        while at < self.waiting.len() {
            if self.waiting[at].spoke() {
                ready.extend(self.waiting.remove(at));
            } else {
                at += 1;
            }
        }
        ready
    }

    /// Puts back, in their places by when they came, those taken that
    /// found no slot yet.
    pub(super) fn put_back(&mut self, taken: Vec<Waiting>) {
        for waiting in taken {
            let at = self.waiting.partition_point(|w| w.since <= waiting.since);
            self.waiting.insert(at, waiting);
        }
    }

    /// Closes those that stayed silent for the grace; their peers. Those
    /// that spoke (put back to wait for a slot) stay: they have twice as
    /// long, and the server ends their wait.
    pub(super) fn close_expired(&mut self) -> Vec<SocketAddr> {
        let mut closed = Vec::new();
        let mut at = 0;
        // In the order they came: stop at the first within its grace.
        while let Some(waiting) = self.waiting.get_mut(at) {
            if waiting.since.elapsed() < SILENT_GRACE {
                break;
            }
            if waiting.spoke() {
                at += 1;
            } else if let Some(waiting) = self.waiting.remove(at) {
                closed.push(waiting.peer);
            }
        }
        closed
    }
}

/// Whether `stream` has bytes waiting to be read, without reading them
/// (and without waiting: the socket does not block).
pub(super) fn has_spoken(stream: &TcpStream) -> bool {
    let mut first = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    matches!(socket2::SockRef::from(stream).peek(&mut first), Ok(n) if n > 0)
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::{Cause, Door, Leaving, QUIET};

    /// A connected pair on 127.0.0.1: the client's end, its address, and
    /// the server's end.
    async fn pair(listener: &TcpListener) -> (TcpStream, SocketAddr, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().expect("address"))
            .await
            .expect("connect");
        let (accepted, peer) = listener.accept().await.expect("accept");
        (client, peer, accepted)
    }

    /// Sends bytes from `client` and waits (on the wall clock, at most
    /// 1 s) until they can be peeked on `accepted`.
    async fn speak(client: &mut TcpStream, accepted: &TcpStream) {
        client.write_all(b"hello").await.expect("send");
        for _ in 0..500 {
            if super::has_spoken(accepted) {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!("the client's bytes never arrived");
    }

    fn closed(leaving: Option<Leaving>) -> Option<(SocketAddr, Cause)> {
        match leaving {
            Some(Leaving::Closed(peer, cause)) => Some((peer, cause)),
            Some(Leaving::Spoke(w)) => panic!("{} left as one that spoke", w.peer),
            None => None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_silent_newcomers_pushes_out_silent_ones_before_one_that_spoke() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let mut door = Door::new(4);
        let mut clients = Vec::new();
        // Silent ones, then one that is silent when it comes and speaks
        // just after, then more silent ones, all waiting a while.
        for i in 0..4 {
            let (mut client, peer, accepted) = pair(&listener).await;
            assert!(door.push(accepted, peer, false).is_none());
            if i == 1 {
                let at_door = &door.waiting[1].stream;
                speak(&mut client, at_door).await;
            }
            clients.push((client, peer));
        }
        let speaker = clients[1].1;
        tokio::time::advance(QUIET).await;
        // A burst before the server looks at the door again: each silent
        // one that waited goes first, then the one that spoke leaves for a
        // slot (not closed as silent).
        let mut left = Vec::new();
        for _ in 0..4 {
            let (client, peer, accepted) = pair(&listener).await;
            clients.push((client, peer));
            left.push(door.push(accepted, peer, false));
        }
        let waited: Vec<_> = [0, 2, 3].iter().map(|&i| clients[i].1).collect();
        for (leaving, peer) in left.drain(..3).zip(waited) {
            assert_eq!(closed(leaving), Some((peer, Cause::DoorFull)));
        }
        match left.pop() {
            Some(Some(Leaving::Spoke(w))) => assert_eq!(w.peer, speaker),
            _ => panic!("the one that spoke did not leave for a slot"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_door_of_fresh_silent_ones_closes_the_oldest_as_silent() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let mut door = Door::new(2);
        let mut peers = Vec::new();
        let mut clients = Vec::new();
        for _ in 0..3 {
            let (client, peer, accepted) = pair(&listener).await;
            clients.push(client);
            peers.push(peer);
            let leaving = closed(door.push(accepted, peer, false));
            if peers.len() == 3 {
                assert_eq!(leaving, Some((peers[0], Cause::DoorFull)));
            }
        }
        assert!(door.take_ready().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_door_without_room_closes_every_newcomer_at_once() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let mut door = Door::new(0);
        let (_silent, peer, accepted) = pair(&listener).await;
        assert_eq!(
            closed(door.push(accepted, peer, false)),
            Some((peer, Cause::SilentAtDoor))
        );
        let (mut client, peer, accepted) = pair(&listener).await;
        speak(&mut client, &accepted).await;
        assert_eq!(
            closed(door.push(accepted, peer, true)),
            Some((peer, Cause::NoSlotAtDoor))
        );
        assert!(door.is_empty());
    }
}
