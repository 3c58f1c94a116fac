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
use sluice_jobs::cell::{self, TaskUser};

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
    let user = check(name)?;
    for f in secret {
        private(f)?;
    }
    // The worker's own files from now on: its owner's alone.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    let base = std::env::temp_dir().join(format!("sluice-tasks-{}", std::process::id()));
    cell::confine(user.clone(), &base)?;
    tracing::info!(
        "Streaming and Python commands run as {} (uid {}, gid {}) in {}",
        user.name,
        user.uid,
        user.gid,
        base.display()
    );
    Ok(())
}

/// The task user `name`, if this process runs as root and it is a local
/// user other than root; else why not.
pub(crate) fn check(name: &str) -> anyhow::Result<TaskUser> {
    let uid = rustix::process::geteuid();
    if !uid.is_root() {
        bail!(
            "--task-user {name} needs a worker started as root (it runs as user id {}): \
             only root can run commands as another user",
            uid.as_raw()
        );
    }
    Ok(TaskUser::lookup(name)?)
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
}
