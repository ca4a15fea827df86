//! A fake Redis speaking just enough RESP2 on a loopback port, from a
//! thread that serves a bounded number of connections: what a hostile or
//! broken server can make a `RedisLocker` say or log.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

/// `+OK`.
pub const OK: &[u8] = b"+OK\r\n";

/// What a user without the right to `CONFIG GET` is told.
pub const NOPERM: &[u8] =
    b"-NOPERM this user has no permissions to run the 'config|get' command\r\n";

pub fn bulk(text: &str) -> Vec<u8> {
    let mut out = format!("${}\r\n", text.len()).into_bytes();
    out.extend(text.as_bytes());
    out.extend(b"\r\n");
    out
}

pub fn array(items: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", items.len()).into_bytes();
    for item in items {
        out.extend(bulk(item));
    }
    out
}

/// An `INFO server` reply.
pub fn info(version: &str, run_id: &str) -> Vec<u8> {
    bulk(&format!(
        "# Server\r\nredis_version:{version}\r\nrun_id:{run_id}\r\nuptime_in_seconds:100000\r\n"
    ))
}

/// The replies to the connection's checks that every fake gives alike:
/// `TIME` and `SCRIPT LOAD`.
pub fn common(command: &str) -> Option<Vec<u8>> {
    match command {
        "TIME" => Some(array(&["1700000000", "0"])),
        "SCRIPT" => Some(bulk("0123456789012345678901234567890123456789")),
        _ => None,
    }
}

/// Reads one RESP2 command (an array of bulk strings); `None` at the end.
pub fn read_command(reader: &mut impl BufRead) -> Option<Vec<String>> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let count: usize = line.trim().strip_prefix('*')?.parse().ok()?;
    let mut args = Vec::with_capacity(count.min(16));
    for _ in 0..count.min(64) {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let len: usize = line.trim().strip_prefix('$')?.parse().ok()?;
        let mut arg = vec![0; len.min(1 << 16) + 2];
        reader.read_exact(&mut arg).ok()?;
        arg.truncate(len);
        args.push(String::from_utf8_lossy(&arg).into_owned());
    }
    Some(args)
}

/// Serves `connections` connections, one after another, at most 64
/// commands each: `reply(n, command)` answers the `n`th connection's
/// command (its name in capitals), or closes the connection with `None`.
pub fn serve(
    connections: usize,
    reply: impl Fn(usize, &str) -> Option<Vec<u8>> + Send + 'static,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake Redis");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().take(connections).enumerate() {
            let Ok(stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut writer = stream.try_clone().expect("clone the stream");
            let mut reader = BufReader::new(stream);
            for _ in 0..64 {
                let Some(args) = read_command(&mut reader) else {
                    break;
                };
                let name = args.first().map(|a| a.to_ascii_uppercase());
                let Some(answer) = reply(n, name.as_deref().unwrap_or("")) else {
                    break;
                };
                if writer.write_all(&answer).is_err() {
                    break;
                }
            }
        }
    });
    addr
}
