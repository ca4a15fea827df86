//! What a peer speaks when it does not speak the lock protocol, named from
//! the first bytes it sent. A client pointed at the wrong port (a Redis
//! server, a web server, a lock server that serves TLS) and a server
//! reached by the wrong kind of client can then say what is on the other
//! end at once, instead of "frame size too big" or a timeout.
//!
//! Every answer of a lock server starts with a 4-byte length far below
//! [`MAX_FRAME`](super::MAX_FRAME), so any text (its first byte is 0x20
//! or more, a length of 512 MiB or more) and any TLS record fail the
//! length check as soon as four bytes arrived: these are told apart here.

/// The most characters of a peer's first line quoted in a message.
const QUOTED: usize = 40;

/// The most bytes shown in hex when the answer is not text.
const HEX: usize = 8;

/// What the first bytes of a peer look like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Foreign {
    /// A TLS record: a handshake or an alert.
    Tls,
    /// RESP, the Redis protocol; the first line, quoted.
    Redis(String),
    /// HTTP, a request or a response; the first line, quoted.
    Http(String),
    /// Some other text; the first line, quoted.
    Text(String),
    /// Bytes that are not text, the first few in hex.
    Binary(String),
}

/// Names what `bytes`, the first a peer sent, look like.
pub(crate) fn sniff(bytes: &[u8]) -> Foreign {
    // A TLS record starts with its content type (change cipher spec,
    // alert, handshake or application data) and the major version 3.
    if let [0x14..=0x17, 0x03, ..] = bytes {
        return Foreign::Tls;
    }
    let Some(line) = first_line(bytes) else {
        return Foreign::Binary(hex(bytes));
    };
    // RESP: a type byte (simple string, error, integer, bulk string,
    // array), then text; Redis answers errors as `-ERR ...`.
    let resp = matches!(bytes.first(), Some(b'+' | b'-' | b':' | b'$' | b'*'))
        && bytes.get(1).is_some_and(|b| b.is_ascii_graphic());
    if resp {
        Foreign::Redis(line)
    } else if bytes.starts_with(b"HTTP/") || line.contains(" HTTP/") {
        Foreign::Http(line)
    } else {
        Foreign::Text(line)
    }
}

/// The first line of `bytes`, quoted and cut to [`QUOTED`] characters,
/// when it starts as text (its first bytes printable ASCII); any other
/// byte in it is shown as `\xNN`. `None` when it does not start as text.
fn first_line(bytes: &[u8]) -> Option<String> {
    let printable = |b: &u8| (0x20..0x7f).contains(b);
    let end = bytes
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(bytes.len());
    let line = &bytes[..end];
    let head = &line[..line.len().min(4)];
    if head.is_empty() || !head.iter().all(printable) {
        return None;
    }
    // A peer's words: a secret this process holds, quoted, is masked, on
    // the bytes as they came (escaped first, a secret that is not
    // printable ASCII would no longer be found).
    let covered = crate::locker::secrets::covered(line);
    let mut text = String::new();
    let mut masking = false;
    for (at, b) in line.iter().enumerate().take(QUOTED) {
        if covered.as_ref().is_some_and(|c| c[at]) {
            if !masking {
                text.push_str("***");
                masking = true;
            }
            continue;
        }
        masking = false;
        if printable(b) {
            text.push(char::from(*b));
        } else {
            text.push_str(&format!("\\x{b:02x}"));
        }
    }
    let cut = if line.len() > QUOTED { "…" } else { "" };
    Some(format!("\"{text}{cut}\""))
}

/// The first [`HEX`] bytes in hex, `…` after them if there are more.
fn hex(bytes: &[u8]) -> String {
    // Bytes of a secret this process holds are shown as `**`.
    let covered = crate::locker::secrets::covered(bytes);
    let shown: Vec<String> = bytes
        .iter()
        .enumerate()
        .take(HEX)
        .map(|(at, b)| match &covered {
            Some(c) if c[at] => "**".to_owned(),
            _ => format!("{b:02x}"),
        })
        .collect();
    let cut = if bytes.len() > HEX { " …" } else { "" };
    format!("{}{cut}", shown.join(" "))
}

/// Why the server's first answer shows that no lock server answered (or
/// one that serves TLS to a client without it), with what to check. No
/// `;` in it: callers list several servers' reasons separated by `;`.
pub(crate) fn answer_from_server(bytes: &[u8]) -> String {
    match sniff(bytes) {
        Foreign::Tls => "the server answered in TLS: it serves TLS only, and this client \
                         connects without TLS"
            .to_owned(),
        Foreign::Redis(line) => format!(
            "the server answered {line} in the Redis protocol: it is a Redis server, not a lock \
             server (is this the port of a lock server?)"
        ),
        Foreign::Http(line) => format!(
            "the server answered {line}: it is an HTTP server, not a lock server (is this the \
             port of a lock server?)"
        ),
        Foreign::Text(line) => format!(
            "the server answered {line}, which is not the lock protocol: it is not a lock server \
             (is this the port of a lock server?)"
        ),
        Foreign::Binary(hex) => format!(
            "the server answered bytes that are not the lock protocol ({hex}): it is not a lock \
             server, or one of an incompatible version (is this the port of a lock server?)"
        ),
    }
}

