//! Users as an admin and they meet them: `sluice user add` writes a key
//! only its owner may read, each user sees and changes only what they
//! may, `share` lets another read, `user rm` revokes a key at once.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::*;

/// `sluice ARGS` on cluster `c` as the user of key file `key`.
fn as_user(c: &Cluster, key: &Path, args: &[&str]) -> std::process::Command {
    let mut cmd = c.cmd(args);
    cmd.arg("--user-key").arg(key);
    cmd
}

/// The data set names `sluice ls` lists for `key`'s user.
fn names(c: &Cluster, key: &Path) -> Vec<String> {
    let out = ok(as_user(c, key, &["ls"]).output().unwrap());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn users_see_and_change_only_what_they_may() {
    let dir = tempfile::tempdir().unwrap();
    let c = Cluster::up(dir.path(), 1, "");
    let data = dir.path().join("words.txt");
    std::fs::write(&data, "a b a\n").unwrap();
    put(&c, &data, "words", "1m", "1");
    for u in ["alice", "bob"] {
        ok(c.cmd(&["user", "add", u]).output().unwrap());
    }
    let alice = c.dir.join("users/alice.key");
    let bob = c.dir.join("users/bob.key");
    let mode = std::fs::metadata(&alice).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let listed = ok(c.cmd(&["user", "ls"]).output().unwrap());
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.contains("alice") && listed.contains("bob"),
        "{listed}"
    );

    // An admin's data set is private; a user cannot add users.
    assert!(names(&c, &alice).is_empty());
    let e = fails(
        as_user(&c, &alice, &["user", "add", "eve"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("permission denied"), "{e}");
    let e = fails(as_user(&c, &alice, &["rm", "words"]).output().unwrap());
    assert!(
        e.contains("permission denied: data set words belongs to an admin"),
        "{e}"
    );

    // Shared with alice, she reads it; bob still does not.
    ok(c.cmd(&["share", "words", "alice"]).output().unwrap());
    assert_eq!(names(&c, &alice), ["words"]);
    assert!(names(&c, &bob).is_empty());
    let e = fails(as_user(&c, &bob, &["ls", "words"]).output().unwrap());
    assert!(e.contains("permission denied"), "{e}");
    ok(c.cmd(&["unshare", "words", "alice"]).output().unwrap());
    assert!(names(&c, &alice).is_empty());

    // Alice puts her own data set and gets it back; bob may not, until
    // she shares it.
    ok(as_user(&c, &alice, &["put"])
        .arg(&data)
        .args(["--dataset", "hers"])
        .output()
        .unwrap());
    assert_eq!(names(&c, &alice), ["hers"]);
    let back = dir.path().join("back.txt");
    ok(as_user(&c, &alice, &["get", "hers"])
        .arg(&back)
        .output()
        .unwrap());
    assert_eq!(std::fs::read(&back).unwrap(), b"a b a\n");
    let bobs = dir.path().join("bobs.txt");
    let e = fails(
        as_user(&c, &bob, &["get", "hers"])
            .arg(&bobs)
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("permission denied: data set hers belongs to alice"),
        "{e}"
    );
    ok(as_user(&c, &alice, &["share", "hers", "bob"])
        .output()
        .unwrap());
    ok(as_user(&c, &bob, &["get", "hers"])
        .arg(&bobs)
        .output()
        .unwrap());
    assert_eq!(std::fs::read(&bobs).unwrap(), b"a b a\n");
    let e = fails(as_user(&c, &bob, &["rm", "hers"]).output().unwrap());
    assert!(e.contains("belongs to alice"), "{e}");

    // Alice's job runs as her: it reads what she may, its output is hers,
    // and only she (or an admin) sees it and its record.
    let key = alice.to_str().unwrap();
    let wc = |input: &str| {
        let mut args = vec!["--user-key", key];
        args.extend(WC);
        args.extend(["--input", input, "--output", "counts"]);
        c.submit(&args).output().unwrap()
    };
    let e = fails(wc("words"));
    assert!(
        e.contains("permission denied: data set words belongs to an admin"),
        "{e}"
    );
    ok(wc("hers"));
    assert_eq!(names(&c, &alice), ["counts", "hers"]);
    assert_eq!(names(&c, &bob), ["hers"]);
    let jobs = |key: &Path| {
        let out = ok(as_user(&c, key, &["jobs"]).output().unwrap());
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    assert!(jobs(&alice) > 0);
    assert_eq!(jobs(&bob), 0, "bob sees no job of alice's");
    let all = ok(c.cmd(&["jobs", "--json"]).output().unwrap());
    let line = String::from_utf8_lossy(&all.stdout)
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["user"], "alice");
    let id = v["job"].as_str().unwrap();
    let e = fails(as_user(&c, &bob, &["history", id]).output().unwrap());
    assert!(e.contains("belongs to alice"), "{e}");
    let e = fails(as_user(&c, &bob, &["kill", id]).output().unwrap());
    assert!(
        e.contains(&format!("permission denied: job {id} belongs to alice")),
        "{e}"
    );

    // Removed, alice's key is refused at once.
    ok(c.cmd(&["user", "rm", "alice"]).output().unwrap());
    let e = fails(as_user(&c, &alice, &["ls"]).output().unwrap());
    assert!(e.contains("unknown or removed user alice"), "{e}");
    // An admin still sees everything.
    let out = ok(c.cmd(&["ls"]).output().unwrap());
    assert!(String::from_utf8_lossy(&out.stdout).contains("words"));
}
