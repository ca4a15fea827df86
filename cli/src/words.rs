//! How the command line shows text it did not write itself: what lock
//! servers, Redis nodes and databases answer (owners, sources, uids,
//! names, leader values, error reasons), and what it was given (a lock
//! name in an error, the command a lock is held for, which listings show
//! as the lock's source). Every such text goes through [`escaped`] on its
//! way to the terminal, so that it stays on its line and cannot drive the
//! terminal: a peer that sends `bob\e]0;title\a\nforged row` gets it shown
//! as `bob\u{1b}]0;title\u{7}\nforged row`, one harmless line; and a
//! token the command was given, quoted back in it, is shown as `***`.

use std::borrow::Cow;
use std::ffi::OsString;
use std::fmt::Write as _;

/// The most characters of a name quoted in a message.
const NAME_SHOWN: usize = 64;

/// The most characters of a command line recorded as a lock's source:
/// room for a command and its main arguments, far below the 512 bytes a
/// lock server accepts (a character may take 4).
const COMMAND_SHOWN: usize = 120;

/// Whether a terminal could act on `c`, or show text around it otherwise
/// than it is stored: control characters (C0, DEL, C1: a newline forges a
/// row, an escape starts a terminal sequence), line and paragraph
/// separators, bidirectional marks, embeddings, overrides and isolates,
/// and every character a terminal shows as nothing, which would make two
/// names read alike: Unicode's format characters (category Cf: zero
/// widths, the soft hyphen, the byte order mark, the tag characters, the
/// shorthand format controls) and the rest of its default-ignorable code
/// points (variation selectors, the combining grapheme joiner, Hangul and
/// Khmer fillers, Mongolian variation selectors). An emoji's presentation
/// selector is shown as an escape too. A superset of what the library's
/// lockers refuse.
pub fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{ad}'
                | '\u{34f}'
                | '\u{600}'..='\u{605}'
                | '\u{61c}'
                | '\u{6dd}'
                | '\u{70f}'
                | '\u{890}'..='\u{891}'
                | '\u{8e2}'
                | '\u{115f}'..='\u{1160}'
                | '\u{17b4}'..='\u{17b5}'
                | '\u{180b}'..='\u{180f}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{3164}'
                | '\u{fe00}'..='\u{fe0f}'
                | '\u{feff}'
                | '\u{ffa0}'
                | '\u{fff0}'..='\u{fffb}'
                | '\u{110bd}'
                | '\u{110cd}'
                | '\u{13430}'..='\u{1343f}'
                | '\u{1bca0}'..='\u{1bca3}'
                | '\u{1d173}'..='\u{1d17a}'
                | '\u{e0000}'..='\u{e0fff}'
        )
}

/// `c` written as an escape: `\n`, `\r`, `\t`, or `\u{1b}` with its code
/// point in hex, as Rust writes it (and the library's errors show it).
fn push_escape(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

/// `text` as the command line prints it: every run of 8 or more bytes of
/// a secret the process holds (the tokens it was given, the passwords of
/// its node URLs: `quorum_lock::mask_secrets`) shown as `***`, every
/// [`unsafe_char`] written as an escape (`\n`, `\u{1b}`), everything else
/// as it is; past its first 8 KiB, cut, saying how long it was. The one
/// function that stands between text from elsewhere and the terminal.
pub fn escaped(text: &str) -> Cow<'_, str> {
    // Only the head is searched for secrets (the search costs the text's
    // length times the secrets held) and shown: a peer's megabytes cost
    // what 8 KiB does.
    let (head, cut) = head_of(text);
    let masked = quorum_lock::mask_secrets(head);
    if !cut && !masked.chars().any(unsafe_char) {
        return masked;
    }
    let mut out = String::with_capacity(masked.len() + 40);
    for c in masked.chars() {
        if unsafe_char(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    if cut {
        let _ = write!(out, "… (cut; {} bytes in all)", text.len());
    }
    Cow::Owned(out)
}

/// The first 8 KiB of `text`, cut at a character boundary, and whether it
/// was cut.
pub fn head_of(text: &str) -> (&str, bool) {
    const SHOWN: usize = 8 * 1024;
    if text.len() <= SHOWN {
        return (text, false);
    }
    let mut at = SHOWN;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    (&text[..at], true)
}

/// Where the logs (`RUST_LOG`, and the server's) go: stderr, each event's
/// line [`escaped`]. The library escapes what peers say in the errors it
/// builds; this guards the rest (a field of a log event may quote text
/// from elsewhere), so that no event spans lines or drives the terminal.
/// Logs have no colours for that reason: their escape sequences would be
/// escaped too.
pub struct LogWriter;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogLine;

    fn make_writer(&'a self) -> LogLine {
        LogLine(Vec::new())
    }
}

/// One event's text, written to stderr, [`escaped`], when it is dropped
/// (the formatter writes each event whole, then drops its writer).
pub struct LogLine(Vec<u8>);

impl std::io::Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.0);
        let body = text.strip_suffix('\n').unwrap_or(&text);
        let line = format!("{}\n", escaped(body));
        // Nowhere to report a failed write of a log line.
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    }
}

