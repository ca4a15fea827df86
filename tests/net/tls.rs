//! TLS between `RemoteLocker` and `LockServer`: the name each connection
//! expects comes from its endpoint, mutual TLS admits only clients with a
//! certificate from the given CA, and every refusal says what to fix. The
//! certificates are fixed files (tests/data/README.md).
#![cfg(feature = "tls")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{
    connect_all, ClientTls, LockServer, RemoteConfig, RemoteLocker, ServerConfig, ServerTls,
};
use quorum_lock::{Dsync, Error, LocalLocker, LockArgs, NetLocker};
use tokio::sync::oneshot;

use crate::loopback;
use crate::tls_files::{
    CA, CLIENT_CERT, CLIENT_KEY, NODE_CERT, NODE_KEY, SELF_SIGNED, SELF_SIGNED_KEY,
};

const TOKEN: &str = "client-secret";

/// A TLS lock server on an ephemeral loopback port; stops when dropped.
struct Node {
    port: u16,
    locker: Arc<LocalLocker>,
    _stop: oneshot::Sender<()>,
}

async fn serve(tls: ServerTls) -> Node {
    let locker = Arc::new(LocalLocker::new());
    let server =
        LockServer::new(locker.clone(), ServerConfig::new(TOKEN).tls(tls)).expect("valid config");
    let (bound, stop) = loopback::serve(server).await;
    Node {
        port: bound.port(),
        locker,
        _stop: stop,
    }
}

/// A server with the certificate for `localhost`.
async fn localhost_server() -> Node {
    serve(ServerTls::from_pem(NODE_CERT, NODE_KEY).expect("server tls")).await
}

/// A server with the certificate for `localhost` that requires client
/// certificates from the test CA.
async fn mutual_server() -> Node {
    let tls = ServerTls::from_pem(NODE_CERT, NODE_KEY)
        .and_then(|tls| tls.require_client_cert(CA))
        .expect("server tls");
    assert!(tls.requires_client_cert());
    serve(tls).await
}

fn config(tls: ClientTls) -> RemoteConfig {
    let mut config = RemoteConfig::new(TOKEN);
    config.tls = Some(tls);
    config
}

fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["r".to_string()].into(),
        owner: "test".into(),
        source: "tests/net/tls.rs".into(),
        quorum: 1,
    }
}

/// The reason a locker that could not connect gives, which must be a TLS
/// refusal.
fn refusal(locker: &RemoteLocker) -> String {
    assert!(!locker.is_online(), "connected although it must be refused");
    match locker.connect_error() {
        Some(err @ Error::Tls { .. }) => {
            assert!(!err.is_retryable());
            err.to_string()
        }
        other => panic!("expected a TLS refusal, got {other:?}"),
    }
}

/// A locker of `node` reached as `host`, with `tls`, which must be online
/// (else the reason it gives is shown).
async fn online_at(host: &str, node: &Node, tls: ClientTls) -> RemoteLocker {
    let locker = RemoteLocker::connect(format!("{host}:{}", node.port), config(tls))
        .await
        .expect("connect");
    assert!(locker.is_online(), "{:?}", locker.connect_error());
    locker
}

/// The [`refusal`] of a locker of `node` reached as `host`, with `tls`:
/// `connect` must give an offline locker, not an error.
async fn refusal_at(host: &str, node: &Node, tls: ClientTls) -> String {
    let locker = RemoteLocker::connect(format!("{host}:{}", node.port), config(tls))
        .await
        .expect("an offline locker, not an error");
    refusal(&locker)
}

