//! `quorum-lock certs`: a private CA for a cluster, a certificate per lock
//! server for the host clients list it by, and client certificates for
//! mutual TLS, written as PEM files with rcgen.
//!
//! The CA is made once, the first time a directory is used, and signs
//! everything later runs make in that directory; `--force` replaces node
//! and client files but never the CA. Every certificate made is checked
//! against the CA with rustls' own verifier before anything is written, so
//! a CA key that does not belong to its certificate, or a CA that expires
//! before the new certificates, is reported instead of producing files no
//! server would accept.

use std::net::IpAddr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use crate::args::CertsArgs;
use crate::fail::{Failure, FAILURE};

mod der;
mod files;

/// The start of the CA's name (its subject's common name, its only
/// attribute), which ends with a short id of its key.
const CA_NAME: &str = "quorum-lock CA";
/// A new CA lasts this long, or as long as the certificates it is first
/// made for if that is longer.
const CA_DAYS: u64 = 3650;
const DAY: Duration = Duration::from_secs(86_400);
/// Certificates start this long before they are made, for clocks behind
/// ours.
const BACKDATE: Duration = Duration::from_secs(3600);

const CA_CERT: &str = "ca.pem";
const CA_KEY: &str = "ca-key.pem";

/// A lock server host, and the ports it was listed with.
struct Node {
    host: String,
    ip: Option<IpAddr>,
    ports: Vec<u16>,
}

/// One file to write: where, what, and whether it is a secret.
struct Output {
    path: PathBuf,
    pem: String,
    secret: bool,
    what: String,
}

