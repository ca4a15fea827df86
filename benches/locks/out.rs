//! The skeleton every run of `locks` prints and saves through: the banner,
//! the text table (columns declared once, header and rows drawn from the
//! same list), the Markdown grid, the JSON document and its objects, and
//! the facts about the machine that make a result comparable with another.
//!
//! Each backend and scenario names its own columns and fields; the shapes
//! (widths, separators, the order of the head of the JSON) live here once,
//! so that the reports cannot drift apart.

use std::fmt::{Display, Write as _};
use std::time::Duration;

use crate::cli::{Flavor, Options};
use crate::counting::CallCounts;
use crate::redis_base::BaselineKey;
use crate::scenario::Names;
use crate::stats::{fmt_duration, Summary};

/// `println!` that ignores a closed stdout (`| head`) instead of panicking;
/// the run still finishes, stops its servers and writes its JSON.
pub fn say(text: impl Display) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

/// A duration as the text table shows it, for prose: "12.3 µs", "4.56 ms".
pub fn human(d: Duration) -> String {
    let text = fmt_duration(d);
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (value, unit) = text.split_at(split);
    format!("{value} {}", if unit == "us" { "µs" } else { unit })
}

pub fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

/// The runtime's kind and its worker count, as the banners print them.
pub fn runtime(opts: &Options) -> (&'static str, usize) {
    match opts.flavor {
        Flavor::Multi => ("multi-thread", opts.threads),
        Flavor::Current => ("current-thread", 1),
    }
}

/// The first two lines of every banner: what runs, when, on which commit
/// and machine.
pub fn banner(title: &str, m: &Machine) -> String {
    format!(
        "{title}, {}, commit {}\n\
         machine: {} CPUs, {}, {} memory, kernel {}, load average {}\n",
        m.started, m.commit, m.cpus, m.cpu_model, m.mem_total, m.kernel, m.loadavg
    )
}

/// The settings every load run's banner starts its third line with.
pub fn settings(opts: &Options) -> String {
    let (runtime, threads) = runtime(opts);
    format!(
        "settings: {:.1}s measured + {:.1}s warm-up per run, at most {} locks, {runtime} runtime with {threads} threads",
        opts.seconds, opts.warmup, opts.max_locks
    )
}

/// A run of planned measurements printed as a table: the skeleton of the
/// lock runs, `--backend redis`, `--backend compare` and the SQL backends.
pub struct Plan<'a, R> {
    pub title: &'a str,
    /// What the run adds to the load settings of its banner: the rest of
    /// the settings line, and lines of its own, each ending in a newline.
    pub setup: String,
    /// Seconds a measurement takes beyond its window, for the estimate.
    pub each: f64,
    pub columns: Vec<Col<R>>,
}

impl<R> Plan<'_, R> {
    /// Prints the banner (with how many runs there are and about how long
    /// they take) and the table's header, then measures each planned row in
    /// turn with `measure` (given its index and the rows measured before
    /// it, for its ratios), printing each as it comes: its columns, then
    /// what `notes` says of it.
    pub fn run<P>(
        self,
        opts: &Options,
        machine: &Machine,
        planned: &[P],
        mut measure: impl FnMut(usize, &P, &[R]) -> Result<R, String>,
        notes: impl Fn(&R) -> String,
    ) -> Result<Vec<R>, String> {
        say(format!(
            "{}{}{}{} runs, about {:.0}s\n",
            banner(self.title, machine),
            settings(opts),
            self.setup,
            planned.len(),
            planned.len() as f64 * (opts.seconds + opts.warmup + self.each),
        ));
        say(header(&self.columns));
        let mut rows = Vec::with_capacity(planned.len());
        for (run, p) in planned.iter().enumerate() {
            let row = measure(run, p, &rows)?;
            say(line(&self.columns, &row) + &notes(&row));
            rows.push(row);
        }
        Ok(rows)
    }
}

