//! Lock server endpoints: `host:port`, and the host a TLS client takes
//! the server's name from.

#[cfg_attr(not(feature = "tls"), allow(dead_code))]
/// The host of `host:port`, without the brackets of an IPv6 address;
/// `None` unless the port is a number from 1 to 65535 and the host is not
/// empty (an IPv6 host must be in brackets).
pub(crate) fn host_of(endpoint: &str) -> Option<&str> {
    let (host, port) = endpoint.rsplit_once(':')?;
    match port.parse::<u16>() {
        Ok(0) | Err(_) => return None,
        Ok(_) => {}
    }
    let host = match host.strip_prefix('[') {
        Some(rest) => rest.strip_suffix(']')?,
        None if host.contains(':') => return None,
        None => host,
    };
    (!host.is_empty() && !host.contains(char::is_whitespace)).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn hosts_are_taken_from_host_and_port() {
        assert_eq!(host_of("db1.example.net:7070"), Some("db1.example.net"));
        assert_eq!(host_of("10.0.0.1:1"), Some("10.0.0.1"));
        assert_eq!(host_of("[::1]:7070"), Some("::1"));
        for bad in [
            "",
            "host",
            "host:",
            "host:0",
            "host:65536",
            ":7070",
            "::1:7070",
            "[::1:7070",
            "a b:1",
            "[]:7070",
        ] {
            assert_eq!(host_of(bad), None, "{bad:?}");
        }
    }
}
