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
//!
//! The task user may depend on the job's user ([`TaskUsers`], as
//! Hadoop's LinuxContainerExecutor runs a secure cluster's containers as
//! their job's user): `alice=alice,bob=bob,*=sluice-task` runs alice's
//! jobs as the local user alice, bob's as bob, and everyone else's (an
//! admin's among them) as sluice-task; a map without `*` refuses the
//! jobs of the users it does not name. A job's user is the property
//! [`JOB_USER`], which the coordinator sets from the caller it
//! authenticated (whatever the request said).

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

/// The job property naming the Sluice user a job runs for (empty: an
/// admin), Hadoop's name for it; a command sees it in its environment as
/// `mapreduce_job_user_name`.
pub const JOB_USER: &str = "mapreduce.job.user.name";

/// Which local user runs the commands of each Sluice user's jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskUsers {
    /// Users named in the map, with the local user of each.
    named: Vec<(String, TaskUser)>,
    /// The local user of every other job (`*`), if any.
    rest: Option<TaskUser>,
}

impl TaskUsers {
    /// `USER` (every job's commands run as the local user USER) or a map
    /// `NAME=USER,...` of Sluice user names to local users, `*=USER` for
    /// every other job; each local user looked up ([`TaskUser::lookup`]).
    pub fn parse(spec: &str) -> std::result::Result<TaskUsers, JobError> {
        let bad = |msg: String| JobError::TaskUser {
            name: spec.to_owned(),
            msg,
        };
        if !spec.contains('=') {
            return Ok(TaskUsers {
                named: Vec::new(),
                rest: Some(TaskUser::lookup(spec.trim())?),
            });
        }
        let mut users = TaskUsers {
            named: Vec::new(),
            rest: None,
        };
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((who, local)) = pair.split_once('=').map(|(a, b)| (a.trim(), b.trim())) else {
                return Err(bad(format!("`{pair}` is not NAME=USER")));
            };
            if who.is_empty() || local.is_empty() {
                return Err(bad(format!("`{pair}` is not NAME=USER")));
            }
            let taken =
                users.named.iter().any(|(n, _)| n == who) || (who == "*" && users.rest.is_some());
            if taken {
                return Err(bad(format!("{who} is mapped twice")));
            }
            let user = TaskUser::lookup(local)?;
            match who {
                "*" => users.rest = Some(user),
                _ => users.named.push((who.to_owned(), user)),
            }
        }
        Ok(users)
    }

    /// The local user for the jobs of Sluice user `job_user` (empty: an
    /// admin), if the map has one.
    pub fn for_job(&self, job_user: &str) -> Option<&TaskUser> {
        self.named
            .iter()
            .find(|(n, _)| !job_user.is_empty() && n == job_user)
            .map(|(_, u)| u)
            .or(self.rest.as_ref())
    }

    /// Every local user the map names.
    pub fn locals(&self) -> impl Iterator<Item = &TaskUser> {
        self.named.iter().map(|(_, u)| u).chain(&self.rest)
    }
}

impl std::fmt::Display for TaskUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let named = self.named.iter().map(|(n, u)| format!("{n}={}", u.name));
        let rest = self.rest.iter().map(|u| format!("*={}", u.name));
        let all: Vec<String> = named.chain(rest).collect();
        f.write_str(&all.join(","))
    }
}

/// Who runs this process's commands, and where their directories go.
#[derive(Debug)]
struct Cell {
    users: TaskUsers,
    base: PathBuf,
}

static CELL: OnceLock<Cell> = OnceLock::new();