/// What the server logs when a peer's first bytes are no lock handshake;
/// `None` when they do not look like anything in particular.
pub(crate) fn client_that_sent(bytes: &[u8]) -> Option<String> {
    Some(match sniff(bytes) {
        Foreign::Tls => "a client that speaks TLS: this server does not serve TLS, so the client \
                         must connect without TLS, or the server be given a certificate"
            .to_owned(),
        Foreign::Redis(_) => "a Redis client: this is a lock server, not a Redis server".to_owned(),
        Foreign::Http(line) => format!("an HTTP client ({line}): this is a lock server"),
        Foreign::Text(line) => {
            format!("a client that sent {line}, which is not the lock protocol")
        }
        Foreign::Binary(_) => return None,
    })
}

/// What a server tells a client whose first bytes are no handshake, and
/// what it logs about it ([`client_that_sent`]); `None` when they look
/// like nothing in particular. The client is told what kind of client it
/// looks like and nothing of its bytes: the log's quote masks this
/// process's secrets, and a peer shown which of its bytes were masked
/// would learn, eight bytes at a time, a token it does not hold.
pub(crate) fn refusal_of_client_that_sent(bytes: &[u8]) -> Option<(String, String)> {
    let logged = client_that_sent(bytes)?;
    let told = match sniff(bytes) {
        Foreign::Http(_) => "an HTTP client: this is a lock server".to_owned(),
        Foreign::Text(_) => "a client that sent a line of text, which is not the lock protocol \
                             (this is a lock server)"
            .to_owned(),
        // Their words quote none of the client's bytes.
        Foreign::Tls | Foreign::Redis(_) | Foreign::Binary(_) => logged.clone(),
    };
    Some((told, logged))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_records_are_recognised() {
        // A ClientHello, and the alert a TLS server sends to a plain client.
        assert_eq!(sniff(&[0x16, 0x03, 0x01, 0x02, 0x00]), Foreign::Tls);
        assert_eq!(
            sniff(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32]),
            Foreign::Tls
        );
    }

    #[test]
    fn redis_answers_and_requests_are_recognised() {
        assert_eq!(
            sniff(b"-ERR unknown command '\\x00', with args\r\n"),
            Foreign::Redis("\"-ERR unknown command '\\x00', with args\"".into())
        );
        assert_eq!(sniff(b"+PONG\r\n"), Foreign::Redis("\"+PONG\"".into()));
        assert!(matches!(sniff(b"*1\r\n$4\r\nPING\r\n"), Foreign::Redis(_)));
    }

    #[test]
    fn http_text_and_binary_are_told_apart() {
        assert_eq!(
            sniff(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"),
            Foreign::Http("\"HTTP/1.1 400 Bad Request\"".into())
        );
        assert!(matches!(sniff(b"GET / HTTP/1.1\r\n"), Foreign::Http(_)));
        assert_eq!(
            sniff(b"SSH-2.0-OpenSSH_9.6\r\n"),
            Foreign::Text("\"SSH-2.0-OpenSSH_9.6\"".into())
        );
        assert_eq!(
            sniff(&[0, 0, 0, 9, 0xff, 0xfe, 0, 1, 2, 3]),
            Foreign::Binary("00 00 00 09 ff fe 00 01 …".into())
        );
        assert_eq!(sniff(b""), Foreign::Binary(String::new()));
    }

    #[test]
    fn other_bytes_in_a_text_line_are_escaped() {
        assert_eq!(
            sniff(b"-ERR unknown command '\x00\x01'\r\n"),
            Foreign::Redis("\"-ERR unknown command '\\x00\\x01'\"".into())
        );
    }

    #[test]
    fn long_lines_are_cut() {
        let long = "x".repeat(200);
        match sniff(long.as_bytes()) {
            Foreign::Text(line) => {
                assert_eq!(line.chars().count(), QUOTED + 3, "{line}");
                assert!(line.ends_with("…\""), "{line}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_messages_name_what_answered() {
        assert!(answer_from_server(b"-ERR unknown command\r\n").contains("it is a Redis server"));
        assert!(answer_from_server(&[0x15, 0x03, 0x03, 0, 2, 2, 50]).contains("serves TLS only"));
        assert!(answer_from_server(b"HTTP/1.0 200 OK\r\n").contains("HTTP server"));
        assert!(client_that_sent(&[0x16, 0x03, 0x01]).is_some_and(|m| m.contains("speaks TLS")));
        assert_eq!(client_that_sent(&[0, 0, 0x40, 0]), None);
    }
}