/// Prints `line` on stderr after `quorum-lock: `, [`escaped`]: how every
/// message, warning and error reaches the terminal.
pub fn say(line: &str) {
    let line = format!("quorum-lock: {}\n", escaped(line));
    // A closed stderr (piped into `head`) is no reason to stop: the exit
    // status still says how the command ended, where `eprintln!` would
    // panic and turn it into 101.
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
}

/// Prints `line` on stderr after `quorum-lock: warning: `, [`escaped`].
pub fn warn(line: &str) {
    say(&format!("warning: {line}"));
}

/// `name` quoted for a message: [`escaped`], and after [`NAME_SHOWN`]
/// characters cut, with the length in bytes.
pub fn shown(name: &str) -> String {
    let head: String = name.chars().take(NAME_SHOWN).collect();
    let head = escaped(&head);
    if name.chars().nth(NAME_SHOWN).is_some() {
        format!("'{head}…' ({} bytes)", name.len())
    } else {
        format!("'{head}'")
    }
}

/// A leader's value (bytes) as one line of text, for `elect --listen`:
/// UTF-8 as it is, except a backslash (`\\`), newline (`\n`), carriage
/// return (`\r`), tab (`\t`); every other [`unsafe_char`], and bytes that
/// are not UTF-8, as `\xNN` per byte. A script can undo it: each
/// backslash starts an escape. A run of a secret the process holds (see
/// [`escaped`]) is shown as `***`, and that cannot be undone.
pub fn value_line(value: &[u8]) -> String {
    let mut out = String::with_capacity(value.len());
    let hex = |out: &mut String, bytes: &[u8]| {
        for b in bytes {
            let _ = write!(out, "\\x{b:02x}");
        }
    };
    for chunk in value.utf8_chunks() {
        for c in quorum_lock::mask_secrets(chunk.valid()).chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' | '\r' | '\t' => push_escape(&mut out, c),
                c if unsafe_char(c) => {
                    let mut buf = [0u8; 4];
                    hex(&mut out, c.encode_utf8(&mut buf).as_bytes());
                }
                c => out.push(c),
            }
        }
        hex(&mut out, chunk.invalid());
    }
    out
}

/// What listings show as the source of the locks of `quorum-lock
/// SUBCOMMAND ... -- COMMAND`: `SUBCOMMAND: COMMAND`, its words quoted as
/// a shell would need them, [`unsafe_char`]s escaped, cut after
/// [`COMMAND_SHOWN`] characters; `SUBCOMMAND` alone without a command.
/// Instead of the code location the library records by default, which is
/// the same for every lock `run` takes.
pub fn source_of(subcommand: &str, command: &[OsString]) -> String {
    if command.is_empty() {
        return subcommand.to_owned();
    }
    let words: Vec<String> = command
        .iter()
        .map(|word| shell_word(&word.to_string_lossy()))
        .collect();
    let line = format!("{subcommand}: {}", words.join(" "));
    if line.chars().nth(COMMAND_SHOWN).is_some() {
        let head: String = line.chars().take(COMMAND_SHOWN).collect();
        format!("{head}…")
    } else {
        line
    }
}

