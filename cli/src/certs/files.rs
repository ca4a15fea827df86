//! Writes the files of one `certs` run all or nothing. A CA certificate
//! without its key cannot sign anything and blocks the next run, and a new
//! server certificate beside its old key serves nothing, so a run that
//! fails halfway must leave the directory as it found it.
//!
//! Invariant: when [`write_all`] fails, every file it was to write is as it
//! was before (absent, or the old file with its old content and mode), and
//! none of its temporary files is left, unless putting an old file back
//! failed too, which its error then says.
//!
//! How: every new file is first written in full under a temporary name
//! (`NAME.tmp-PID`, created with its final mode, synced); with `replace`,
//! each file to be replaced gets a second name (`NAME.old-PID`, a hard
//! link, so its content stays reachable); only then do the new files take
//! their names, one after the other, and a failure there puts back what was
//! already done. Without `replace` a new file takes its name with a hard
//! link, which fails if anything (a file, a dangling link) holds the name
//! by then, so nothing is ever overwritten.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::Output;
use crate::fail::{Failure, FAILURE};

/// One output on its way: its temporary file, and the second name of the
/// file it replaces, if any. Each path is set only once this run created
/// it, so that cleaning up never removes a file of someone else's.
struct Staged<'a> {
    output: &'a Output,
    temp: PathBuf,
    saved: Option<PathBuf>,
}

/// Writes every output, or none: see the module's invariant. Without
/// `replace` no file may exist at any output's path; with it, existing
/// files are replaced.
pub fn write_all(outputs: &[Output], replace: bool) -> Result<(), Failure> {
    let mut staged: Vec<Staged<'_>> = Vec::with_capacity(outputs.len());
    for output in outputs {
        match stage(output) {
            Ok(temp) => staged.push(Staged {
                output,
                temp,
                saved: None,
            }),
            Err(failure) => return Err(abandon(&staged, failure)),
        }
    }
    if replace {
        for i in 0..staged.len() {
            match save(&staged[i].output.path) {
                Ok(saved) => staged[i].saved = saved,
                Err(failure) => return Err(abandon(&staged, failure)),
            }
        }
    }
    for placed in 0..staged.len() {
        if let Err(err) = place(&staged[placed], replace) {
            let path = &staged[placed].output.path;
            let mut failure =
                Failure::new(FAILURE, format!("cannot write {}: {err}", path.display()));
            let unrestored = undo(&mut staged[..placed]);
            if !unrestored.is_empty() {
                failure.message.push_str(&format!(
                    "; and could not put back {}",
                    unrestored.join(", ")
                ));
            }
            return Err(abandon(&staged, failure));
        }
    }
    for s in &staged {
        if let Some(saved) = &s.saved {
            let _ = fs::remove_file(saved);
        }
    }
    if let Some(dir) = outputs.first().and_then(|o| o.path.parent()) {
        // The new names on disk before we report them written.
        let _ = fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// `path` with `suffix` appended to its file name.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{suffix}-{}", std::process::id()));
    path.with_file_name(name)
}

/// Writes `output` in full under a temporary name, with its mode (0600 for
/// keys) from the start, and returns that name.
fn stage(output: &Output) -> Result<PathBuf, Failure> {
    let mode = if output.secret { 0o600 } else { 0o644 };
    let temp = beside(&output.path, "tmp");
    let failed = |e: io::Error| {
        Failure::new(
            FAILURE,
            format!("cannot write {}: {e}", output.path.display()),
        )
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temp)
        .map_err(failed)?;
    if let Err(e) = file
        .write_all(output.pem.as_bytes())
        .and_then(|()| file.sync_all())
    {
        let _ = fs::remove_file(&temp);
        return Err(failed(e));
    }
    Ok(temp)
}

/// A second name for the file at `target`, which is about to be replaced,
/// so that it can be put back; `None` when there is nothing there.
fn save(target: &Path) -> Result<Option<PathBuf>, Failure> {
    if fs::symlink_metadata(target).is_err() {
        return Ok(None);
    }
    let saved = beside(target, "old");
    fs::hard_link(target, &saved)
        .map_err(|e| Failure::new(FAILURE, format!("cannot replace {}: {e}", target.display())))?;
    Ok(Some(saved))
}

/// Gives the staged file its name: replacing what is there, or only if
/// nothing is.
fn place(staged: &Staged<'_>, replace: bool) -> io::Result<()> {
    let target = &staged.output.path;
    if replace {
        return fs::rename(&staged.temp, target);
    }
    fs::hard_link(&staged.temp, target)?;
    // The file is in place under its name; the temporary one is only a
    // second name for it now.
    let _ = fs::remove_file(&staged.temp);
    Ok(())
}

/// Puts back what `placed` changed, newest first: the old file where there
/// was one, nothing where there was none. Returns what it could not put
/// back; an old file that could not take its name again keeps its second
/// name (and is no longer this run's to remove).
fn undo(placed: &mut [Staged<'_>]) -> Vec<String> {
    let mut unrestored = Vec::new();
    for staged in placed.iter_mut().rev() {
        let target = &staged.output.path;
        match staged.saved.take() {
            Some(saved) => {
                if fs::rename(&saved, target).is_err() {
                    unrestored.push(format!(
                        "{} (its old file is kept as {})",
                        target.display(),
                        saved.display()
                    ));
                }
            }
            None => {
                if fs::remove_file(target).is_err() {
                    unrestored.push(target.display().to_string());
                }
            }
        }
    }
    unrestored
}

/// Removes this run's temporary files and second names, and says that no
/// file was changed (unless `failure` already says what could not be put
/// back).
fn abandon(staged: &[Staged<'_>], mut failure: Failure) -> Failure {
    for s in staged {
        let _ = fs::remove_file(&s.temp);
        if let Some(saved) = &s.saved {
            let _ = fs::remove_file(saved);
        }
    }
    if !failure.message.contains("could not put back") {
        failure
            .message
            .push_str("; no file was written or replaced");
    }
    failure
}