/// The figures every table with a CPU column prints: both processes'
/// CPU time per lock, or "-" with no lock.
pub fn cpu_per_lock(s: &Summary) -> String {
    let cpu = s.cpu + s.server_cpu.unwrap_or(0.0);
    if s.lsps > 0.0 {
        fmt_duration(Duration::from_secs_f64(cpu / s.lsps))
    } else {
        "-".into()
    }
}

/// The notes after a row: waits the end cut off, the count bound.
pub fn notes(s: &Summary) -> String {
    let mut out = String::new();
    if s.longest_wait > s.max {
        let _ = write!(out, "  ({} waits cut off by the end)", s.unfinished);
    }
    if s.hit_count_bound {
        out.push_str("  (stopped by --max-locks)");
    }
    out
}

/// What the targets say of one shared name: how the clients were served.
pub fn shared_figures(s: &Summary) -> String {
    format!(
        "min {} locks/client, {} waits still open when the window closed (counted in the longest wait), jain {:.3}, longest wait {}",
        s.min_client,
        s.unfinished,
        s.jain,
        fmt_duration(s.longest_wait)
    )
}

/// The goals of one shared name, judged: every client served, Jain's
/// index at least 0.95, no wait longer than `limit` (the figures after).
pub fn shared_goals(s: &Summary, limit: Duration) -> String {
    format!(
        "every client served: {}; jain >= 0.95: {}; longest wait <= {}: {}  ({})",
        verdict(s.min_client > 0),
        verdict(s.jain >= 0.95),
        fmt_duration(limit),
        verdict(s.longest_wait <= limit),
        shared_figures(s)
    )
}

/// "{x:.2}" or "-".
pub fn per(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{x:.2}"))
}

/// A ratio of locks/s as "{x:.2}x", or "-" without a positive base.
pub fn times(lsps: f64, base: Option<f64>) -> String {
    match base {
        Some(b) if b > 0.0 => format!("{:.2}x", lsps / b),
        _ => "-".into(),
    }
}

/// One column of a text table: its title, its width, whether it is
/// aligned left, and how a row fills it.
pub struct Col<R> {
    title: &'static str,
    width: usize,
    left: bool,
    cell: Box<dyn Fn(&R) -> String>,
}

pub fn left<R>(title: &'static str, width: usize, cell: impl Fn(&R) -> String + 'static) -> Col<R> {
    Col {
        title,
        width,
        left: true,
        cell: Box::new(cell),
    }
}

pub fn right<R>(
    title: &'static str,
    width: usize,
    cell: impl Fn(&R) -> String + 'static,
) -> Col<R> {
    Col {
        title,
        width,
        left: false,
        cell: Box::new(cell),
    }
}

/// A row of a table of load runs: the clients, names and hold it was
/// measured with, and its figures. The columns, the JSON fields and the
/// look-ups every table shares reach a row through it.
pub trait Measured: 'static {
    fn key(&self) -> BaselineKey;
    fn summary(&self) -> &Summary;

    /// This row's locks/s over `base`, or none without a positive base.
    fn ratio(&self, base: Option<f64>) -> Option<f64> {
        base.filter(|b| *b > 0.0).map(|b| self.summary().lsps / b)
    }
}

/// The row measured with `key` that `is` picks, in the order measured:
/// what a ratio or a target is taken against.
pub fn pick<R: Measured>(rows: &[R], key: BaselineKey, is: impl Fn(&R) -> bool) -> Option<&R> {
    rows.iter().find(|r| r.key() == key && is(r))
}

/// [`Measured`] for a row whose `key` and `summary` fields are its load
/// and its figures.
macro_rules! measured_fields {
    ($row:ty) => {
        impl crate::out::Measured for $row {
            fn key(&self) -> crate::redis_base::BaselineKey {
                self.key
            }

            fn summary(&self) -> &crate::stats::Summary {
                &self.summary
            }
        }
    };
}
pub(crate) use measured_fields;