/// `word` as a shell would need it: as it is when it has nothing a shell
/// treats specially, else in single quotes; [`escaped`] either way, so
/// that the source stays on one line (and lockers accept it).
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || "-_./:=@%+,".contains(c));
    let escaped = escaped(word);
    if plain {
        escaped.into_owned()
    } else {
        format!("'{}'", escaped.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_secret_the_process_holds_is_masked_before_it_is_escaped() {
        quorum_lock::remember_secret("words-tok-77c1e");
        assert_eq!(escaped("ops (words-tok-77c1e)\u{1b}"), "ops (***)\\u{1b}");
        assert_eq!(value_line(b"v=words-tok-77c1e\xff"), "v=***\\xff");
    }

    #[test]
    fn text_from_elsewhere_stays_on_its_line_and_cannot_drive_the_terminal() {
        assert_eq!(
            escaped("bob\u{1b}]0;T\u{7}\nforged-row"),
            "bob\\u{1b}]0;T\\u{7}\\nforged-row"
        );
        assert_eq!(
            escaped("a\rb\tc\u{7f}d\u{9b}2J"),
            "a\\rb\\tc\\u{7f}d\\u{9b}2J"
        );
        assert_eq!(
            escaped("invoice\u{202e}fdp.exe \u{2066}x\u{2069} a\u{2028}b z\u{200b}w"),
            "invoice\\u{202e}fdp.exe \\u{2066}x\\u{2069} a\\u{2028}b z\\u{200b}w"
        );
        // Everything else is shown as it is, without a copy.
        for fine in [
            "host-a:4242",
            "bäckerei (日本) — ok",
            "C:\\src\\main.rs",
            "",
        ] {
            assert!(
                matches!(escaped(fine), Cow::Borrowed(t) if t == fine),
                "{fine:?}"
            );
        }
        // No character a terminal acts on survives, whatever comes in.
        let all: String = (0..0x3000u32).filter_map(char::from_u32).collect();
        assert!(!escaped(&all).chars().any(unsafe_char));
    }

    #[test]
    fn leader_values_are_one_line_that_can_be_undone() {
        assert_eq!(value_line(b"a\nb\r\tc\\d"), "a\\nb\\r\\tc\\\\d");
        assert_eq!(value_line(b"\x00\x1b[0m\x7f"), "\\x00\\x1b[0m\\x7f");
        assert_eq!(value_line(b"ok\xff\xfe"), "ok\\xff\\xfe");
        // A C1 control character, valid UTF-8, is escaped byte by byte,
        // and so is a bidirectional override.
        assert_eq!(value_line("x\u{85}y".as_bytes()), "x\\xc2\\x85y");
        assert_eq!(value_line("a\u{202e}b".as_bytes()), "a\\xe2\\x80\\xaeb");
        assert_eq!(value_line("h\u{e9}llo".as_bytes()), "h\u{e9}llo");
    }

    #[test]
    fn names_are_escaped_and_cut() {
        assert_eq!(shown("backup"), "'backup'");
        assert_eq!(shown("a\nb"), "'a\\nb'");
        let long = "n".repeat(5000);
        assert_eq!(
            shown(&long),
            format!("'{}…' (5000 bytes)", "n".repeat(NAME_SHOWN))
        );
    }

    #[test]
    fn the_source_is_the_command_line_quoted() {
        assert_eq!(
            source_of("run", &words(&["./backup.sh", "--full", "/var/lib/db"])),
            "run: ./backup.sh --full /var/lib/db"
        );
        assert_eq!(
            source_of("run", &words(&["sh", "-c", "exit 4; echo it's"])),
            "run: sh -c 'exit 4; echo it'\\''s'"
        );
        assert_eq!(
            source_of("elect", &words(&["a\nb", ""])),
            "elect: 'a\\nb' ''"
        );
        assert_eq!(
            source_of("run", &words(&["echo", "rtl\u{202e}txt"])),
            "run: echo 'rtl\\u{202e}txt'"
        );
        assert_eq!(source_of("lock", &[]), "lock");
        let long = source_of("run", &words(&[&"x".repeat(1000)]));
        assert_eq!(long.chars().count(), COMMAND_SHOWN + 1, "{long}");
        assert!(long.ends_with('…'), "{long}");
        assert!(long.len() <= 512);
    }
}
