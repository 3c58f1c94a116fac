//! `sluice user` (an admin adds, removes and lists users) and `sluice
//! share` / `unshare` (who may read a data set).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use sluice_proto::proto;
use sluice_proto::users::{check_user_name, key_file_text, user_key};
use sluice_tools::conn::{connect, resolve, Conn};

#[derive(Debug, Subcommand)]
pub enum UserCmd {
    /// Add a user and write their key to CLUSTER/users/NAME.key (mode
    /// 600); give it to them, they pass it as --user-key (admins only).
    Add {
        /// The user's name (a-z, 0-9, _ and -, up to 32).
        name: String,
        /// Write the key here instead of CLUSTER/users/NAME.key.
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Remove a user: their key is refused from now on (admins only).
    Rm {
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// List the users (admins only).
    Ls(Conn),
}

/// `sluice user ...`.
pub fn user(cmd: &UserCmd) -> anyhow::Result<()> {
    match cmd {
        UserCmd::Add {
            name,
            key_file,
            conn,
        } => add(name, key_file.as_deref(), conn),
        UserCmd::Rm { name, conn } => {
            connect(conn)?.users("", name)?;
            println!("removed user {name}: their key is refused from now on");
            Ok(())
        }
        UserCmd::Ls(conn) => {
            for u in connect(conn)?.users("", "")?.users {
                println!("{}\tadded at {} (Unix ms)", u.name, u.created_ms);
            }
            Ok(())
        }
    }
}

/// Adds user `name` and writes their key.
fn add(name: &str, key_file: Option<&Path>, conn: &Conn) -> anyhow::Result<()> {
    check_user_name(name)?;
    let (_, secret) = resolve(conn)?;
    if let Some(u) = secret.user() {
        bail!("permission denied: only an admin may add users (this is user {u}'s key)");
    }
    let file = key_file.map_or_else(
        || conn.cluster.join("users").join(format!("{name}.key")),
        Path::to_path_buf,
    );
    let list = connect(conn)?.users(name, "")?;
    let Some(u) = list
        .users
        .iter()
        .find(|u| u.name == name && !u.salt.is_empty())
    else {
        bail!("the coordinator did not say how to make {name}'s key");
    };
    let key = user_key(&secret, name, &u.salt);
    write_private(&file, &key_file_text(name, &key))
        .with_context(|| format!("writing {name}'s key to {}", file.display()))?;
    println!("added user {name}; key in {}", file.display());
    Ok(())
}

/// Writes `text` to `path`, readable by its owner only.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// `sluice share` / `sluice unshare`'s arguments.
#[derive(Debug, Args)]
pub struct ShareArgs {
    /// The data set.
    pub dataset: String,
    /// The users.
    pub users: Vec<String>,
    /// Every user.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// Grants (or, with `revoke`, takes back) reading a data set.
pub fn share(a: &ShareArgs, revoke: bool) -> anyhow::Result<()> {
    if a.users.is_empty() && !a.all {
        bail!("name the users, or pass --all");
    }
    let req = proto::ShareRequest {
        dataset: a.dataset.clone(),
        users: a.users.clone(),
        all: a.all,
        revoke,
    };
    connect(&a.conn)?.share(req)?;
    let whom = if a.all {
        "every user".to_owned()
    } else {
        a.users.join(", ")
    };
    match revoke {
        false => println!("{} shared with {whom}", a.dataset),
        true => println!("{} no longer shared with {whom}", a.dataset),
    }
    Ok(())
}
