//! TLS end to end: `quorum-lock certs` makes a CA and certificates, the
//! servers and clients use them with the flags it prints (mutual TLS
//! included), a client without what the servers require is refused with an
//! error that says what to pass, and a client without TLS cannot get in.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::support::{cli, nodes, Finished, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

/// Runs `quorum-lock certs ARGS`.
fn certs(dir: &Scratch, args: &[&str]) -> Finished {
    let mut all = vec!["certs"];
    all.extend_from_slice(args);
    cli(dir, &all, &[], LIMIT)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

/// Ports nothing listens on right now, for servers started right after.
fn free_ports(n: usize) -> Vec<u16> {
    let probes: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind a probe"))
        .collect();
    probes
        .iter()
        .map(|p| p.local_addr().expect("probe address").port())
        .collect()
}

/// The arguments of the lines of `stdout` that start with `prefix`, words
/// split at spaces (the test's paths have none).
fn printed_commands(stdout: &str, prefix: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter_map(|line| line.trim().strip_prefix(prefix))
        .map(|rest| rest.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn certs_writes_its_files_once_and_keeps_the_ca() {
    let dir = Scratch::new("certs-files");
    let out = dir.file("tls");
    let out_text = out.display().to_string();
    let made = certs(
        &dir,
        &[
            "--dir",
            &out_text,
            "--node",
            "127.0.0.1:7001",
            "--nodes",
            "db1.example.net:7070,127.0.0.1:7002",
            "--client",
            "backup",
        ],
    );
    assert_eq!(made.code, Some(0), "{made:?}");
    let files = [
        ("ca.pem", 0o644),
        ("ca-key.pem", 0o600),
        ("node-127.0.0.1.pem", 0o644),
        ("node-127.0.0.1-key.pem", 0o600),
        ("node-db1.example.net.pem", 0o644),
        ("node-db1.example.net-key.pem", 0o600),
        ("client-backup.pem", 0o644),
        ("client-backup-key.pem", 0o600),
    ];
    for (name, expected) in files {
        let path = out.join(name);
        assert_eq!(mode(&path), expected, "{name}");
        assert!(
            made.stdout.contains(&path.display().to_string()),
            "{name} not reported: {made:?}"
        );
    }
    assert_eq!(mode(&out), 0o700);
    // Two ports of one host share its certificate.
    assert!(made.stdout.contains("(ports 7001, 7002)"), "{made:?}");
    assert!(
        made.stdout
            .contains(&format!("--tls-client-ca {out_text}/ca.pem")),
        "{made:?}"
    );

    let ca = std::fs::read(out.join("ca.pem")).expect("ca");
    let node = std::fs::read(out.join("node-127.0.0.1.pem")).expect("node cert");
    let again = certs(&dir, &["--dir", &out_text, "--node", "127.0.0.1"]);
    assert_eq!(again.code, Some(2), "{again:?}");
    assert!(again.stderr.contains("refusing to overwrite"), "{again:?}");
    assert!(again.stderr.contains("node-127.0.0.1.pem"), "{again:?}");
    assert!(again.stderr.contains("--force"), "{again:?}");
    assert_eq!(
        std::fs::read(out.join("node-127.0.0.1.pem")).expect("node cert"),
        node
    );

    let forced = certs(
        &dir,
        &["--dir", &out_text, "--node", "127.0.0.1", "--force"],
    );
    assert_eq!(forced.code, Some(0), "{forced:?}");
    assert!(
        forced.stdout.contains("Signed with the CA in"),
        "{forced:?}"
    );
    assert_eq!(
        std::fs::read(out.join("ca.pem")).expect("ca"),
        ca,
        "the CA is kept"
    );
    assert_ne!(
        std::fs::read(out.join("node-127.0.0.1.pem")).expect("node cert"),
        node
    );
    assert_eq!(mode(&out.join("node-127.0.0.1-key.pem")), 0o600);

    let nothing = certs(&dir, &["--dir", &out_text]);
    assert_eq!(nothing.code, Some(2), "{nothing:?}");
    assert!(nothing.stderr.contains("nothing to do"), "{nothing:?}");

    std::fs::remove_file(out.join("ca-key.pem")).expect("remove the CA key");
    let keyless = certs(&dir, &["--dir", &out_text, "--node", "db2.example.net"]);
    assert_eq!(keyless.code, Some(2), "{keyless:?}");
    assert!(keyless.stderr.contains("ca-key.pem"), "{keyless:?}");

    for bad in [
        ["--node", "bad_host!"],
        ["--client", "../x"],
        ["--node", "host:0"],
    ] {
        let refused = certs(&dir, &["--dir", &out_text, bad[0], bad[1]]);
        assert_eq!(refused.code, Some(2), "{bad:?}: {refused:?}");
    }
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn certs_writes_all_its_files_or_none() {
    let dir = Scratch::new("certs-all-or-none");

    // A new CA whose key cannot be written (a dangling link holds its
    // name): no CA certificate may be left without its key.
    let out = dir.file("new");
    std::fs::create_dir(&out).expect("create the directory");
    std::os::unix::fs::symlink(dir.file("nowhere"), out.join("ca-key.pem")).expect("symlink");
    let out_text = out.display().to_string();
    let failed = certs(&dir, &["--dir", &out_text, "--node", "127.0.0.1"]);
    assert_eq!(failed.code, Some(1), "{failed:?}");
    assert!(failed.stderr.contains("ca-key.pem"), "{failed:?}");
    assert_eq!(names_in(&out), ["ca-key.pem"], "{failed:?}");
    assert!(!dir.file("nowhere").exists(), "written through the link");

    // Replacing certificates (--force) where a later one cannot be
    // written (a directory holds its name): the earlier ones stay as they
    // were, and no staged or saved copy is left behind.
    let out = dir.file("kept");
    let out_text = out.display().to_string();
    let made = certs(&dir, &["--dir", &out_text, "--node", "127.0.0.1"]);
    assert_eq!(made.code, Some(0), "{made:?}");
    let before = names_in(&out);
    let read = |name: &str| std::fs::read(out.join(name)).expect(name);
    let (cert, key) = (read("node-127.0.0.1.pem"), read("node-127.0.0.1-key.pem"));
    std::fs::create_dir(out.join("node-db1.example.net.pem")).expect("a directory in the way");
    let failed = certs(
        &dir,
        &[
            "--dir",
            &out_text,
            "--force",
            "--node",
            "127.0.0.1",
            "--node",
            "db1.example.net",
        ],
    );
    assert_eq!(failed.code, Some(1), "{failed:?}");
    assert!(
        failed.stderr.contains("node-db1.example.net.pem"),
        "{failed:?}"
    );
    assert!(read("node-127.0.0.1.pem") == cert, "replaced: {failed:?}");
    assert!(
        read("node-127.0.0.1-key.pem") == key,
        "replaced: {failed:?}"
    );
    assert_eq!(mode(&out.join("node-127.0.0.1-key.pem")), 0o600);
    let mut expected = before.clone();
    expected.push("node-db1.example.net.pem".to_owned());
    expected.sort();
    assert_eq!(names_in(&out), expected, "{failed:?}");
}

#[test]
fn generated_certificates_carry_mutual_tls_end_to_end() {
    let dir = Scratch::new("certs-mtls");
    let out = dir.file("tls").display().to_string();
    let ports = free_ports(3);
    let list: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let made = certs(
        &dir,
        &[
            "--dir",
            &out,
            "--nodes",
            &list.join(","),
            "--client",
            "tester",
        ],
    );
    assert_eq!(made.code, Some(0), "{made:?}");

    // The servers exactly as printed, plus the test tokens and validity.
    let printed = printed_commands(&made.stdout, "quorum-lock server ");
    assert_eq!(printed.len(), 3, "{made:?}");
    let servers: Vec<Server> = printed
        .iter()
        .map(|words| {
            assert_eq!(words[0], "--listen", "{words:?}");
            let mut extra: Vec<&str> = words[2..].iter().map(String::as_str).collect();
            extra.push("--no-quarantine");
            Server::try_start(&dir, &words[1], crate::support::VALIDITY, &extra)
                .expect("a server with the printed flags")
        })
        .collect();
    let started = nodes(&servers);
    assert_eq!(started, list.join(","));

    // The client as printed, with a real lock name and command.
    let client = printed_commands(&made.stdout, "quorum-lock run ");
    assert_eq!(client.len(), 1, "{made:?}");
    let words = &client[0];
    let name_at = words
        .iter()
        .position(|w| w == "NAME")
        .expect("NAME placeholder");
    let mut run: Vec<&str> = vec!["run"];
    run.extend(words[..name_at].iter().map(String::as_str));
    let token = dir.token();
    run.extend([
        "--token-file",
        &token,
        "--validity",
        "6s",
        "job",
        "--",
        "sh",
        "-c",
        "exit 4",
    ]);
    let secure = cli(&dir, &run, &[], LIMIT);
    assert_eq!(secure.code, Some(4), "{secure:?}");

    // The admin commands take the same TLS flags.
    let tls_flags: Vec<&str> = words[..name_at].iter().map(String::as_str).collect();
    let admin = dir.admin();
    let mut status = vec!["status", "--admin-token-file", &admin];
    status.extend(&tls_flags);
    let status = cli(&dir, &status, &[], LIMIT);
    assert_eq!(status.code, Some(0), "{status:?}");
    assert_eq!(
        status.stdout.matches("reachable, protocol").count(),
        3,
        "{status:?}"
    );

    // Without the client certificate: refused, saying what to pass.
    let ca = format!("{out}/ca.pem");
    let bare = cli(
        &dir,
        &[
            "run",
            "--nodes",
            &started,
            "--token-file",
            &token,
            "--tls-ca",
            &ca,
            "job",
            "--",
            "true",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(bare.code, Some(77), "{bare:?}");
    for words in [
        "requires a client certificate",
        "--tls-cert FILE and --tls-key FILE",
    ] {
        assert!(bare.stderr.contains(words), "{words:?} missing: {bare:?}");
    }

    // A certificate from another CA: refused too.
    let stranger = dir.file("other").display().to_string();
    assert_eq!(
        certs(&dir, &["--dir", &stranger, "--client", "stranger"]).code,
        Some(0)
    );
    let cert = format!("{stranger}/client-stranger.pem");
    let key = format!("{stranger}/client-stranger-key.pem");
    let foreign = cli(
        &dir,
        &[
            "run",
            "--nodes",
            &started,
            "--token-file",
            &token,
            "--tls-ca",
            &ca,
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "job",
            "--",
            "true",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(foreign.code, Some(77), "{foreign:?}");
    assert!(
        foreign.stderr.contains("refused this client's certificate"),
        "{foreign:?}"
    );
    assert!(foreign.stderr.contains("--tls-client-ca"), "{foreign:?}");

    // Clients that exit without ending TLS politely are no misbehaviour.
    for server in &servers {
        let log = server.log_text();
        assert!(!log.contains("could not be decoded"), "{log}");
        assert!(log.contains("peer sent no certificates"), "{log}");
    }
}

#[test]
fn each_node_is_checked_by_its_host_unless_a_name_is_given() {
    let dir = Scratch::new("net-tls");
    // One self-signed certificate for localhost only, on every server.
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("certificate");
    std::fs::write(dir.file("cert.pem"), cert.cert.pem()).expect("write cert");
    std::fs::write(dir.file("key.pem"), cert.signing_key.serialize_pem()).expect("write key");
    let cert_path = dir.file("cert.pem").display().to_string();
    let key_path = dir.file("key.pem").display().to_string();
    let tls = [
        "--no-quarantine",
        "--tls-cert",
        &cert_path,
        "--tls-key",
        &key_path,
    ];
    let servers = [
        Server::start(&dir, &tls),
        Server::start(&dir, &tls),
        Server::start(&dir, &tls),
    ];
    let token = dir.token();
    let by_ip = nodes(&servers);
    let by_name = servers
        .iter()
        .map(|s| format!("localhost:{}", s.addr.port()))
        .collect::<Vec<_>>()
        .join(",");
    let run = |list: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            "--nodes",
            list,
            "--token-file",
            &token,
            "--tls-ca",
            &cert_path,
            // The servers' validity: a longer lease is refused.
            "--validity",
            "6s",
        ];
        args.extend_from_slice(extra);
        args.extend(["job", "--", "sh", "-c", "exit 4"]);
        cli(&dir, &args, &[], LIMIT)
    };

    let named = run(&by_name, &[]);
    assert_eq!(named.code, Some(4), "{named:?}");

    // By IP address, which the certificate does not name: refused, with
    // the way out.
    let mismatch = run(&by_ip, &[]);
    assert_eq!(mismatch.code, Some(77), "{mismatch:?}");
    for words in [
        "certificate is for localhost, not for 127.0.0.1",
        "--tls-server-name",
    ] {
        assert!(
            mismatch.stderr.contains(words),
            "{words:?} missing: {mismatch:?}"
        );
    }

    // --tls-server-name still sets one name for every node.
    let overridden = run(&by_ip, &["--tls-server-name", "localhost"]);
    assert_eq!(overridden.code, Some(4), "{overridden:?}");

    let plain = cli(
        &dir,
        &[
            "run",
            "--nonblock",
            "--nodes",
            &by_name,
            "--token-file",
            &token,
            "job",
            "--",
            "true",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(
        plain.code,
        Some(69),
        "a plain-text client must not reach a TLS server: {plain:?}"
    );

    let missing = cli(
        &dir,
        &[
            "run",
            "--nodes",
            &by_name,
            "--token-file",
            &token,
            "--tls-ca",
            "/nonexistent.pem",
            "job",
            "--",
            "true",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(missing.code, Some(2), "{missing:?}");
    assert!(missing.stderr.contains("/nonexistent.pem"), "{missing:?}");
}
