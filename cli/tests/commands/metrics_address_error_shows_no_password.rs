//! A node URL may land in `server --metrics` by mistake, as in `--listen`.
//! docs/cli.md: "Passwords never appear in the tool's output, errors or
//! logs ... That holds for usage errors too: a URL given without its flag,
//! or after a mistyped one, is quoted without its password."

use std::time::Duration;

use crate::support::{cli, Scratch};

#[test]
fn server_refuses_a_url_as_its_metrics_address_without_showing_its_password() {
    let dir = Scratch::new("metrics-url-errors");
    let token = dir.token();
    for (url, secret) in [
        ("redis://:MetricsSecret1@127.0.0.1:6379", "MetricsSecret1"),
        (
            "postgres://locks:MetricsSecret2@db:5432/app",
            "MetricsSecret2",
        ),
        ("locks:MetricsSecret3@127.0.0.1:9464", "MetricsSecret3"),
    ] {
        let run = cli(
            &dir,
            &[
                "server",
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                &token,
                "--metrics",
                url,
            ],
            &[],
            Duration::from_secs(20),
        );
        assert_eq!(run.code, Some(2), "{url}: {run:?}");
        assert!(
            !run.stderr.contains(secret) && !run.stdout.contains(secret),
            "--metrics {url}: the password shows: {:?}",
            run.stderr
        );
    }
}