pub fn certs(args: CertsArgs) -> Result<u8, Failure> {
    let nodes = nodes(&args)?;
    let clients = clients(&args.client)?;
    let days = u64::from(args.days);
    let dir = &args.dir;
    let ca_cert = dir.join(CA_CERT);
    let ca_key = dir.join(CA_KEY);
    let existing_ca = match (ca_cert.exists(), ca_key.exists()) {
        (true, true) => true,
        (false, false) => false,
        (true, false) | (false, true) => {
            let (has, lacks) = if ca_cert.exists() {
                (&ca_cert, &ca_key)
            } else {
                (&ca_key, &ca_cert)
            };
            return Err(Failure::usage(format!(
                "{} exists but {} does not: a CA needs both its certificate and its key; \
                 restore the missing file, or use a new --dir for a new CA",
                has.display(),
                lacks.display()
            )));
        }
    };
    if existing_ca && nodes.is_empty() && clients.is_empty() {
        return Err(Failure::usage(format!(
            "nothing to do: {} already holds a CA; pass --node HOST or --client NAME to make \
             certificates signed by it",
            dir.display()
        )));
    }

    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|_| Failure::new(FAILURE, "the system clock is before 1970"))?;
    let valid_until = now + DAY * args.days;

    let mut outputs = Vec::new();
    let (check, issuer) = if existing_ca {
        let read = |path: &Path| {
            std::fs::read_to_string(path)
                .map_err(|e| Failure::new(FAILURE, format!("cannot read {}: {e}", path.display())))
        };
        let check = Check::new(&read(&ca_cert)?, &ca_cert, now, valid_until)?;
        let key = KeyPair::from_pem(&read(&ca_key)?).map_err(|e| {
            Failure::usage(format!(
                "{} is not a private key quorum-lock certs can use: {e}",
                ca_key.display()
            ))
        })?;
        let params = ca_params(&check.ca_name, now, days);
        (check, Issuer::new(params, key))
    } else {
        let key = generate()?;
        // A name of its own, so that a certificate from another cluster's
        // CA is refused as from an unknown CA, not as a bad signature.
        let id: String = key
            .public_key_raw()
            .iter()
            .rev()
            .take(4)
            .map(|b| format!("{b:02x}"))
            .collect();
        let params = ca_params(&format!("{CA_NAME} {id}"), now, days);
        let cert = params
            .self_signed(&key)
            .map_err(|e| Failure::new(FAILURE, format!("cannot make the CA certificate: {e}")))?;
        outputs.push(Output {
            path: ca_cert.clone(),
            pem: cert.pem(),
            secret: false,
            what: "the CA certificate: servers and clients trust it (--tls-ca, --tls-client-ca)"
                .into(),
        });
        outputs.push(Output {
            path: ca_key.clone(),
            pem: key.serialize_pem(),
            secret: true,
            what: "the CA's private key: it signs new certificates; keep it off the servers".into(),
        });
        (
            Check::new(&cert.pem(), &ca_cert, now, valid_until)?,
            Issuer::new(params, key),
        )
    };

    for node in &nodes {
        let stem = format!("node-{}", file_safe(&node.host));
        let key = generate()?;
        let san = match node.ip {
            Some(ip) => SanType::IpAddress(ip),
            None => SanType::DnsName(node.host.as_str().try_into().map_err(|e| {
                Failure::usage(format!("--node {}: not a DNS name: {e}", node.host))
            })?),
        };
        let params = leaf_params(
            &node.host,
            vec![san],
            ExtendedKeyUsagePurpose::ServerAuth,
            now,
            valid_until,
        );
        let cert = params.signed_by(&key, &issuer).map_err(|e| {
            Failure::new(
                FAILURE,
                format!("cannot sign the certificate of {}: {e}", node.host),
            )
        })?;
        check.server(cert.der(), &node.host)?;
        let listed = if node.ports.is_empty() {
            String::new()
        } else {
            let ports: Vec<String> = node.ports.iter().map(u16::to_string).collect();
            let word = if ports.len() == 1 { "port" } else { "ports" };
            format!(" ({word} {})", ports.join(", "))
        };
        outputs.push(Output {
            path: dir.join(format!("{stem}.pem")),
            pem: cert.pem(),
            secret: false,
            what: format!(
                "the certificate of the lock server at {}{listed}",
                node.host
            ),
        });
        outputs.push(Output {
            path: dir.join(format!("{stem}-key.pem")),
            pem: key.serialize_pem(),
            secret: true,
            what: "its private key".into(),
        });
    }
    for name in &clients {
        let key = generate()?;
        let params = leaf_params(
            name,
            Vec::new(),
            ExtendedKeyUsagePurpose::ClientAuth,
            now,
            valid_until,
        );
        let cert = params.signed_by(&key, &issuer).map_err(|e| {
            Failure::new(
                FAILURE,
                format!("cannot sign the client certificate {name}: {e}"),
            )
        })?;
        check.client(cert.der())?;
        outputs.push(Output {
            path: dir.join(format!("client-{name}.pem")),
            pem: cert.pem(),
            secret: false,
            what: format!("the client certificate '{name}' (mutual TLS)"),
        });
        outputs.push(Output {
            path: dir.join(format!("client-{name}-key.pem")),
            pem: key.serialize_pem(),
            secret: true,
            what: "its private key".into(),
        });
    }

    // Every refusal before the first write, and the writing itself all or
    // nothing (files.rs): a run either writes all its files or none.
    if !args.force {
        let taken: Vec<String> = outputs
            .iter()
            .filter(|o| o.path.exists())
            .map(|o| o.path.display().to_string())
            .collect();
        if !taken.is_empty() {
            return Err(Failure::usage(format!(
                "refusing to overwrite {}: pass --force to replace them (the CA is kept)",
                taken.join(", ")
            )));
        }
    }
    make_dir(dir)?;
    files::write_all(&outputs, args.force)?;
    // Written, not `print!`ed: a closed stdout must not turn a done job
    // into a panic.
    let report = report(&args, &nodes, &clients, &outputs, existing_ca);
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), report.as_bytes());
    Ok(0)
}

fn generate() -> Result<KeyPair, Failure> {
    KeyPair::generate().map_err(|e| Failure::new(FAILURE, format!("cannot make a key pair: {e}")))
}

/// Settings valid from `from` until `until`, both since the Unix epoch.
fn valid(from: Duration, until: Duration) -> CertificateParams {
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let mut params = CertificateParams::default();
    params.not_before = epoch + from;
    params.not_after = epoch + until;
    params
}

