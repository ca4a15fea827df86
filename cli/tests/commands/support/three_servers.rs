//! Three lock servers that grant at once (`--no-quarantine`, the test
//! validity of 6s) and the `quorum-lock` commands the process tests run
//! against them: `run`, `elect`, `elect --listen` and the admin commands,
//! each with the scratch folder as `$D`.

use std::time::Duration;

use super::procs::{cli, nodes, Cli, Finished, Server};
use super::Scratch;

/// How long an admin command against the cluster may take.
const ADMIN_LIMIT: Duration = Duration::from_secs(20);

/// Three servers in a scratch folder of their own.
pub struct Cluster {
    pub dir: Scratch,
    pub servers: Vec<Server>,
    /// The servers as a `--nodes` list.
    pub nodes: String,
}

/// Which command holds: `run NAME` or `elect NAME VALUE`.
#[derive(Clone, Copy)]
pub enum Holder {
    Run,
    Elect,
}

impl Cluster {
    pub fn start(test: &str) -> Cluster {
        let dir = Scratch::new(test);
        let servers: Vec<Server> = (0..3)
            .map(|_| Server::start(&dir, &["--no-quarantine"]))
            .collect();
        let nodes = nodes(&servers);
        Cluster {
            dir,
            servers,
            nodes,
        }
    }

    /// `quorum-lock COMMAND --nodes .. --token-file .. EXTRA.. WORDS.. --
    /// sh -c SCRIPT`, with `$D` set to the scratch folder and `env` added.
    fn spawn(
        &self,
        command: &str,
        extra: &[&str],
        words: &[&str],
        script: &str,
        env: &[(&str, &str)],
    ) -> Cli {
        let token = self.dir.token();
        let mut args = vec![command, "--nodes", &self.nodes, "--token-file", &token];
        args.extend(extra);
        args.extend(words);
        args.extend(["--", "sh", "-c", script]);
        let dir = self.dir.path.display().to_string();
        let mut vars = vec![("D", dir.as_str())];
        vars.extend_from_slice(env);
        Cli::spawn(&self.dir, &args, &vars)
    }

    /// `quorum-lock run` with `extra` flags, `name` and the shell script
    /// `script`. Without `--validity` the servers' 6s applies, and
    /// `--grace` at its default, which that makes 500ms.
    pub fn run(&self, extra: &[&str], name: &str, script: &str) -> Cli {
        self.spawn("run", extra, &[name], script, &[])
    }

    /// `quorum-lock elect` for `name` with `value`, running `script` with
    /// `env` added.
    pub fn elect(
        &self,
        extra: &[&str],
        name: &str,
        value: &str,
        script: &str,
        env: &[(&str, &str)],
    ) -> Cli {
        self.spawn("elect", extra, &[name, value], script, env)
    }

    /// `run job` or `elect svc VALUE` with `--grace 700ms` (the servers'
    /// validity, 6s, allows up to 750ms) and `flags`.
    pub fn hold(&self, holder: Holder, flags: &[&str], value: &str, script: &str) -> Cli {
        let mut extra = vec!["--grace", "700ms"];
        extra.extend(flags);
        match holder {
            Holder::Run => self.run(&extra, "job", script),
            Holder::Elect => self.elect(&extra, "svc", value, script, &[]),
        }
    }

    /// `quorum-lock elect --listen name`.
    pub fn listen(&self, name: &str) -> Cli {
        let token = self.dir.token();
        let args = [
            "elect",
            "--listen",
            "--nodes",
            &self.nodes,
            "--token-file",
            &token,
            name,
        ];
        Cli::spawn(&self.dir, &args, &[])
    }

    /// `quorum-lock ADMIN_COMMAND ARGS..` with the admin token, to
    /// completion.
    pub fn admin(&self, args: &[&str]) -> Finished {
        let admin = self.dir.admin();
        let mut all = vec![
            args[0],
            "--nodes",
            &self.nodes,
            "--admin-token-file",
            &admin,
        ];
        all.extend(&args[1..]);
        cli(&self.dir, &all, &[], ADMIN_LIMIT)
    }

    /// The lines of the scratch folder's file `file`.
    pub fn lines(&self, file: &str) -> Vec<String> {
        self.dir.read(file).lines().map(str::to_owned).collect()
    }
}