/// The columns that say which load a row measured; only the width of the
/// hold differs from table to table.
pub fn key_cols<R: Measured>(hold_width: usize) -> [Col<R>; 3] {
    [
        right("clients", 7, |r: &R| r.key().clients.to_string()),
        left("names", 6, |r: &R| r.key().names.label().to_owned()),
        right("hold", hold_width, |r: &R| r.key().hold.label()),
    ]
}

/// The summary columns of `titles`, in that order (see [`stat`]).
pub fn stats<R: Measured>(titles: &[&'static str]) -> Vec<Col<R>> {
    titles.iter().map(|&title| stat(title)).collect()
}

/// The columns of a summary the tables share, by title: each table picks
/// the ones it prints, in its own order.
pub fn stat<R: Measured>(title: &'static str) -> Col<R> {
    let (width, cell): (usize, fn(&Summary) -> String) = match title {
        "locks/s" => (8, |s| crate::stats::fmt_rate(s.lsps)),
        "mean" => (7, |s| fmt_duration(s.mean)),
        "p50" => (7, |s| fmt_duration(s.p50)),
        "p70" => (7, |s| fmt_duration(s.p70)),
        "p90" => (7, |s| fmt_duration(s.p90)),
        "p99" => (7, |s| fmt_duration(s.p99)),
        "max" => (7, |s| fmt_duration(s.max)),
        "longest" => (7, |s| fmt_duration(s.longest_wait)),
        // This process and the servers together, 100% = one core.
        "cpu" => (5, |s| {
            format!("{:.0}%", (s.cpu + s.server_cpu.unwrap_or(0.0)) * 100.0)
        }),
        "cpu/lk" => (7, cpu_per_lock),
        "rpc/lk" => (6, |s| per(s.calls_per_lock)),
        "min/cl" => (7, |s| s.min_client.to_string()),
        "max/cl" => (7, |s| s.max_client.to_string()),
        "jain" => (5, |s| format!("{:.3}", s.jain)),
        other => unreachable!("no summary column {other}"),
    };
    right(title, width, move |r: &R| cell(r.summary()))
}

/// Each column's text padded to its width, separated by one space.
fn padded<R>(cols: &[Col<R>], text: impl Fn(&Col<R>) -> String) -> String {
    let mut out = String::new();
    for c in cols {
        if !out.is_empty() {
            out.push(' ');
        }
        let (text, width) = (text(c), c.width);
        let _ = if c.left {
            write!(out, "{text:<width$}")
        } else {
            write!(out, "{text:>width$}")
        };
    }
    out
}

pub fn header<R>(cols: &[Col<R>]) -> String {
    padded(cols, |c| c.title.to_owned())
}

pub fn line<R>(cols: &[Col<R>], row: &R) -> String {
    padded(cols, |c| (c.cell)(row))
}

/// A Markdown table with one column per client count of the run and one
/// line per system and naming (and hold, when there are several), the
/// systems in the order they were measured. `head` names the leading
/// columns (`"system | nodes | names"`); `lead` fills them for a row, given
/// the naming's text.
pub fn grid<R, S: PartialEq + Copy>(
    opts: &Options,
    rows: &[R],
    head: &str,
    at: impl Fn(&R) -> (S, BaselineKey),
    lead: impl Fn(&R, &str) -> String,
    cell: impl Fn(&R) -> String,
) -> String {
    let clients: Vec<String> = opts
        .clients
        .iter()
        .map(|&c| format!("{c} client{}", if c == 1 { "" } else { "s" }))
        .collect();
    let mut out = format!("| {head} | {} |\n", clients.join(" | "));
    let _ = writeln!(
        out,
        "|{}{}",
        "---|".repeat(head.split('|').count()),
        "---|".repeat(clients.len())
    );
    for &hold in &opts.holds {
        for &names in &opts.names {
            let mut seen: Vec<S> = Vec::new();
            for row in rows.iter().filter(|r| {
                let k = at(r).1;
                k.names == names && k.hold == hold
            }) {
                let system = at(row).0;
                if seen.contains(&system) {
                    continue;
                }
                seen.push(system);
                let cells: Vec<String> = opts
                    .clients
                    .iter()
                    .map(|&c| {
                        rows.iter()
                            .find(|r| {
                                at(r)
                                    == (
                                        system,
                                        BaselineKey {
                                            clients: c,
                                            names,
                                            hold,
                                        },
                                    )
                            })
                            .map_or("—".into(), &cell)
                    })
                    .collect();
                let naming = match names {
                    Names::Own => "own",
                    Names::Shared => "one shared",
                };
                let hold_note = if opts.holds.len() > 1 {
                    format!(", hold {}", hold.label())
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "| {} | {} |",
                    lead(row, &format!("{naming}{hold_note}")),
                    cells.join(" | ")
                );
            }
        }
    }
    out
}

/// A JSON object written field by field, in the order given:
/// `{"a": 1, "b": "x"}`.
#[derive(Default)]
pub struct Obj(String);

impl Obj {
    pub fn new() -> Obj {
        Obj::default()
    }

    /// A value already in JSON (a number, `true`, an object).
    pub fn raw(self, key: &str, value: impl Display) -> Obj {
        self.push(format_args!("\"{key}\""), value)
    }

    /// A field whose key is data (a command's name, a statement's text),
    /// escaped.
    pub fn entry(self, key: &str, value: impl Display) -> Obj {
        self.push(string(key), value)
    }

    fn push(mut self, key: impl Display, value: impl Display) -> Obj {
        if !self.0.is_empty() {
            self.0.push_str(", ");
        }
        let _ = write!(self.0, "{key}: {value}");
        self
    }

    pub fn str(self, key: &str, value: &str) -> Obj {
        self.raw(key, string(value))
    }

    pub fn num(self, key: &str, value: f64) -> Obj {
        self.raw(key, number(value))
    }

    /// `value` as it is, or `null` without one.
    pub fn maybe(self, key: &str, value: Option<impl Display>) -> Obj {
        match value {
            Some(value) => self.raw(key, value),
            None => self.raw(key, "null"),
        }
    }

    pub fn opt(self, key: &str, value: Option<f64>) -> Obj {
        self.maybe(key, value.map(number))
    }

    pub fn ns(self, key: &str, value: Duration) -> Obj {
        self.raw(key, value.as_nanos())
    }

    pub fn opt_ns(self, key: &str, value: Option<Duration>) -> Obj {
        self.maybe(key, value.map(|d| d.as_nanos()))
    }

    /// The clients, names and hold of a row.
    pub fn key(self, key: BaselineKey) -> Obj {
        self.raw("clients", key.clients)
            .str("names", key.names.label())
            .str("hold", &key.hold.label())
    }

    /// The figures of a load run every JSON result carries, from `locks`
    /// to `server_cpu_cores`; `p70` only where the table has it.
    pub fn summary(self, s: &Summary, p70: bool) -> Obj {
        let o = self
            .raw("locks", s.locks)
            .num("seconds", s.seconds)
            .num("lsps", s.lsps)
            .ns("mean_ns", s.mean)
            .ns("p50_ns", s.p50);
        let o = if p70 { o.ns("p70_ns", s.p70) } else { o };
        o.ns("p90_ns", s.p90)
            .ns("p99_ns", s.p99)
            .ns("max_ns", s.max)
            .ns("longest_wait_ns", s.longest_wait)
            .raw("unfinished_clients", s.unfinished)
            .raw("min_locks_per_client", s.min_client)
            .raw("max_locks_per_client", s.max_client)
            .num("jain", s.jain)
            .num("cpu_cores", s.cpu)
            .opt("server_cpu_cores", s.server_cpu)
    }

    /// The load settings most runs record, in this order.
    pub fn load(self, opts: &Options) -> Obj {
        self.num("seconds", opts.seconds)
            .num("warmup", opts.warmup)
            .raw("max_locks", opts.max_locks)
            .raw("threads", opts.threads)
            .raw("count_rpcs", opts.count_rpcs)
    }

    pub fn done(self) -> String {
        format!("{{{}}}", self.0)
    }
}

impl Display for Obj {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{{}}}", self.0)
    }
}

