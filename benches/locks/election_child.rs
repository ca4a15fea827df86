//! The failover half of `--scenario election`: a candidate in a child
//! process of its own (this binary, `--election-child`) leads and is
//! killed with SIGKILL, and the candidates of this process wait behind it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use quorum_lock::Dsync;
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout, Instant};

use crate::context::Context;
use crate::etcd_election;

use crate::election::*;

/// One failover sample.
#[derive(Clone, Copy)]
pub struct Sample {
    /// Kill → the next campaign returned.
    pub failover: Duration,
    /// The next campaign returned − (the child said it leads + validity):
    /// how long after its lease ran out the next leader got in.
    pub past_lease: f64,
}

pub struct Failover {
    pub validity: Duration,
    pub samples: Vec<Sample>,
    pub note: Option<String>,
}

/// A child process of ours, killed by its PID when dropped.
pub(crate) struct ChildCandidate(Child);

impl Drop for ChildCandidate {
    fn drop(&mut self) {
        // Our own child, not yet reaped: its PID is still its own.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts this binary as a candidate that campaigns and then waits to be
/// killed. Call it from the thread that runs the measurement (the one in
/// `block_on`): the child dies with that thread (`PR_SET_PDEATHSIG`).
pub(crate) fn spawn_child(
    system: &str,
    validity: Duration,
    target: &str,
) -> Result<ChildCandidate, String> {
    let exe = std::env::current_exe().context("cannot find this program")?;
    let mut command = Command::new(exe);
    command
        .args(["--election-child", system])
        .arg(validity.as_millis().to_string())
        .arg(target)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    crate::servers::dies_with_parent(&mut command)
        .spawn()
        .map(ChildCandidate)
        .context("cannot start a child candidate")
}

/// Waits until the child says it leads.
pub(crate) async fn child_leads(child: &mut ChildCandidate, limit: Duration) -> Result<(), String> {
    let stdout = child.0.stdout.take().ok_or("the child has no stdout")?;
    let read = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    });
    match timeout(limit, read).await {
        Ok(Ok(Ok(line))) if line.starts_with("leading ") => Ok(()),
        Ok(Ok(Ok(line))) => Err(format!("the child candidate said {line:?}")),
        Ok(Ok(Err(e))) => Err(format!("cannot read the child candidate: {e}")),
        Ok(Err(e)) => Err(format!("cannot read the child candidate: {e}")),
        Err(_) => {
            // Killing it ends the read.
            let _ = child.0.kill();
            Err(format!("the child candidate did not lead within {limit:?}"))
        }
    }
}

/// Failover samples: a child leads and is killed, `candidates` wait behind.
pub(crate) async fn failover<C: Contender, W: Watch>(
    mut candidates: Vec<C>,
    watchers: Vec<W>,
    start_child: impl Fn() -> Result<ChildCandidate, String>,
    validity: Duration,
    samples: usize,
    budget: Duration,
) -> Result<(Failover, Vec<C>), String> {
    let started = Instant::now();
    // The observers run meanwhile, as in the hand-off run; nothing of theirs
    // is measured here.
    let (run, observers) = Run::start(watchers, 0, 0, started);
    let mut out = Failover {
        validity,
        samples: Vec::new(),
        note: None,
    };
    let each = validity + Duration::from_secs(1);
    let result = async {
        for k in 0..samples {
            if k > 0 && started.elapsed() + each > budget {
                out.note = Some(format!(
                    "{k} samples within --failover-seconds {}",
                    budget.as_secs()
                ));
                break;
            }
            let mut child = start_child()?;
            child_leads(&mut child, Duration::from_secs(20)).await?;
            let leads = Instant::now();
            let (tx, mut first) = tokio::sync::mpsc::unbounded_channel();
            let tasks: Vec<JoinHandle<Result<C, String>>> = candidates
                .drain(..)
                .enumerate()
                .map(|(c, mut cand)| {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let lead = cand.campaign(format!("f{k}-c{c}")).await?;
                        let _ = tx.send(Instant::now());
                        cand.resign(lead).await?;
                        Ok(cand)
                    })
                })
                .collect();
            sleep(SETTLE).await;
            let killed = Instant::now();
            child.0.kill().context("cannot kill the child candidate")?;
            let won = timeout(validity + Duration::from_secs(10), first.recv())
                .await
                .map_err(|_| {
                    format!(
                        "no new leader within {:?} of the kill",
                        validity + Duration::from_secs(10)
                    )
                })?
                .ok_or("every candidate failed")?;
            drop(child);
            out.samples.push(Sample {
                failover: won.saturating_duration_since(killed),
                past_lease: won.saturating_duration_since(leads).as_secs_f64()
                    - validity.as_secs_f64(),
            });
            // Every candidate leads once in turn and resigns: the election
            // is free for the next child.
            for task in tasks {
                match timeout(Duration::from_secs(30), task).await {
                    Ok(Ok(Ok(cand))) => candidates.push(cand),
                    Ok(Ok(Err(err))) => return Err(err),
                    Ok(Err(err)) => return Err(format!("a candidate failed: {err}")),
                    Err(_) => return Err("a candidate did not lead within 30 s".into()),
                }
            }
        }
        Ok(())
    }
    .await;
    run.stop.send_replace(true);
    for task in observers {
        let _ = timeout(Duration::from_secs(5), task).await;
    }
    result.map(|()| (out, candidates))
}

/// `--election-child SYSTEM VALIDITY_MS TARGET`: campaign, say "leading",
/// wait to be killed (or give up after a bound and exit). Returns the exit
/// code.
pub fn child(args: &[String]) -> i32 {
    let failed = |err| {
        eprintln!("locks --election-child: {err}");
        1
    };
    child_run(args).map_or_else(failed, |()| 0)
}

fn child_run(args: &[String]) -> Result<(), String> {
    let [system, validity, target] = args else {
        return Err("expected SYSTEM VALIDITY_MS TARGET".into());
    };
    let validity = validity
        .parse::<u64>()
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
        .ok_or("VALIDITY_MS: expected a positive whole number")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start a tokio runtime")?;
    rt.block_on(async {
        let value = format!("dead-{}", std::process::id());
        let announce = || {
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            writeln!(out, "leading {value}")
                .and_then(|()| out.flush())
                .context("cannot say it leads")
        };
        // Held until the process is killed.
        let _held: Box<dyn std::any::Any + Send> = match system.as_str() {
            "ours" => {
                let addrs: Vec<String> = target.split(',').map(str::to_owned).collect();
                let lockers = crate::servers::connect_all(&addrs).await?;
                let ds = Dsync::builder(lockers)
                    .lease(lease(validity))
                    .owner(format!("bench-child-{}", std::process::id()))
                    .build()
                    .context("cannot build a Dsync")?;
                let election = ds.election(NAME).map_err(|e| e.to_string())?;
                let lead = election
                    .campaign(value.clone().into_bytes())
                    .await
                    .context("campaign failed")?;
                announce()?;
                Box::new((lead, ds))
            }
            "etcd" => {
                let mut cand = etcd_election::Candidate::new(target, validity).await?;
                let lead = cand.campaign_value(&value).await?;
                announce()?;
                Box::new((lead, cand))
            }
            other => return Err(format!("unknown system {other:?}")),
        };
        // Bounded: the parent kills it long before this.
        sleep(validity * 3 + Duration::from_secs(30)).await;
        Err("never killed; giving up".to_owned())
    })
}
