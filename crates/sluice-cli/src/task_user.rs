//! `sluice worker --task-user USER`: who runs the user code of the tasks
//! a worker runs (Streaming and Python commands).
//!
//! A worker started as root with `--task-user` runs every command as that
//! unprivileged user (`sluice_jobs::cell`), with a umask of 077 for its
//! own files, and refuses to start when a file it keeps secret (the
//! cluster secret, its TLS key) is readable by others than its owner. A
//! worker not root cannot change users and refuses `--task-user`; a
//! worker root without it warns that user code runs as root.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::bail;
use sluice_jobs::cell::{self, TaskUsers};

/// Confines the commands this worker starts to `user`, if given, after
/// checking that the `secret` files (those that exist) are the owner's
/// alone.
pub(crate) fn confine(user: Option<&str>, secret: &[PathBuf]) -> anyhow::Result<()> {
    let root = rustix::process::geteuid().is_root();
    let Some(name) = user else {
        if root {
            tracing::warn!(
                "this worker runs as root without --task-user: Streaming and Python commands \
                 (user code) run as root and can read everything on this host"
            );
        }
        return Ok(());
    };
    let users = check(name)?;
    for f in secret {
        private(f)?;
    }
    // The worker's own files from now on: its owner's alone.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    let temp = std::env::temp_dir();
    for gone in sweep_stale(&temp) {
        tracing::info!("removed {}, left by a worker that ended", gone.display());
    }
    let base = temp.join(format!("{BASE_PREFIX}{}", std::process::id()));
    cell::confine(users.clone(), &base)?;
    for u in users.locals() {
        tracing::info!("local user {}: uid {}, gid {}", u.name, u.uid, u.gid);
    }
    tracing::info!(
        "Streaming and Python commands run as {users} (job's user=local user) in {}",
        base.display()
    );
    Ok(())
}

/// The name of a worker's base directory of commands' directories, before
/// its process id.
const BASE_PREFIX: &str = "sluice-tasks-";

/// Removes the base directories under `temp` of workers that ended
/// without removing theirs (killed with SIGKILL, or the host's power
/// lost), and returns them: a directory `sluice-tasks-PID` of this
/// process's user whose process no longer exists. A symbolic link, or a
/// directory of another user or of a running process, is left alone.
fn sweep_stale(temp: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let Ok(entries) = std::fs::read_dir(temp) else {
        return Vec::new();
    };
    let mut gone = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(BASE_PREFIX))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let path = e.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me);
        if ours && !alive(pid) && std::fs::remove_dir_all(&path).is_ok() {
            gone.push(path);
        }
    }
    gone
}

/// Whether process `pid` exists (a signal 0 to it is not refused as
/// having no such process).
fn alive(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

/// The task users `spec` names (`USER`, or `NAME=USER,...,*=USER`:
/// [`TaskUsers::parse`]), if this process runs as root and each is a
/// local user other than root; else why not.
pub(crate) fn check(name: &str) -> anyhow::Result<TaskUsers> {
    let uid = rustix::process::geteuid();
    if !uid.is_root() {
        bail!(
            "--task-user {name} needs a worker started as root (it runs as user id {}): \
             only root can run commands as another user",
            uid.as_raw()
        );
    }
    Ok(TaskUsers::parse(name)?)
}

/// Fails unless `path`, if it exists, is readable by its owner only.
fn private(path: &Path) -> anyhow::Result<()> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "{} has mode {mode:03o}: with --task-user, a worker's secret files must be readable \
             by their owner only (chmod 600 {0})",
            path.display()
        );
    }
    Ok(())
}

/// The files a worker keeps secret: its shared secret file and, with TLS,
/// its key (`DIR/NAME.key`).
pub(crate) fn secret_files(
    secret_file: Option<&Path>,
    tls: &sluice_tools::transport::TlsArgs,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = secret_file.map(Path::to_path_buf).into_iter().collect();
    if let (false, Some(dir)) = (tls.insecure, tls.tls_dir.as_deref()) {
        let name = tls.tls_name.as_deref().unwrap_or("worker");
        out.push(dir.join(format!("{name}.key")));
        out.push(dir.join("ca.key"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_file_readable_by_others_is_refused_and_one_of_its_owner_is_kept() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("secret");
        std::fs::write(&f, "s").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = private(&f).unwrap_err().to_string();
        assert!(e.contains("mode 644") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        private(&f).unwrap();
        private(&d.path().join("missing")).unwrap();
    }

    /// The base directory of a worker that is gone is removed; that of a
    /// running one, a link and other names are kept.
    #[test]
    fn a_gone_workers_directory_is_swept_and_a_running_ones_kept() {
        let d = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let gone = d.path().join(format!("{BASE_PREFIX}{dead}"));
        std::fs::create_dir_all(gone.join("task-1")).unwrap();
        std::fs::write(gone.join("task-1/f"), "x").unwrap();
        let running = d
            .path()
            .join(format!("{BASE_PREFIX}{}", std::process::id()));
        std::fs::create_dir(&running).unwrap();
        let other = d.path().join("sluice-tasks-x");
        std::fs::create_dir(&other).unwrap();
        let target = d.path().join("target");
        std::fs::create_dir(&target).unwrap();
        let link = d.path().join(format!("{BASE_PREFIX}{}", dead + 1_000_000));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(sweep_stale(d.path()), std::slice::from_ref(&gone));
        assert!(!gone.exists());
        assert!(running.exists() && other.exists() && link.exists() && target.exists());
    }
}