#[tokio::test]
async fn tls_connections_work_and_plain_clients_are_turned_away() {
    let tls = ServerTls::from_pem(SELF_SIGNED, SELF_SIGNED_KEY).expect("server tls");
    let node = serve(tls).await;
    // The certificate names 127.0.0.1: the IP address is the name.
    let client = ClientTls::new(SELF_SIGNED).expect("client tls");
    let secure = RemoteLocker::connect(format!("127.0.0.1:{}", node.port), config(client))
        .await
        .expect("connect");
    assert!(secure.is_online(), "{:?}", secure.connect_error());
    assert!(secure.lock(&args("u")).await.unwrap());
    assert_eq!(node.locker.snapshot().len(), 1);

    let mut plain = RemoteConfig::new(TOKEN);
    plain.connect_timeout = Duration::from_millis(500);
    let plain = RemoteLocker::connect(format!("127.0.0.1:{}", node.port), plain)
        .await
        .unwrap();
    assert!(
        !plain.is_online(),
        "a plain-text client must not get through a TLS server"
    );
    // The server's answer, a TLS alert, says at once what is wrong.
    let why = plain.connect_error().map(|e| e.to_string());
    assert!(
        why.as_deref()
            .is_some_and(|w| w.contains("answered in TLS: it serves TLS only")),
        "{why:?}"
    );
}

#[tokio::test]
async fn each_server_is_checked_against_the_host_it_is_reached_by() {
    let node = localhost_server().await;
    let tls = ClientTls::new(CA).expect("client tls");

    let by_name = online_at("localhost", &node, tls.clone()).await;
    assert!(by_name.lock(&args("u")).await.unwrap());

    // The same server by its IP address, which its certificate does not
    // name: refused, saying which name was expected and which it carries.
    let why = refusal_at("127.0.0.1", &node, tls.clone()).await;
    for words in [
        "certificate is for localhost, not for 127.0.0.1",
        "the host this client connects to",
        "must name that host",
    ] {
        assert!(why.contains(words), "{words:?} missing: {why}");
    }

    // An explicit name overrides the host, for every endpoint.
    let named = tls.server_name("localhost").expect("name");
    online_at("127.0.0.1", &node, named).await;
}

#[tokio::test]
#[allow(deprecated)]
async fn the_deprecated_constructor_still_expects_its_one_name() {
    let node = localhost_server().await;
    let tls = ClientTls::from_pem(CA, "localhost").expect("client tls");
    online_at("127.0.0.1", &node, tls).await;
}

#[tokio::test]
async fn a_host_that_no_certificate_can_name_is_an_invalid_argument() {
    let tls = ClientTls::new(CA).expect("client tls");
    let err = RemoteLocker::connect("bad_name!:7070", config(tls))
        .await
        .err()
        .expect("refused before connecting");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("ClientTls::server_name"), "{err}");
}

#[tokio::test]
async fn an_untrusted_server_certificate_is_refused_naming_the_ca() {
    let tls = ServerTls::from_pem(SELF_SIGNED, SELF_SIGNED_KEY).expect("server tls");
    let node = serve(tls).await;
    let client = ClientTls::new(CA).expect("client tls");
    let why = refusal_at("localhost", &node, client).await;
    assert!(
        why.contains("not signed by a CA this client trusts"),
        "{why}"
    );
}

#[tokio::test]
async fn mutual_tls_admits_clients_with_a_certificate_from_the_ca() {
    let node = mutual_server().await;
    let tls = ClientTls::new(CA)
        .and_then(|tls| tls.client_cert(CLIENT_CERT, CLIENT_KEY))
        .expect("client tls");
    let locker = online_at("localhost", &node, tls).await;
    assert!(locker.lock(&args("u")).await.unwrap());
    assert_eq!(node.locker.snapshot().len(), 1);
}

#[tokio::test]
async fn mutual_tls_refuses_a_client_without_a_certificate_and_says_so() {
    let node = mutual_server().await;
    let tls = ClientTls::new(CA).expect("client tls");
    let why = refusal_at("localhost", &node, tls).await;
    assert!(why.contains("requires a client certificate"), "{why}");
    assert!(node.locker.snapshot().is_empty());
}

