//! What a database URL says besides where `endpoint_of` shows: whether
//! its query parameters are all ones the driver understands (checked
//! before any driver reads it, since the PostgreSQL driver logs an unknown
//! one, key and value), and which server it names, to compare.
//!
//! Invariant: nothing here shows any part of the URL; errors name a
//! parameter by its position and the URL by its redacted endpoint.

use sqlx::any::AnyConnectOptions;

use super::dialect::Backend;
use crate::Error;

/// The query parameters the PostgreSQL driver (sqlx) understands, besides
/// `options[NAME]`.
const POSTGRES_PARAMETERS: [&str; 18] = [
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

/// The query parameters the MySQL driver (sqlx) understands.
const MYSQL_PARAMETERS: [&str; 14] = [
    "sslmode",
    "ssl-mode",
    "sslca",
    "ssl-ca",
    "charset",
    "collation",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "socket",
    "timezone",
    "time-zone",
];

/// Refuses a URL with a query parameter the driver of `backend` does not
/// understand. The PostgreSQL driver would log it, key and value, and the
/// MySQL driver would ignore it silently (a mistyped TLS setting, a
/// password it never sends); either may be a piece of a password (an
/// unencoded `&` in `password=…`, libpq's `sslpassword`), so the error
/// names the parameter by its position only.
pub(super) fn check_parameters(options: &AnyConnectOptions, backend: Backend) -> Result<(), Error> {
    for (i, (key, _)) in options.database_url.query_pairs().enumerate() {
        let (known, taken) = match backend {
            Backend::Postgres => (
                POSTGRES_PARAMETERS.contains(&&*key)
                    || (key.starts_with("options[") && key.ends_with(']')),
                format!("{}, options[NAME]", POSTGRES_PARAMETERS.join(", ")),
            ),
            Backend::MySql => (
                MYSQL_PARAMETERS.contains(&&*key),
                MYSQL_PARAMETERS.join(", "),
            ),
        };
        if !known {
            return Err(Error::InvalidArgument(format!(
                "the {} query parameter of the URL is not one the {} driver understands (not \
                 shown: it may be a piece of a password); percent-encode `&`, `=`, `+` and `#` \
                 in a password given in the URL (%26, %3D, %2B, %23). The driver takes: {taken}",
                ordinal(i + 1),
                backend.name()
            )));
        }
    }
    Ok(())
}

/// `1st`, `2nd`, `3rd`, `4th`, `11th`, `21st`, ...
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The database server a URL names, as its driver reads the URL: the
/// host (compared without case) or socket, and the port, query parameters
/// (`host=`, `hostaddr=`, `port=`, `socket=`) and the PostgreSQL driver's
/// environment defaults included. Two lockers with the same one are one
/// server, whose vote must count once. It comes from a URL that may hold
/// a secret in any part, so it has no `Debug` and is never shown.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Server {
    backend: Backend,
    /// The host name or address as written (not resolved), lowercased,
    /// or the socket's path.
    host: String,
    port: u16,
}

impl Server {
    pub(super) fn of(
        options: &AnyConnectOptions,
        backend: Backend,
        endpoint: &str,
    ) -> Result<Server, Error> {
        #[allow(unused_imports)]
        use sqlx::ConnectOptions as _;
        // The driver's error may quote a value of the URL: not shown.
        let unusable = || {
            Error::InvalidArgument(format!(
                "the parameters of the {} URL ({endpoint}) are not usable: check the port and \
                 the values of sslmode and the other parameters",
                backend.name()
            ))
        };
        #[allow(unused_variables)]
        let url = &options.database_url;
        let (host, socket, port) = match backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres => {
                let o = sqlx::postgres::PgConnectOptions::from_url(url).map_err(|_| unusable())?;
                (
                    o.get_host().to_owned(),
                    o.get_socket().cloned(),
                    o.get_port(),
                )
            }
            #[cfg(feature = "mysql")]
            Backend::MySql => {
                let o = sqlx::mysql::MySqlConnectOptions::from_url(url).map_err(|_| unusable())?;
                (
                    o.get_host().to_owned(),
                    o.get_socket().cloned(),
                    o.get_port(),
                )
            }
            #[allow(unreachable_patterns)]
            _ => return Err(unusable()),
        };
        let host = match socket {
            Some(path) => path.to_string_lossy().into_owned(),
            None => host.to_ascii_lowercase(),
        };
        Ok(Server {
            backend,
            host,
            port,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The URL's options, its parameters checked, and the server it names.
    fn parsed(url: &str, backend: Backend) -> Result<Server, Error> {
        let options: AnyConnectOptions = url.parse().expect(url);
        check_parameters(&options, backend)?;
        Server::of(&options, backend, "shown")
    }

    #[test]
    fn parameters_the_driver_does_not_understand_are_refused_unnamed() {
        for (url, backend, position) in [
            // An unencoded `&` in a password: its tail reads as a key.
            (
                "postgres://h/db?user=app&password=Pw&AmpTail9",
                Backend::Postgres,
                "3rd",
            ),
            (
                "postgres://app@h/db?sslmode=require&sslpassword=KeyPass8",
                Backend::Postgres,
                "2nd",
            ),
            ("mysql://app@h/db?password=MyPass7", Backend::MySql, "1st"),
            ("mysql://h/db?ssl_mode=REQUIRED", Backend::MySql, "1st"),
        ] {
            let Err(err) = parsed(url, backend) else {
                panic!("{url}: accepted");
            };
            let text = err.to_string();
            assert!(
                text.contains(&format!(
                    "the {position} query parameter of the URL is not one"
                )),
                "{url}: {text}"
            );
            for piece in [
                "AmpTail9",
                "sslpassword",
                "KeyPass8",
                "MyPass7",
                "ssl_mode",
                "Pw",
            ] {
                assert!(!text.contains(piece), "{url}: {piece} shows: {text}");
            }
        }
        for (url, backend) in [
            (
                "postgres://h/db?user=app&password=P%26w&sslmode=verify-full&sslrootcert=ca.pem\
                 &options[statement_timeout]=5s&application_name=x",
                Backend::Postgres,
            ),
            (
                "mariadb://u:p@h/db?ssl-mode=VERIFY_IDENTITY&ssl-ca=ca.pem&charset=utf8mb4",
                Backend::MySql,
            ),
        ] {
            assert!(parsed(url, backend).is_ok(), "{url}");
        }
        assert_eq!(
            [1, 2, 3, 4, 11, 12, 13, 21, 102].map(ordinal),
            ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "102nd"]
        );
    }

    #[test]
    fn one_server_is_told_whatever_the_url_says_besides() {
        let server = |url: &str, backend| parsed(url, backend).ok();
        let pg = Backend::Postgres;
        let same = [
            "postgres://app@db.internal/locks?password=P@ss1",
            "postgres://other@DB.internal:5432/other",
            "postgresql://h/x?host=db.internal&port=5432",
        ];
        for url in same {
            assert!(
                server(url, pg) == server(same[0], pg) && server(url, pg).is_some(),
                "{url}"
            );
        }
        for url in [
            "postgres://db.internal:5433/locks",
            "postgres://db2.internal/locks",
            "postgres://h/x?host=db.internal&port=5433",
        ] {
            assert!(server(url, pg) != server(same[0], pg), "{url}");
        }
        // The default port of each backend.
        assert!(
            server("mysql://u@[::1]/x", Backend::MySql)
                == server("mariadb://[::1]:3306/y", Backend::MySql)
        );
        assert!(server("mysql://h:5432/x", Backend::MySql) != server("postgres://h:5432/x", pg));
    }
}