/// The settings of the CA called `name`: the same subject, key usages and
/// key identifier every time, which is all an issuer is made of.
fn ca_params(name: &str, now: Duration, days: u64) -> CertificateParams {
    let lasts = DAY * u32::try_from(days.max(CA_DAYS) + 1).unwrap_or(u32::MAX);
    let mut params = valid(now.saturating_sub(BACKDATE), now + lasts);
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

fn leaf_params(
    name: &str,
    sans: Vec<SanType>,
    usage: ExtendedKeyUsagePurpose,
    now: Duration,
    valid_until: Duration,
) -> CertificateParams {
    let mut params = valid(now.saturating_sub(BACKDATE), valid_until);
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    params.subject_alt_names = sans;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    params
}

/// Checks new certificates with the verifiers the lock servers and clients
/// use: signed by the CA's key, for the name, for the purpose.
struct Check {
    ca_cert: PathBuf,
    /// The CA's common name, which names it as the issuer of what it signs.
    ca_name: String,
    roots: Arc<rustls::RootCertStore>,
    now: UnixTime,
}

impl Check {
    /// Also refuses a CA that has expired, or expires before `valid_until`
    /// (a verifier takes the CA's word for its dates).
    fn new(
        ca_pem: &str,
        ca_cert: &Path,
        now: Duration,
        valid_until: Duration,
    ) -> Result<Check, Failure> {
        use rustls::pki_types::pem::PemObject;
        let ca = ca_cert.display();
        let bad = |why: String| {
            Failure::usage(format!(
                "{ca} is not a CA certificate quorum-lock certs can sign with: {why}"
            ))
        };
        let certs = CertificateDer::pem_slice_iter(ca_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(e.to_string()))?;
        let [cert] = certs.as_slice() else {
            return Err(bad(format!(
                "expected one certificate, found {}",
                certs.len()
            )));
        };
        let (ca_name, expires) = der::name_and_expiry(cert).ok_or_else(|| {
            bad(
                "cannot read its name and expiry date (quorum-lock certs makes CAs whose \
                     subject is one common name)"
                    .to_owned(),
            )
        })?;
        if expires <= now {
            return Err(Failure::usage(format!(
                "the CA in {ca} has expired: make a new CA in a new --dir and move every server \
                 and client to it (docs/lock-servers.md, rotating certificates)"
            )));
        }
        if expires < valid_until {
            let days = (expires - now).as_secs() / DAY.as_secs();
            return Err(Failure::usage(format!(
                "the CA in {ca} expires in {days} days, before the new certificates would: pass \
                 --days {days} or less, or make a new CA in a new --dir and move to it"
            )));
        }
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.clone()).map_err(|e| bad(e.to_string()))?;
        Ok(Check {
            ca_cert: ca_cert.to_owned(),
            ca_name,
            roots: Arc::new(roots),
            now: UnixTime::since_unix_epoch(now),
        })
    }

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    fn server(&self, der: &CertificateDer<'_>, host: &str) -> Result<(), Failure> {
        use rustls::client::danger::ServerCertVerifier;
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            self.roots.clone(),
            Self::provider(),
        )
        .build()
        .map_err(|e| Failure::new(FAILURE, format!("cannot check certificates: {e}")))?;
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| Failure::usage(format!("--node {host}: {e}")))?;
        verifier
            .verify_server_cert(der, &[], &name, &[], self.now)
            .map(|_| ())
            .map_err(|e| self.refused(e))
    }

    fn client(&self, der: &CertificateDer<'_>) -> Result<(), Failure> {
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            self.roots.clone(),
            Self::provider(),
        )
        .build()
        .map_err(|e| Failure::new(FAILURE, format!("cannot check certificates: {e}")))?;
        verifier
            .verify_client_cert(der, &[], self.now)
            .map(|_| ())
            .map_err(|e| self.refused(e))
    }

    fn refused(&self, err: rustls::Error) -> Failure {
        let key = self.ca_cert.with_file_name(CA_KEY);
        Failure::usage(format!(
            "a certificate signed with {} does not verify against {} ({err}): the key must be \
             the CA's own, and the CA one made by quorum-lock certs",
            key.display(),
            self.ca_cert.display()
        ))
    }
}

