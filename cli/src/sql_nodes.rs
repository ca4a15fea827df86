//! Databases as nodes: the `postgres://` and `mysql://` entries of
//! `--nodes`, each a `SqlLocker`: their settings, connecting to each, and
//! which of their failures are settings to fix rather than outages.
//!
//! A database URL may carry a password, so nothing here shows a URL as
//! given: messages name a database by its `SqlLocker::endpoint`
//! (`scheme://host:port/database`), or by [`shown`] URL before a locker
//! exists.

use std::time::Duration;

use futures::future::join_all;
use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Error, NetLocker};

use crate::args::ClientArgs;
use crate::fail::Failure;
use crate::node_urls::shown;
use crate::server_nodes::why;

/// What to check when databases refused the credentials, a privilege or
/// TLS.
pub const AUTH_ADVICE: &str = "check the user and password in the database URLs, which are \
     not shown here, the user's privileges on the lock tables, and the URLs' TLS parameters";

/// Whether `reason` (a database locker's, see `why`) is a setting to fix,
/// which waiting does not mend: credentials refused, a privilege missing,
/// TLS refused. These are exit 77, as a Redis password or a lock server's
/// certificate is.
pub fn is_refusal(reason: &str) -> bool {
    [
        "refused the credentials",
        "lacks a privilege",
        "TLS with the database failed",
    ]
    .iter()
    .any(|words| reason.contains(words))
}

/// Whether `reason` says the URL does not name a database this locker can
/// use (another server on that port, a database that does not exist, a
/// server too old): waiting does not mend that either, so a client that
/// would wait for its nodes fails at once (69), as for a lock server's
/// port that is not one.
pub fn is_mistaken(reason: &str) -> bool {
    [
        "does not speak the protocol",
        "the database named in the URL does not exist",
        "is too old: the locker needs",
    ]
    .iter()
    .any(|words| reason.contains(words))
}

/// The settings every database node shares: the library's defaults, with
/// the command's validity (which is also the quarantine after a new lock
/// table or a server start, as for Redis), `--sql-prefix`, and
/// `--connect-timeout` for each call, as for Redis.
pub fn config(args: &ClientArgs, validity: Option<Duration>) -> Result<SqlConfig, Failure> {
    let mut config = SqlConfig::default();
    if let Some(prefix) = &args.sql.sql_prefix {
        config.table_prefix = prefix.clone();
        // The library checks the prefix when a locker is built; checked
        // here once, the message names the flag instead of a node.
        quorum_lock::sql::schema(Backend::Postgres, &config)
            .map_err(|e| Failure::usage(format!("--sql-prefix: {}", reason(&e))))?;
    }
    if let Some(validity) = validity {
        config.validity = validity;
    }
    // A database whose lock table was emptied (a crash, a failover), or
    // that restarted (MySQL), refuses new grants until every lock it may
    // have lost was refreshed back or expired: one validity.
    config.quarantine = config.validity;
    config.call_timeout = args.connect_timeout;
    Ok(config)
}

/// The databases of `urls` (each with how messages name it), checked and
/// ready to connect: nothing is sent anywhere yet.
pub struct Prepared {
    config: SqlConfig,
    urls: Vec<String>,
    lockers: Vec<SqlLocker>,
}

/// Checks every URL of `urls` (label, URL) before anything is sent
/// anywhere. The same server twice is refused: it would count twice
/// towards the quorum, and one outage would take both votes.
pub fn prepare(
    args: &ClientArgs,
    urls: &[(String, String)],
    validity: Option<Duration>,
) -> Result<Prepared, Failure> {
    let config = config(args, validity)?;
    let mut lockers: Vec<SqlLocker> = Vec::with_capacity(urls.len());
    let mut labels: Vec<&str> = Vec::with_capacity(urls.len());
    for (label, url) in urls {
        let locker = SqlLocker::new(url, config.clone())
            .map_err(|e| Failure::usage(format!("{label} ({}): {}", shown(url), reason(&e))))?;
        // Compared by the host and port the driver reads from the URL,
        // whatever its password holds; the endpoint only names it.
        if let Some(at) = lockers.iter().position(|l| l.same_server(&locker)) {
            return Err(Failure::usage(format!(
                "database server {} is listed twice ({} and {label}); each node counts once \
                 towards the quorum, even with another database or user",
                locker.endpoint(),
                labels[at]
            )));
        }
        lockers.push(locker);
        labels.push(label);
    }
    Ok(Prepared {
        config,
        urls: urls.iter().map(|(_, url)| url.clone()).collect(),
        lockers,
    })
}

impl Prepared {
    /// Every database, in the order given, connected (its server version
    /// checked, its tables created if missing) when it answers, each with
    /// why it did not (`None` when it did). One that did not answer
    /// connects again on each later call.
    pub async fn connect(self, args: &ClientArgs) -> Vec<(SqlLocker, Option<String>)> {
        // Connecting, checking the version and creating the tables is one
        // call, bounded by the call timeout; this bounds the whole in case
        // the driver does not return.
        let limit = args.connect_timeout.saturating_mul(5);
        let config = &self.config;
        let connects = self
            .urls
            .iter()
            .map(|url| tokio::time::timeout(limit, SqlLocker::connect(url, config.clone())));
        let mut nodes = Vec::with_capacity(self.lockers.len());
        for (unconnected, result) in self.lockers.into_iter().zip(join_all(connects).await) {
            nodes.push(match result {
                Ok(Ok(connected)) => (connected, None),
                Ok(Err(err)) => (unconnected, Some(why(&err))),
                Err(_) => (
                    unconnected,
                    Some(format!(
                        "the database did not answer within {}",
                        humantime::format_duration(limit)
                    )),
                ),
            });
        }
        nodes
    }
}

/// The reason of a library error, without the endpoint it names (the
/// caller names the node).
fn reason(err: &Error) -> String {
    match err {
        Error::InvalidArgument(what) => what.clone(),
        other => why(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_told_from_outages() {
        assert!(is_refusal(
            "the database refused the credentials (password authentication failed for user \"x\")"
        ));
        assert!(is_refusal(
            "the database user lacks a privilege the locker needs (...)"
        ));
        assert!(!is_refusal("cannot reach the database: connection refused"));
        assert!(!is_refusal("no answer within 2s"));
        assert!(is_mistaken(
            "the server does not speak the protocol: unexpected response from SSLRequest"
        ));
        assert!(!is_mistaken(
            "cannot reach the database: connection refused"
        ));
    }

    /// The help text states the default prefix; it must be the library's.
    #[test]
    fn the_documented_prefix_is_the_library_default() {
        use clap::CommandFactory;
        let prefix = SqlConfig::default().table_prefix;
        let cli = crate::args::Cli::command();
        let run = cli.find_subcommand("run").expect("a run subcommand");
        let help = run
            .get_arguments()
            .find(|a| a.get_id() == "sql_prefix")
            .and_then(|a| a.get_help())
            .map(|h| h.to_string())
            .expect("--sql-prefix has help");
        assert!(help.contains(&format!("[default: {prefix}]")), "{help}");
    }
}
