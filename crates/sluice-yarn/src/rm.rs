//! The ResourceManager's REST API (`/ws/v1/cluster/...`), with simple
//! authentication (`?user.name=USER`), as Hadoop documents it: a new
//! application id and the cluster's maximum allocation, a queue's maximum
//! allocation (the scheduler's report), a submission, an application's
//! report, its kill. Every request gives up within 25 s
//! (5 s to connect), so a ResourceManager that does not answer is an
//! error, not a hang.

use std::time::Duration;

use serde_json::Value;

use crate::runtime::runtime;
use crate::{Result, YarnError};

/// A ResourceManager's REST API, as one user.
#[derive(Debug, Clone)]
pub struct Rm {
    base: String,
    user: String,
    http: reqwest::Client,
}

/// `new-application`'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApp {
    /// The application id (`application_TS_N`).
    pub id: String,
    /// The largest container's memory (MB).
    pub max_mb: u64,
    /// The largest container's virtual cores.
    pub max_vcores: u64,
}

/// The largest container a queue gives (`maximumAllocation` of the
/// Capacity Scheduler's queue, `maxContainerAllocation` of the Fair
/// Scheduler's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMax {
    /// The queue's path (`root.default`).
    pub path: String,
    /// Memory (MB).
    pub mb: u64,
    /// Virtual cores.
    pub vcores: u64,
}

/// An application's report (`/ws/v1/cluster/apps/ID`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppReport {
    /// `NEW`, `SUBMITTED`, `ACCEPTED`, `RUNNING`, `FINISHED`, `FAILED`,
    /// `KILLED`.
    pub state: String,
    /// `UNDEFINED` while it runs, then `SUCCEEDED`, `FAILED` or `KILLED`.
    pub final_status: String,
    /// YARN's diagnostics.
    pub diagnostics: String,
    /// Its running containers (-1 once it ended).
    pub running_containers: i64,
    /// The memory its containers hold (MB).
    pub allocated_mb: i64,
    /// Its tracking URL (through the ResourceManager's proxy).
    pub tracking_url: String,
    /// Its queue.
    pub queue: String,
}

impl AppReport {
    /// Whether it has ended.
    pub fn ended(&self) -> bool {
        matches!(self.state.as_str(), "FINISHED" | "FAILED" | "KILLED")
    }
}

impl Rm {
    /// The API at `base` (`http://HOST:PORT`) as `user`.
    pub fn new(base: &str, user: &str) -> Rm {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(25))
            .build()
            .expect("an HTTP client");
        Rm {
            base: base.trim_end_matches('/').to_owned(),
            user: user.to_owned(),
            http,
        }
    }

    /// The web address it calls.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends one request; the status and body of the answer.
    fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<String>,
    ) -> Result<(u16, String)> {
        let url = format!("{}/ws/v1/cluster/{path}?user.name={}", self.base, self.user);
        let mut req = self
            .http
            .request(method, &url)
            .header("Accept", "application/json");
        if let Some(b) = body {
            req = req.header("Content-Type", "application/json").body(b);
        }
        let unreachable = |e: reqwest::Error| YarnError::RmUnreachable {
            url: url.clone(),
            why: error_chain(&e),
        };
        runtime().block_on(async {
            let resp = req.send().await.map_err(unreachable)?;
            let status = resp.status().as_u16();
            let text = resp.text().await.map_err(unreachable)?;
            Ok((status, text))
        })
    }

    /// Sends one request whose answer must be 2xx; the JSON it holds.
    fn json(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<String>,
        what: &str,
    ) -> Result<Value> {
        let (status, text) = self.call(method, path, body)?;
        if !(200..300).contains(&status) {
            return Err(YarnError::RmRefused {
                what: what.into(),
                status,
                body: reason(&text),
            });
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| YarnError::RmAnswer {
            what: what.into(),
            why: e.to_string(),
        })
    }

    /// `POST apps/new-application`.
    pub fn new_application(&self) -> Result<NewApp> {
        let what = "a new application";
        let v = self.json(reqwest::Method::POST, "apps/new-application", None, what)?;
        let missing = |f: &str| YarnError::RmAnswer {
            what: what.into(),
            why: format!("no {f}"),
        };
        let max = &v["maximum-resource-capability"];
        Ok(NewApp {
            id: v["application-id"]
                .as_str()
                .ok_or_else(|| missing("application-id"))?
                .to_owned(),
            max_mb: max["memory"]
                .as_u64()
                .ok_or_else(|| missing("maximum memory"))?,
            max_vcores: max["vCores"]
                .as_u64()
                .ok_or_else(|| missing("maximum vCores"))?,
        })
    }

    /// `GET scheduler`: the maximum allocation of the leaf queue named
    /// `queue` (its name, `default`, or its path, `root.default`); `None`
    /// when the scheduler does not report one for it (no such queue: the
    /// submission then gets YARN's own reason).
    pub fn queue_max(&self, queue: &str) -> Result<Option<QueueMax>> {
        let v = self.json(reqwest::Method::GET, "scheduler", None, "the scheduler")?;
        Ok(find_queue_max(&v["scheduler"]["schedulerInfo"], queue))
    }

    /// `POST apps` with a submission context ([`crate::launch`]).
    pub fn submit(&self, context: &Value) -> Result<()> {
        self.json(
            reqwest::Method::POST,
            "apps",
            Some(context.to_string()),
            "the application",
        )
        .map(drop)
    }

    /// `GET apps/ID`.
    pub fn app(&self, id: &str) -> Result<AppReport> {
        let v = self.json(
            reqwest::Method::GET,
            &format!("apps/{id}"),
            None,
            "a report",
        )?;
        let a = &v["app"];
        let s = |f: &str| a[f].as_str().unwrap_or_default().to_owned();
        if a["state"].as_str().is_none() {
            return Err(YarnError::RmAnswer {
                what: format!("the report of {id}"),
                why: "no state".into(),
            });
        }
        Ok(AppReport {
            state: s("state"),
            final_status: s("finalStatus"),
            diagnostics: s("diagnostics"),
            running_containers: a["runningContainers"].as_i64().unwrap_or(0),
            allocated_mb: a["allocatedMB"].as_i64().unwrap_or(0),
            tracking_url: s("trackingUrl"),
            queue: s("queue"),
        })
    }

    /// `PUT apps/ID/state {"state":"KILLED"}`.
    pub fn kill(&self, id: &str) -> Result<()> {
        self.json(
            reqwest::Method::PUT,
            &format!("apps/{id}/state"),
            Some(r#"{"state":"KILLED"}"#.into()),
            "the kill",
        )
        .map(drop)
    }
}

