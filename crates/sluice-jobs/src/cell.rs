//! Where a Streaming command runs, and as whom: its cell.
//!
//! Every command gets a working directory of its own, holding the job's
//! shipped files, removed when the task ends. A process that runs
//! commands for others (a worker started as root) may [`confine`] them
//! once, before the first starts: from then on each command runs as the
//! task user (its user and primary group ids, no supplementary groups,
//! `HOME` its working directory), and working directories go under a
//! base directory of the process's own, mode 0711 (the task user can
//! reach its own directory but list none), each owned by the task user,
//! mode 0700, named by a number no one can guess.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use sluice_api::{Error, Result};

use crate::JobError;

/// The unprivileged user commands run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskUser {
    /// Its name.
    pub name: String,
    /// Its user id.
    pub uid: u32,
    /// Its primary group id.
    pub gid: u32,
}

impl TaskUser {
    /// The user `name`, from the system's user database (`getpwnam_r`:
    /// `/etc/passwd`, or LDAP or SSSD where the host's NSS says so, as
    /// Hadoop's LinuxContainerExecutor finds its users). Root (uid 0) is
    /// refused: it would confine nothing.
    pub fn lookup(name: &str) -> std::result::Result<TaskUser, JobError> {
        let fail = |msg: String| JobError::TaskUser {
            name: name.to_owned(),
            msg,
        };
        let user = nix::unistd::User::from_name(name)
            .map_err(|e| fail(format!("looking the user up: {e}")))?
            .ok_or_else(|| {
                fail(
                    "no such user (create it, e.g. \
                     `useradd --system --no-create-home NAME`)"
                        .into(),
                )
            })?;
        if user.uid.is_root() {
            return Err(fail("its user id is 0: user code would run as root".into()));
        }
        Ok(TaskUser {
            name: user.name,
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
        })
    }
}

/// Who runs this process's commands, and where their directories go.
#[derive(Debug)]
struct Cell {
    user: TaskUser,
    base: PathBuf,
}

static CELL: OnceLock<Cell> = OnceLock::new();

/// Runs every command this process starts from now on as `user`, in a
/// directory of its own under `base` (created, mode 0711; an existing one
/// is given that mode). Once per process: a second call fails.
pub fn confine(user: TaskUser, base: &Path) -> std::result::Result<(), JobError> {
    use std::os::unix::fs::PermissionsExt;
    let fail = |msg: String| JobError::TaskUser {
        name: user.name.clone(),
        msg,
    };
    std::fs::create_dir_all(base)
        .and_then(|()| std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o711)))
        .map_err(|e| fail(format!("creating {}: {e}", base.display())))?;
    let cell = Cell {
        user: user.clone(),
        base: base.to_owned(),
    };
    CELL.set(cell)
        .map_err(|_| fail("commands are confined already".into()))
}

/// Removes the base directory of the confined commands' working
/// directories, with what is left in it: for a process that ends, once
/// its commands are stopped.
pub fn remove_base() {
    if let Some(c) = CELL.get() {
        let _ = std::fs::remove_dir_all(&c.base);
    }
}

/// The task user commands run as, if they are confined.
pub fn task_user() -> Option<&'static TaskUser> {
    CELL.get().map(|c| &c.user)
}

/// A command's working directory, with the shipped files; removed when
/// dropped.
pub(crate) struct WorkDir(PathBuf);

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

impl WorkDir {
    /// A new directory with `files` in it, the task user's when confined.
    pub(crate) fn new(files: &[(String, Vec<u8>)]) -> Result<WorkDir> {
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let path = match CELL.get() {
            Some(c) => c.base.join(format!("task-{n}-{:016x}", unguessable())),
            None => std::env::temp_dir().join(format!("sluice-stream-{}-{n}", std::process::id())),
        };
        std::fs::create_dir_all(&path).map_err(|e| io(e, &path))?;
        let dir = WorkDir(path);
        for (name, bytes) in files {
            let p = dir.0.join(name);
            std::fs::write(&p, bytes).map_err(|e| io(e, &p))?;
            set_mode(&p, 0o755)?;
        }
        if let Some(c) = CELL.get() {
            dir.give_to(&c.user)?;
        }
        Ok(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// Makes the directory and its files `user`'s, the directory mode
    /// 0700.
    fn give_to(&self, user: &TaskUser) -> Result<()> {
        let own = |p: &Path| {
            std::os::unix::fs::chown(p, Some(user.uid), Some(user.gid)).map_err(|e| io(e, p))
        };
        for e in std::fs::read_dir(&self.0).map_err(|e| io(e, &self.0))? {
            own(&e.map_err(|e| io(e, &self.0))?.path())?;
        }
        own(&self.0)?;
        set_mode(&self.0, 0o700)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The variables of this process's environment a confined command gets;
/// no other (a worker's `SLUICE_SECRET` among them).
const KEPT_ENV: [&str; 6] = ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH"];

/// Makes `cmd` run in `dir`, and as the task user when commands are
/// confined: its user and group ids (the standard library drops the
/// supplementary groups when it sets the user id), an environment of
/// [`KEPT_ENV`] only, `HOME` and `TMPDIR` its working directory, `USER`
/// and `LOGNAME` its name.
pub(crate) fn enter(cmd: &mut Command, dir: &Path) {
    cmd.current_dir(dir);
    if let Some(c) = CELL.get() {
        cmd.env_clear();
        for k in KEPT_ENV {
            if let Some(v) = std::env::var_os(k) {
                cmd.env(k, v);
            }
        }
        cmd.uid(c.user.uid)
            .gid(c.user.gid)
            .env("HOME", dir)
            .env("TMPDIR", dir)
            .env("USER", &c.user.name)
            .env("LOGNAME", &c.user.name);
    }
}

/// A number for a directory's name that another task cannot guess (it
/// could otherwise open a directory it cannot list).
fn unguessable() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

fn set_mode(p: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).map_err(|e| io(e, p))
}

fn io(e: std::io::Error, p: &Path) -> Error {
    Error::user(format!("{}: {e}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A user is found with the ids the system's database gives (here
    /// `nobody`, whom every Linux has, as `id` reports).
    #[test]
    fn a_user_is_found_with_the_systems_ids() {
        let id = |flag: &str| {
            let o = std::process::Command::new("id")
                .args([flag, "nobody"])
                .output()
                .unwrap();
            String::from_utf8(o.stdout)
                .unwrap()
                .trim()
                .parse::<u32>()
                .unwrap()
        };
        let u = TaskUser::lookup("nobody").unwrap();
        assert_eq!(
            (u.name.as_str(), u.uid, u.gid),
            ("nobody", id("-u"), id("-g"))
        );
    }

    #[test]
    fn root_and_unknown_users_are_refused_with_the_reason() {
        let e = TaskUser::lookup("root").unwrap_err().to_string();
        assert!(e.contains("user id is 0"), "{e}");
        let e = TaskUser::lookup("no-such-user-here")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no such user"), "{e}");
    }
}