/// Calls by kind as a JSON object, for [`Obj::maybe`].
pub fn calls(c: Option<CallCounts>) -> Option<Obj> {
    c.map(|c| (c.kinds().into_iter()).fold(Obj::new(), |o, (kind, n)| o.raw(kind, n)))
}

/// A run's JSON file: the head every report shares (date, commit,
/// arguments, machine), then the report's own top-level fields in order.
pub struct Doc(String);

impl Doc {
    /// `machine` adds fields to the machine object after the load averages.
    pub fn new(opts: &Options, m: &Machine, load_end: &str, machine: Obj) -> Doc {
        let mut o = String::from("{\n");
        let _ = writeln!(o, "  \"date\": {},", string(&m.started));
        let _ = writeln!(o, "  \"commit\": {},", string(&m.commit));
        let args: Vec<String> = opts.args.iter().map(|a| string(a)).collect();
        let _ = writeln!(o, "  \"args\": [{}],", args.join(", "));
        let mut head = Obj::new()
            .raw("cpus", m.cpus)
            .str("cpu_model", &m.cpu_model)
            .str("mem_total", &m.mem_total)
            .str("kernel", &m.kernel)
            .str("loadavg_start", &m.loadavg)
            .str("loadavg_end", load_end);
        if !machine.0.is_empty() {
            head.0.push_str(", ");
            head.0.push_str(&machine.0);
        }
        let _ = writeln!(o, "  \"machine\": {head},");
        Doc(o)
    }

