//! The ApplicationMaster's submission: the JSON body of the
//! ResourceManager's `POST /ws/v1/cluster/apps` (Hadoop's
//! `ApplicationSubmissionContext` in its REST form), and the sizes of
//! the containers Sluice asks for.

use serde_json::{json, Value};

use crate::staging::Uploaded;

/// YARN's application type for Sluice's applications.
pub const APP_TYPE: &str = "SLUICE";

/// The ApplicationMaster's main class (the `yarn/` Maven module).
pub const AM_CLASS: &str = "sluice.yarn.AppMaster";

/// The ApplicationMaster JVM's heap (MB).
pub const AM_HEAP_MB: u64 = 256;

/// The ApplicationMaster container's memory (MB): its JVM (heap and
/// the JVM's own memory) and the coordinator beside it.
pub const AM_MEMORY_MB: u64 = 1024;

/// What a worker's container holds beyond the worker's `--memory`
/// (bytes): the larger of 256 MiB and a tenth of `--memory`. The worker's
/// tasks keep their buffers within `--memory`; beyond it are the binary's
/// mapped text, thread stacks, the data plane's and the runtime's
/// buffers, and the allocator's slack (measured in `tests/integration`'s
/// `yarn` module: an idle worker's resident memory, and a word count's
/// peak, stay within it).
pub fn worker_overhead(memory: u64) -> u64 {
    (256u64 << 20).max(memory / 10)
}

/// A worker container's memory (MB) for a worker `--memory` of
/// `memory` bytes.
pub fn worker_container_mb(memory: u64) -> u64 {
    (memory + worker_overhead(memory)).div_ceil(1 << 20)
}

/// What the ApplicationMaster's container is given.
#[derive(Debug, Clone)]
pub struct AmLaunch {
    /// From `new-application`.
    pub app_id: String,
    /// The application's name.
    pub name: String,
    /// The queue, if not the default.
    pub queue: Option<String>,
    /// Files localized into its work directory: link name and where.
    pub files: Vec<(String, Uploaded)>,
    /// The cluster's application class path (Hadoop's jars).
    pub classpath: Vec<String>,
    /// The ApplicationMaster's arguments.
    pub args: Vec<String>,
}

/// Quotes `s` for the container's shell.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The submission context, as `POST /ws/v1/cluster/apps` takes it.
pub fn submission(l: &AmLaunch) -> Value {
    let resources: Vec<Value> = l
        .files
        .iter()
        .map(|(name, f)| {
            let visibility = if f.cached { "PRIVATE" } else { "APPLICATION" };
            json!({"key": name, "value": {
                "resource": f.url, "type": "FILE", "visibility": visibility,
                "size": f.size, "timestamp": f.timestamp}})
        })
        .collect();
    // The work directory first: the shipped *-site.xml files are found
    // there before any the cluster's class path holds.
    let mut cp = vec!["{{PWD}}".to_owned(), "{{PWD}}/*".to_owned()];
    cp.extend(l.classpath.iter().cloned());
    let mut cmd = format!(
        "{{{{JAVA_HOME}}}}/bin/java -Xmx{AM_HEAP_MB}m -Djava.net.preferIPv4Stack=true {AM_CLASS}"
    );
    for a in &l.args {
        cmd.push(' ');
        cmd.push_str(&quote(a));
    }
    cmd.push_str(" 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr");
    let mut ctx = json!({
        "application-id": l.app_id,
        "application-name": l.name,
        "application-type": APP_TYPE,
        "am-container-spec": {
            "local-resources": {"entry": resources},
            "commands": {"command": cmd},
            "environment": {"entry": [
                {"key": "CLASSPATH", "value": cp.join("<CPS>")},
            ]},
        },
        "unmanaged-AM": false,
        // A second attempt would start a coordinator with none of the
        // first's state, beside workers of the first: one attempt.
        "max-app-attempts": 1,
        "resource": {"memory": AM_MEMORY_MB, "vCores": 1},
        "keep-containers-across-application-attempts": false,
    });
    if let Some(q) = &l.queue {
        ctx["queue"] = json!(q);
    }
    ctx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_submission_carries_files_command_and_class_path() {
        let f = Uploaded {
            url: "hdfs://nn/user/u/.sluice/a/sluice".into(),
            size: 10,
            timestamp: 99,
            cached: true,
        };
        let l = AmLaunch {
            app_id: "application_1_0001".into(),
            name: "sluice".into(),
            queue: Some("q".into()),
            files: vec![("sluice".into(), f)],
            classpath: vec!["/h/*".into()],
            args: vec!["--near".into(), "hdfs://nn/a b".into()],
        };
        let v = submission(&l);
        assert_eq!(v["application-type"], "SLUICE");
        assert_eq!(v["queue"], "q");
        let spec = &v["am-container-spec"];
        let e = &spec["local-resources"]["entry"][0];
        assert_eq!(e["key"], "sluice");
        assert_eq!(e["value"]["size"], 10);
        assert_eq!(e["value"]["timestamp"], 99);
        assert_eq!(e["value"]["visibility"], "PRIVATE");
        let cmd = spec["commands"]["command"].as_str().unwrap();
        assert!(cmd.starts_with("{{JAVA_HOME}}/bin/java "), "{cmd}");
        assert!(
            cmd.contains("sluice.yarn.AppMaster --near 'hdfs://nn/a b' 1>"),
            "{cmd}"
        );
        let cp = spec["environment"]["entry"][0]["value"].as_str().unwrap();
        assert_eq!(cp, "{{PWD}}<CPS>{{PWD}}/*<CPS>/h/*");
    }

    #[test]
    fn containers_hold_memory_and_the_overhead() {
        assert_eq!(worker_container_mb(1 << 30), 1024 + 256);
        assert_eq!(worker_container_mb(10 << 30), 10 * 1024 + 1024);
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }
}