#[tokio::test]
async fn mutual_tls_refuses_a_certificate_from_another_ca() {
    let node = mutual_server().await;
    let tls = ClientTls::new(CA)
        .and_then(|tls| tls.client_cert(SELF_SIGNED, SELF_SIGNED_KEY))
        .expect("client tls");
    let why = refusal_at("localhost", &node, tls).await;
    assert!(why.contains("refused this client's certificate"), "{why}");
}

#[tokio::test]
async fn connect_all_fails_when_certificates_alone_prevent_a_quorum() {
    let nodes = [
        mutual_server().await,
        mutual_server().await,
        mutual_server().await,
    ];
    let endpoints: Vec<String> = nodes
        .iter()
        .map(|n| format!("localhost:{}", n.port))
        .collect();
    let without = ClientTls::new(CA).expect("client tls");
    let err = connect_all(&endpoints, config(without))
        .await
        .err()
        .expect("no server admits this client");
    assert!(matches!(err, Error::Tls { .. }), "{err}");
    assert!(
        err.to_string().contains("requires a client certificate"),
        "{err}"
    );

    let with = ClientTls::new(CA)
        .and_then(|tls| tls.client_cert(CLIENT_CERT, CLIENT_KEY))
        .expect("client tls");
    let lockers = connect_all(&endpoints, config(with))
        .await
        .expect("connect");
    assert!(lockers.iter().all(|l| l.is_online()));
    let ds = Dsync::new(lockers).expect("dsync");
    let guard = ds
        .rw_mutex(["over-mutual-tls"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    assert!(nodes.iter().all(|n| n.locker.snapshot().len() == 1));
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn connect_all_goes_on_when_a_minority_refuses_tls() {
    // Two servers admit the client; the third has a certificate the client
    // does not trust, as after a botched rotation on one node.
    let nodes = [
        localhost_server().await,
        localhost_server().await,
        serve(ServerTls::from_pem(SELF_SIGNED, SELF_SIGNED_KEY).expect("server tls")).await,
    ];
    let endpoints: Vec<String> = nodes
        .iter()
        .map(|n| format!("localhost:{}", n.port))
        .collect();
    let tls = ClientTls::new(CA).expect("client tls");
    let lockers = connect_all(&endpoints, config(tls))
        .await
        .expect("a quorum");
    let online: Vec<bool> = lockers.iter().map(|l| l.is_online()).collect();
    assert_eq!(online, [true, true, false]);
    let ds = Dsync::new(lockers).expect("dsync");
    let guard = ds.rw_mutex(["two-of-three"]).unwrap().lock().await.unwrap();
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_tls_client_of_a_plain_server_is_told_the_server_does_not_serve_tls() {
    let server =
        LockServer::new(Arc::new(LocalLocker::new()), ServerConfig::new(TOKEN)).expect("config");
    let (bound, stop) = loopback::serve(server).await;
    let client = ClientTls::new(SELF_SIGNED).expect("client tls");
    let locker = RemoteLocker::connect(format!("127.0.0.1:{}", bound.port()), config(client))
        .await
        .expect("an offline locker, not an error");
    assert!(!locker.is_online());
    let why = locker.connect_error().map(|e| e.to_string());
    assert!(
        why.as_deref()
            .is_some_and(|w| w.contains("answered without TLS: it does not serve TLS")),
        "{why:?}"
    );
    drop(stop);
}

#[tokio::test]
async fn a_server_that_presents_its_ca_certificate_is_told_to_use_its_own() {
    const CA_KEY: &[u8] = include_bytes!("../data/tls/ca-key.pem");
    let node = serve(ServerTls::from_pem(CA, CA_KEY).expect("server tls")).await;
    let client = ClientTls::new(CA).expect("client tls");
    let why = refusal_at("localhost", &node, client).await;
    assert!(
        why.contains("presents a CA certificate as its own"),
        "{why}"
    );
    assert!(!why.contains("CaUsedAsEndEntity"), "{why}");
}