/// The maximum allocation of the leaf queue `queue` in a scheduler's
/// queue tree: the Capacity Scheduler's (children under `queues.queue`,
/// names beside paths) or the Fair Scheduler's (`rootQueue`, children
/// under `childQueues.queue`, names that are paths).
fn find_queue_max(node: &Value, queue: &str) -> Option<QueueMax> {
    if node["rootQueue"].is_object() {
        return find_queue_max(&node["rootQueue"], queue);
    }
    let children = [&node["queues"]["queue"], &node["childQueues"]["queue"]]
        .into_iter()
        .find_map(|c| c.as_array().filter(|c| !c.is_empty()));
    if let Some(children) = children {
        return children.iter().find_map(|c| find_queue_max(c, queue));
    }
    let name = node["queueName"].as_str()?;
    let path = node["queuePath"].as_str().unwrap_or(name);
    let named = [name, path]
        .iter()
        .any(|n| *n == queue || n.strip_prefix("root.") == Some(queue));
    if !named {
        return None;
    }
    let max = ["maximumAllocation", "maxContainerAllocation"]
        .iter()
        .map(|k| &node[*k])
        .find(|m| m.is_object())?;
    Some(QueueMax {
        path: path.to_owned(),
        mb: max["memory"].as_u64()?,
        vcores: max["vCores"].as_u64()?,
    })
}

/// YARN's reason in an error answer (`RemoteException.message`), else
/// the answer itself.
fn reason(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["RemoteException"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.trim().chars().take(500).collect())
}

/// An error with its causes, as one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cause = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yarns_reason_is_taken_from_its_remote_exception() {
        let body = r#"{"RemoteException":{"exception":"BadRequestException",
            "message":"unknown queue nosuch","javaClassName":"x"}}"#;
        assert_eq!(reason(body), "unknown queue nosuch");
        assert_eq!(reason(" plain text "), "plain text");
    }

    #[test]
    fn a_queues_maximum_allocation_is_found_by_name_or_path() {
        let info: Value = serde_json::from_str(
            r#"{"queueName":"root","queues":{"queue":[
                {"queueName":"default","queuePath":"root.default",
                 "maximumAllocation":{"memory":4096,"vCores":8}},
                {"queueName":"eng","queuePath":"root.eng","queues":{"queue":[
                    {"queueName":"small","queuePath":"root.eng.small",
                     "maximumAllocation":{"memory":2048,"vCores":2}}]}}]}}"#,
        )
        .unwrap();
        let small = QueueMax {
            path: "root.eng.small".into(),
            mb: 2048,
            vcores: 2,
        };
        assert_eq!(find_queue_max(&info, "small"), Some(small.clone()));
        assert_eq!(find_queue_max(&info, "root.eng.small"), Some(small));
        assert_eq!(find_queue_max(&info, "default").unwrap().mb, 4096);
        assert_eq!(find_queue_max(&info, "nosuch"), None);
        // A parent queue takes no applications.
        assert_eq!(find_queue_max(&info, "eng"), None);
        // The Fair Scheduler's spelling.
        let fair: Value = serde_json::from_str(
            r#"{"type":"fairScheduler","rootQueue":{"queueName":"root",
                "childQueues":{"queue":[{"queueName":"root.q",
                "maxContainerAllocation":{"memory":1024,"vCores":1}}]}}}"#,
        )
        .unwrap();
        let q = find_queue_max(&fair, "q").unwrap();
        assert_eq!((q.path.as_str(), q.mb), ("root.q", 1024));
    }

    #[test]
    fn a_resource_manager_that_does_not_answer_is_an_error_in_time() {
        // A listener that accepts and never answers.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::time::Instant::now();
        let e = Rm::new(&format!("http://{addr}"), "u")
            .new_application()
            .unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(30));
        assert!(matches!(e, YarnError::RmUnreachable { .. }), "{e}");
        assert!(e.to_string().contains("does not answer"), "{e}");
        drop(l);
    }
}
