//! Atomic output commit.
//!
//! A job writes into a staging directory beside its output,
//! `PARENT/.NAME.sluice-JOBID` (JOBID = `PID-NANOS`). Each task attempt
//! writes `STAGE/_temporary/ATTEMPT.FILE` (a `/` in `FILE` written `%`: no
//! directory a task, whose creation and removal cost more than the task's
//! own file on a small job); committing the task hard-links that file to
//! `STAGE/FILE`, which fails if a file is already there, so the
//! first attempt to commit wins and a second never overwrites it. Committing
//! the job removes `_temporary`, writes `_SUCCESS`, and renames the staging
//! directory to the output path in one `rename(2)`. Until then nothing
//! exists at the output path; a failed job removes its staging directory,
//! and one killed outright leaves only the hidden staging directory, which
//! the next job for the same output removes once its PID is gone.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::EngineError;

/// The staging directory of one job and its commit protocol.
#[derive(Debug)]
pub struct Committer {
    output: PathBuf,
    stage: PathBuf,
    overwrite: bool,
    done: bool,
}

type Result<T> = std::result::Result<T, EngineError>;

fn io<T>(r: std::io::Result<T>, op: &'static str, path: &Path) -> Result<T> {
    r.map_err(|e| EngineError::io(op, path, e))
}

impl Committer {
    /// Refuses an existing output unless `overwrite`, clears stale staging
    /// directories of dead jobs, and creates this job's.
    pub fn create(output: &Path, overwrite: bool) -> Result<Self> {
        if output.exists() && !overwrite {
            return Err(EngineError::OutputExists(output.to_owned()));
        }
        let name = output
            .file_name()
            .ok_or_else(|| {
                EngineError::Config(format!("output path {} has no name", output.display()))
            })?
            .to_string_lossy()
            .into_owned();
        let parent = match output.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        io(std::fs::create_dir_all(&parent), "creating", &parent)?;
        remove_stale(&parent, &name);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let stage = parent.join(format!(".{name}.sluice-{}-{nanos}", std::process::id()));
        io(
            std::fs::create_dir_all(stage.join("_temporary")),
            "creating",
            &stage,
        )?;
        Ok(Committer {
            output: output.to_owned(),
            stage,
            overwrite,
            done: false,
        })
    }

    /// The staging directory.
    pub fn stage(&self) -> &Path {
        &self.stage
    }

    /// The path an attempt of the task producing `file` (e.g.
    /// `part-r-00003`, or `_bad_records/part-m-00000`) writes to.
    pub fn attempt_path(&self, file: &str, attempt: u32) -> Result<PathBuf> {
        let name = format!("{attempt}.{}", file.replace('/', "%"));
        Ok(self.stage.join("_temporary").join(name))
    }

    /// Commits an attempt's file as `file` in the staging directory. Returns
    /// `false` (and discards the attempt) if another attempt committed first.
    pub fn commit_task(&self, file: &str, attempt: u32) -> Result<bool> {
        let from = self.attempt_path(file, attempt)?;
        let to = self.stage.join(file);
        if let Some(dir) = to.parent() {
            io(std::fs::create_dir_all(dir), "creating", dir)?;
        }
        let won = match std::fs::hard_link(&from, &to) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(EngineError::io("committing", &to, e)),
        };
        io(std::fs::remove_file(&from), "removing", &from)?;
        Ok(won)
    }

    /// Makes the staged output visible at the output path, with `_SUCCESS`.
    pub fn commit_job(mut self) -> Result<()> {
        let tmp = self.stage.join("_temporary");
        io(std::fs::remove_dir_all(&tmp), "removing", &tmp)?;
        let success = self.stage.join("_SUCCESS");
        io(std::fs::write(&success, b""), "writing", &success)?;
        // Beside the staging directory, named after it: unique per job.
        let mut old_name = self.stage.file_name().unwrap_or_default().to_owned();
        old_name.push(".old");
        let old = self.stage.with_file_name(old_name);
        let replaced = self.overwrite && self.output.exists();
        if replaced {
            io(
                std::fs::rename(&self.output, &old),
                "moving aside",
                &self.output,
            )?;
        } else if self.output.exists() {
            return Err(EngineError::OutputExists(self.output.clone()));
        }
        io(
            std::fs::rename(&self.stage, &self.output),
            "committing",
            &self.output,
        )?;
        self.done = true;
        if replaced {
            io(remove_path(&old), "removing", &old)?;
        }
        Ok(())
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.stage);
        }
    }
}

fn remove_path(p: &Path) -> std::io::Result<()> {
    if p.is_dir() {
        std::fs::remove_dir_all(p)
    } else {
        std::fs::remove_file(p)
    }
}

/// Removes `.NAME.sluice-PID-*` directories whose PID is no longer running.
fn remove_stale(parent: &Path, name: &str) {
    let prefix = format!(".{name}.sluice-");
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for ent in rd.flatten() {
        let file = ent.file_name().to_string_lossy().into_owned();
        let Some(rest) = file.strip_prefix(&prefix) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if !pid.is_empty() && !Path::new("/proc").join(pid).exists() {
            let _ = remove_path(&ent.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_attempt_wins_and_job_commit_is_all_or_nothing() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        let c = Committer::create(&out, false).unwrap();
        std::fs::write(c.attempt_path("part-r-00000", 0).unwrap(), b"first").unwrap();
        std::fs::write(c.attempt_path("part-r-00000", 1).unwrap(), b"second").unwrap();
        assert!(c.commit_task("part-r-00000", 0).unwrap());
        assert!(!c.commit_task("part-r-00000", 1).unwrap());
        assert!(!out.exists(), "nothing is visible before the job commits");
        c.commit_job().unwrap();
        assert_eq!(std::fs::read(out.join("part-r-00000")).unwrap(), b"first");
        assert!(out.join("_SUCCESS").exists());
        assert!(!out.join("_temporary").exists());
        let err = Committer::create(&out, false).unwrap_err().to_string();
        assert!(
            err.contains("already exists") && err.contains("--overwrite"),
            "{err}"
        );
    }

    #[test]
    fn overwriting_again_and_again_leaves_only_the_newest_output() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        for round in 0..3u8 {
            let c = Committer::create(&out, true).unwrap();
            std::fs::write(c.attempt_path("part-r-00000", 0).unwrap(), [round]).unwrap();
            c.commit_task("part-r-00000", 0).unwrap();
            c.commit_job().unwrap();
        }
        assert_eq!(std::fs::read(out.join("part-r-00000")).unwrap(), [2]);
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            1,
            "no staging or old output left"
        );
    }

    #[test]
    fn an_abandoned_job_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        {
            let c = Committer::create(&out, false).unwrap();
            std::fs::write(c.attempt_path("part-r-00000", 0).unwrap(), b"x").unwrap();
            c.commit_task("part-r-00000", 0).unwrap();
        }
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn stale_staging_of_a_dead_process_is_removed() {
        let d = tempfile::tempdir().unwrap();
        let stale = d.path().join(".out.sluice-999999999-1");
        std::fs::create_dir_all(&stale).unwrap();
        let c = Committer::create(&d.path().join("out"), false).unwrap();
        assert!(!stale.exists());
        drop(c);
    }
}