/// Runs every command this process starts from now on as the local user
/// `users` gives its job's user, in a directory of its own under `base`
/// (created, mode 0711; an existing one is given that mode). Once per
/// process: a second call fails.
pub fn confine(users: TaskUsers, base: &Path) -> std::result::Result<(), JobError> {
    use std::os::unix::fs::PermissionsExt;
    let fail = |msg: String| JobError::TaskUser {
        name: users.to_string(),
        msg,
    };
    std::fs::create_dir_all(base)
        .and_then(|()| std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o711)))
        .map_err(|e| fail(format!("creating {}: {e}", base.display())))?;
    let cell = Cell {
        users: users.clone(),
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

/// The local user the commands of `job_user`'s jobs run as: none when
/// commands are not confined, an error when they are and the map has no
/// user for that job.
pub fn user_for(job_user: &str) -> Result<Option<&'static TaskUser>> {
    let Some(c) = CELL.get() else {
        return Ok(None);
    };
    match c.users.for_job(job_user) {
        Some(u) => Ok(Some(u)),
        None => Err(Error::user(format!(
            "this worker runs no local user for the jobs of {} (its --task-user is {})",
            if job_user.is_empty() {
                "an admin"
            } else {
                job_user
            },
            c.users
        ))),
    }
}

/// A command's working directory, with the shipped files; removed when
/// dropped.
pub(crate) struct WorkDir(PathBuf);

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

impl WorkDir {
    /// A new directory with `files` in it, `user`'s when commands are
    /// confined.
    pub(crate) fn new(files: &[(String, Vec<u8>)], user: Option<&TaskUser>) -> Result<WorkDir> {
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
        if let Some(u) = user {
            dir.give_to(u)?;
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

/// Makes `cmd` run in `dir`, and as `user` ([`user_for`]) when commands
/// are confined: its user and group ids (the standard library drops the
/// supplementary groups when it sets the user id), an environment of
/// [`KEPT_ENV`] only, `HOME` and `TMPDIR` its working directory, `USER`
/// and `LOGNAME` its name.
pub(crate) fn enter(cmd: &mut Command, dir: &Path, user: Option<&TaskUser>) {
    cmd.current_dir(dir);
    if let Some(u) = user {
        cmd.env_clear();
        for k in KEPT_ENV {
            if let Some(v) = std::env::var_os(k) {
                cmd.env(k, v);
            }
        }
        cmd.uid(u.uid)
            .gid(u.gid)
            .env("HOME", dir)
            .env("TMPDIR", dir)
            .env("USER", &u.name)
            .env("LOGNAME", &u.name);
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

    /// A map gives each named job user their local user and everyone
    /// else `*`'s, an admin (the empty name) included; one user alone is
    /// everyone's; a map without `*` has no user for the others.
    #[test]
    fn a_map_gives_each_jobs_user_their_local_user() {
        let m = TaskUsers::parse("alice=daemon, *=nobody").unwrap();
        let local = |who: &str| m.for_job(who).map(|u| u.name.clone());
        assert_eq!(local("alice").as_deref(), Some("daemon"));
        assert_eq!(local("bob").as_deref(), Some("nobody"));
        assert_eq!(local("").as_deref(), Some("nobody"));
        assert_eq!(m.to_string(), "alice=daemon,*=nobody");
        let one = TaskUsers::parse("nobody").unwrap();
        assert_eq!(one.for_job("alice").unwrap().name, "nobody");
        assert_eq!(one.for_job("").unwrap().name, "nobody");
        let only = TaskUsers::parse("alice=daemon").unwrap();
        assert_eq!(only.for_job("alice").unwrap().name, "daemon");
        assert!(only.for_job("bob").is_none() && only.for_job("").is_none());
        assert_eq!(only.locals().count(), 1);
    }

    /// A malformed map, a name mapped twice, root or an unknown local user
    /// is refused, saying which.
    #[test]
    fn a_bad_map_is_refused_with_the_reason() {
        for (spec, why) in [
            ("alice=", "is not NAME=USER"),
            ("=nobody", "is not NAME=USER"),
            ("alice", "no such user"),
            ("alice=nobody,alice=daemon", "alice is mapped twice"),
            ("*=nobody,*=daemon", "* is mapped twice"),
            ("alice=root", "user id is 0"),
            ("alice=no-such-user-here", "no such user"),
            (",", "no such user"),
        ] {
            let e = TaskUsers::parse(spec).unwrap_err().to_string();
            assert!(e.contains(why), "{spec}: {e}");
        }
    }

    /// A job's user comes from its environment; none is an admin's.
    #[test]
    fn a_jobs_user_is_its_property() {
        assert_eq!(JOB_USER.replace('.', "_"), "mapreduce_job_user_name");
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