    /// The head with the load average read now.
    pub fn now(opts: &Options, m: &Machine) -> Doc {
        Doc::new(opts, m, &loadavg(), Obj::new())
    }

    pub fn field(mut self, key: &str, value: impl Display) -> Doc {
        let _ = writeln!(self.0, "  \"{key}\": {value},");
        self
    }

    /// Ends the document with its list of results.
    pub fn results(self, items: impl IntoIterator<Item = String>) -> String {
        let mut o = self.0;
        o.push_str("  \"results\": [");
        for (i, item) in items.into_iter().enumerate() {
            o.push_str(if i == 0 { "\n    " } else { ",\n    " });
            o.push_str(&item);
        }
        o.push_str("\n  ]\n}\n");
        o
    }

    /// Ends the document with one last field instead of a list.
    pub fn last(self, key: &str, value: impl Display) -> String {
        format!("{}  \"{key}\": {value}\n}}\n", self.0)
    }
}

/// Writes the JSON of a run where `--json` asked for it, and says so.
pub fn save(opts: &Options, text: impl FnOnce() -> String) -> Result<(), String> {
    if let Some(path) = &opts.json {
        std::fs::write(path, text())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        say(format!("wrote {}", path.display()));
    }
    Ok(())
}

/// The machine as a run found it when it started, and the code it ran.
pub struct Machine {
    /// When the run started, as [`utc_now`] gives it.
    pub started: String,
    /// The commit of the code measured, with `+dirty` for local changes.
    pub commit: String,
    pub cpus: usize,
    pub cpu_model: String,
    pub mem_total: String,
    pub kernel: String,
    pub loadavg: String,
}

impl Machine {
    pub fn read() -> Machine {
        let file = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let field = |text: &str, key: &str| {
            text.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
                .unwrap_or_else(|| "unknown".into())
        };
        Machine {
            started: utc_now(),
            commit: commit(),
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model: field(&file("/proc/cpuinfo"), "model name"),
            mem_total: field(&file("/proc/meminfo"), "MemTotal"),
            kernel: file("/proc/sys/kernel/osrelease").trim().to_owned(),
            loadavg: loadavg(),
        }
    }
}

fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let Some(head) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "unknown".into();
    };
    match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(changes) if !changes.is_empty() => format!("{head}+dirty"),
        _ => head,
    }
}

/// The 1, 5 and 15 minute load averages: how busy the machine was with
/// work other than ours.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

pub fn number(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.6}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned()
    } else {
        "null".into()
    }
}

pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