/// The lock servers of `--node` and `--nodes`, one per host in the order
/// first given; a host listed with several ports gets one certificate.
fn nodes(args: &CertsArgs) -> Result<Vec<Node>, Failure> {
    // The client commands' list may hold groups (`east=A,B;west=C`): every
    // group's servers, ids taken off, as node_groups.rs cuts the list.
    let groups = match &args.nodes {
        Some(list) => crate::node_groups::group_texts(list)?,
        None => Vec::new(),
    };
    let listed = groups.iter().flat_map(|(_, nodes)| nodes.split(','));
    // The same lists as the client commands' --nodes, which may hold
    // database and Redis URLs with passwords (a comma in one splits it):
    // when any entry may carry a secret, entries are named by place only.
    let secret_bearing = args
        .node
        .iter()
        .map(String::as_str)
        .chain(groups.iter().map(|(_, nodes)| *nodes))
        .any(|e| e.contains(['@', '=']) || e.contains("://"));
    let mut nodes: Vec<Node> = Vec::new();
    for (i, entry) in args
        .node
        .iter()
        .map(String::as_str)
        .chain(listed)
        .enumerate()
    {
        let entry = entry.trim();
        let named = if secret_bearing {
            format!("{} ({})", i + 1, crate::node_urls::HIDDEN)
        } else {
            format!("'{}'", crate::words::escaped(entry))
        };
        if entry.contains("://") || entry.contains('@') {
            return Err(Failure::usage(format!(
                "bad node {named}: a URL is not a lock server; certs makes certificates for lock \
                 servers, given as host or host:port"
            )));
        }
        let (host, port) = split(entry, &named)?;
        let ip = host.parse::<IpAddr>().ok();
        if ip.is_none() && ServerName::try_from(host.to_owned()).is_err() {
            return Err(Failure::usage(format!(
                "bad node {named}: the host is neither an IP address nor a DNS name"
            )));
        }
        let host = host.to_ascii_lowercase();
        match nodes.iter_mut().find(|n| n.host == host) {
            Some(node) => node.ports.extend(port),
            None => nodes.push(Node {
                host,
                ip,
                ports: port.into_iter().collect(),
            }),
        }
    }
    Ok(nodes)
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`; a bare IPv6 address too.
/// `named` is how a message names the entry.
fn split<'a>(entry: &'a str, named: &str) -> Result<(&'a str, Option<u16>), Failure> {
    let bad = |why: &str| Failure::usage(format!("bad node {named}: {why}"));
    if entry.is_empty() {
        return Err(bad("empty entry (expected host or host:port)"));
    }
    if entry.parse::<std::net::Ipv6Addr>().is_ok() {
        return Ok((entry, None));
    }
    let (host, port) = match entry.strip_prefix('[') {
        Some(rest) => {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| bad("an IPv6 address in brackets needs its ']'"))?;
            match after {
                "" => (host, None),
                _ => match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return Err(bad("expected [address]:port")),
                },
            }
        }
        None => match entry.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (entry, None),
        },
    };
    if host.is_empty() {
        return Err(bad("the host is empty"));
    }
    let port = match port.map(str::parse::<u16>) {
        None => None,
        Some(Ok(port)) if port > 0 => Some(port),
        Some(_) => return Err(bad("the port must be a number from 1 to 65535")),
    };
    Ok((host, port))
}

/// Client names become file names and certificate subjects: letters,
/// digits, `.`, `_` and `-`.
fn clients(names: &[String]) -> Result<Vec<String>, Failure> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let fits = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if name.is_empty() || name.starts_with('.') || !name.chars().all(fits) {
            return Err(Failure::usage(format!(
                "bad client name '{name}': use letters, digits, '.', '_' and '-' (it names the \
                 files client-NAME.pem and client-NAME-key.pem)"
            )));
        }
        if out.contains(name) {
            return Err(Failure::usage(format!("client {name} is listed twice")));
        }
        out.push(name.clone());
    }
    Ok(out)
}

/// A host as part of a file name (IPv6 colons are not welcome everywhere).
fn file_safe(host: &str) -> String {
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn make_dir(dir: &Path) -> Result<(), Failure> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Failure::new(FAILURE, format!("cannot create {}: {e}", dir.display())))
}

/// A path or word as the shell reads it back.
fn quote(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./,:@%+=-".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// What was written, and the flags that use it.
fn report(
    args: &CertsArgs,
    nodes: &[Node],
    clients: &[String],
    outputs: &[Output],
    existing_ca: bool,
) -> String {
    let dir = &args.dir;
    let path = |name: &str| quote(&dir.join(name).display().to_string());
    let mut out = String::new();
    if existing_ca {
        out.push_str(&format!(
            "Signed with the CA in {} (kept as it is).\n",
            path(CA_CERT)
        ));
    }
    let width = outputs
        .iter()
        .map(|o| o.path.display().to_string().chars().count())
        .max()
        .unwrap_or(0);
    out.push_str("Wrote:\n");
    for output in outputs {
        let mode = if output.secret { " (mode 600)" } else { "" };
        out.push_str(&format!(
            "  {:<width$}  {}{mode}\n",
            output.path.display().to_string(),
            output.what
        ));
    }
    let ca = path(CA_CERT);
    let mutual = !clients.is_empty();
    if !nodes.is_empty() {
        out.push_str(
            "\nStart each lock server with its own certificate (and its usual token flags):\n",
        );
        for node in nodes {
            let stem = format!("node-{}", file_safe(&node.host));
            let tls = format!(
                "--tls-cert {} --tls-key {}{}",
                path(&format!("{stem}.pem")),
                path(&format!("{stem}-key.pem")),
                if mutual {
                    format!(" --tls-client-ca {ca}")
                } else {
                    String::new()
                }
            );
            let listen_host = match node.ip {
                Some(IpAddr::V6(ip)) => format!("[{ip}]"),
                Some(ip) => ip.to_string(),
                // A name: every interface, or loopback for localhost.
                None if node.host == "localhost" => "127.0.0.1".to_owned(),
                None => "0.0.0.0".to_owned(),
            };
            if node.ports.is_empty() {
                out.push_str(&format!(
                    "  quorum-lock server --listen {listen_host}:PORT {tls}\n"
                ));
            }
            for port in &node.ports {
                out.push_str(&format!(
                    "  quorum-lock server --listen {listen_host}:{port} {tls}\n"
                ));
            }
        }
    }
    let mut listed: Vec<String> = Vec::new();
    for node in nodes {
        let host = match node.ip {
            Some(IpAddr::V6(ip)) => format!("[{ip}]"),
            _ => node.host.clone(),
        };
        if node.ports.is_empty() {
            listed.push(format!("{host}:PORT"));
        }
        listed.extend(node.ports.iter().map(|port| format!("{host}:{port}")));
    }
    let node_list = if listed.is_empty() {
        "HOST:PORT,...".to_owned()
    } else {
        listed.join(",")
    };
    let client_flags = match clients.first() {
        Some(name) => format!(
            " --tls-cert {} --tls-key {}",
            path(&format!("client-{name}.pem")),
            path(&format!("client-{name}-key.pem"))
        ),
        None => String::new(),
    };
    out.push_str(&format!(
        "\nClients trust the CA{} (the same TLS flags for locks, force-unlock and status):\n  \
         quorum-lock run --nodes {} --tls-ca {ca}{client_flags} NAME -- COMMAND\n",
        if mutual {
            " and present a client certificate"
        } else {
            ""
        },
        quote(&node_list),
    ));
    if clients.len() > 1 {
        out.push_str("  (each client with its own --tls-cert and --tls-key)\n");
    }
    if !mutual {
        out.push_str(&format!(
            "\nFor mutual TLS, make client certificates with --client NAME and start the servers \
             with --tls-client-ca {ca} as well.\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_entries_are_split_into_host_and_port() {
        let ok = |entry: &str| split(entry, "entry").ok().map(|(h, p)| (h.to_owned(), p));
        assert_eq!(
            ok("db1.example.net"),
            Some(("db1.example.net".into(), None))
        );
        assert_eq!(ok("10.0.0.1:7070"), Some(("10.0.0.1".into(), Some(7070))));
        assert_eq!(ok("[::1]:7070"), Some(("::1".into(), Some(7070))));
        assert_eq!(ok("[::1]"), Some(("::1".into(), None)));
        assert_eq!(ok("fe80::1"), Some(("fe80::1".into(), None)));
        for bad in ["", ":7070", "host:0", "host:x", "[::1", "[::1]x", "a:1:2"] {
            assert!(split(bad, "entry").is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_expiry_is_read_from_a_certificate() {
        // 2030-01-01 is written as UTCTime, 2100-01-01 as GeneralizedTime.
        for until in [1_893_456_000, 4_102_444_800] {
            let until = Duration::from_secs(until);
            let key = KeyPair::generate().expect("key");
            let mut params = valid(Duration::ZERO, until);
            params.distinguished_name = DistinguishedName::new();
            params
                .distinguished_name
                .push(DnType::CommonName, "quorum-lock CA 0a1b2c3d");
            let cert = params.self_signed(&key).expect("certificate");
            assert_eq!(
                der::name_and_expiry(cert.der()),
                Some(("quorum-lock CA 0a1b2c3d".to_owned(), until))
            );
        }
        assert_eq!(der::name_and_expiry(b"\x30\x03\x02\x01"), None);
        // A subject with more than a common name is not one of ours.
        let key = KeyPair::generate().expect("key");
        let cert = CertificateParams::default()
            .self_signed(&key)
            .expect("certificate");
        assert!(der::name_and_expiry(cert.der()).is_some());
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "elsewhere");
        let cert = params.self_signed(&key).expect("certificate");
        assert_eq!(der::name_and_expiry(cert.der()), None);
    }

    #[test]
    fn paths_are_quoted_for_the_shell() {
        assert_eq!(quote("tls/ca.pem"), "tls/ca.pem");
        assert_eq!(quote("my certs/ca.pem"), "'my certs/ca.pem'");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
