//! The coordinator's web pages, metrics and job history as a user meets
//! them on a live `sluice cluster up` cluster after a real job: each page
//! served, loaded in headless Chromium and read from its DOM (the job
//! listed, one timeline bar per attempt in the job's report), screenshots
//! saved; a `/metrics` scrape parsed as Prometheus text with counters equal
//! to the reports'; requests without the token refused with nothing of the
//! cluster shown; the history kept, bounded, across a coordinator restart.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use sluice_proto::ids::JobId;

use crate::support::*;

/// A reply: status, headers, body.
struct Reply {
    status: u16,
    head: String,
    body: String,
}

std::thread_local! {
    /// The TLS of the cluster whose pages this test reads ([`web`] sets
    /// it): its clients' certificate, trusting its CA.
    static SITE_TLS: std::cell::RefCell<Option<sluice_proto::tls::Tls>> =
        const { std::cell::RefCell::new(None) };
}

/// `GET path` on `addr` with an extra header line, over https trusting
/// the cluster's CA.
fn get(addr: &str, path: &str, header: Option<&str>) -> Reply {
    let tcp = TcpStream::connect(addr).unwrap();
    let tls = SITE_TLS.with(|t| t.borrow().clone()).expect("web(c) first");
    let mut s = sluice_proto::tls::stream::Conn::client(tcp, addr, Some(&tls)).unwrap();
    let extra = header.map_or_else(String::new, |h| format!("{h}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    // The server may close without TLS's close_notify: what came counts.
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    Reply {
        status: head.split_whitespace().nth(1).unwrap().parse().unwrap(),
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// The web pages' address and token, as `sluice web` prints them.
fn web(c: &Cluster) -> (String, String) {
    let out = ok(c.cmd(&["web"]).output().unwrap());
    let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let rest = url.strip_prefix("https://").unwrap();
    SITE_TLS.with(|t| *t.borrow_mut() = Some(client_tls(c)));
    let (addr, token) = rest.split_once("/?token=").unwrap();
    (addr.to_owned(), token.to_owned())
}

/// Runs word count over `input` into `output`; returns the job's id.
fn wordcount(c: &Cluster, input: &str, output: &str) -> JobId {
    ok(c.submit(&[
        "wordcount",
        "--input",
        input,
        "--output",
        output,
        "--reducers",
        "2",
    ])
    .output()
    .unwrap());
    let out = ok(c.cmd(&["jobs", "--json"]).output().unwrap());
    let text = String::from_utf8(out.stdout).unwrap();
    let last = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap());
    last.filter(|j| {
        j["description"]
            .as_str()
            .unwrap()
            .ends_with(&format!("-> {output}"))
    })
    .map(|j| j["job"].as_str().unwrap().parse::<JobId>().unwrap())
    .next_back()
    .unwrap()
}

fn history(c: &Cluster, job: JobId) -> serde_json::Value {
    let out = ok(c.cmd(&["history", &job.to_string()]).output().unwrap());
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The Chromium to drive: `$SLUICE_CHROMIUM`, else `chromium` on the
/// path (scripts/test.sh installs Debian's).
fn chromium() -> String {
    std::env::var("SLUICE_CHROMIUM").unwrap_or_else(|_| "chromium".into())
}

/// The public key pin (base64 SHA-256 of the SubjectPublicKeyInfo) of
/// the coordinator's certificate, which Chromium is told to trust.
fn coordinator_pin(c: &Cluster) -> String {
    let pem = c.dir.join("tls").join("coordinator.pem");
    let out = ok(Command::new("sh")
        .arg("-c")
        .arg(
            "openssl x509 -in \"$0\" -pubkey -noout | openssl pkey -pubin -outform der \
             | openssl dgst -sha256 -binary | openssl enc -base64",
        )
        .arg(&pem)
        .output()
        .unwrap());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

std::thread_local! {
    /// The pin Chromium trusts ([`coordinator_pin`]), set by the test.
    static PIN: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

fn headless(out_dir: &Path) -> Command {
    let mut cmd = Command::new(chromium());
    let pin = PIN.with(|p| p.borrow().clone());
    cmd.arg(format!("--ignore-certificate-errors-spki-list={pin}"));
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--window-size=1280,1000",
    ])
    .arg(format!(
        "--user-data-dir={}",
        out_dir.join("profile").display()
    ));
    cmd
}

/// The page's DOM after Chromium loaded it.
fn dom(out_dir: &Path, url: &str) -> String {
    let out = headless(out_dir)
        .arg("--dump-dom")
        .arg(url)
        .output()
        .unwrap_or_else(|e| panic!("running {} (scripts/test.sh installs it): {e}", chromium()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn screenshot(out_dir: &Path, url: &str, name: &str) -> PathBuf {
    let file = out_dir.join(format!("{name}.png"));
    let out = headless(out_dir)
        .arg(format!("--screenshot={}", file.display()))
        .arg(url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&file).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 5000,
        "{name}: no real screenshot"
    );
    file
}

/// Where screenshots are kept for a person to look at.
fn screenshot_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-screenshots");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn pages_show_a_real_job_and_metrics_equal_its_report() {
    let d = tempfile::tempdir().unwrap();
    let c = Cluster::up(d.path(), 2, "");
    let data = gen(d.path(), "4MB");
    put(&c, &data, "txt", "1MB", "1");
    let job = wordcount(&c, "txt", "wc");
    let report = history(&c, job);
    let (addr, token) = web(&c);

    // Nothing without the token, or with a wrong one.
    for (path, header) in [
        ("/", None),
        ("/metrics", None),
        (&format!("/jobs/{job}") as &str, None),
        ("/", Some("Authorization: Bearer 0000")),
        ("/datasets", Some("Cookie: sluice_token=nope")),
    ] {
        let r = get(&addr, path, header);
        assert_eq!(r.status, 401, "{path} {header:?}");
        assert!(
            !r.body.contains("wordcount") && !r.body.contains("txt"),
            "{}",
            r.body
        );
    }
    let r = get(&addr, &format!("/?token={token}"), None);
    assert_eq!(r.status, 200);
    assert!(
        r.head.to_lowercase().contains("set-cookie: sluice_token="),
        "{}",
        r.head
    );
    let cookie = format!("Cookie: sluice_token={token}");
    for path in [
        "/".to_owned(),
        format!("/jobs/{job}"),
        "/workers".into(),
        "/datasets".into(),
        "/datasets/txt".into(),
        "/cache".into(),
        "/pools".into(),
    ] {
        let r = get(&addr, &path, Some(&cookie));
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert!(r.body.contains("</html>"), "{path}");
    }
    assert_eq!(get(&addr, "/jobs/12345", Some(&cookie)).status, 404);
    assert_eq!(get(&addr, "/jobs/job-9-9", Some(&cookie)).status, 404);
    // Ids read as people type them; links of before, by number, still work.
    assert!(job.to_string().starts_with("job-1-"), "{job}");
    assert_eq!(report["job_id"], job.to_string());
    let numeric = get(&addr, &format!("/jobs/{}", job.0), Some(&cookie));
    assert_eq!(numeric.status, 200, "{}", numeric.body);
    assert!(
        numeric.body.contains(&format!("{job} (wordcount)")),
        "{}",
        numeric.body
    );
    let bad = get(&addr, "/jobs/job-1", Some(&cookie));
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("invalid job id"), "{}", bad.body);

    // The metrics parse as Prometheus text and count what the report does.
    let bearer = format!("Authorization: Bearer {token}");
    let text = get(&addr, "/metrics", Some(&bearer)).body;
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    let value = |name: &str, label: Option<(&str, &str)>| -> f64 {
        let s = scrape
            .samples
            .iter()
            .find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
            .unwrap_or_else(|| panic!("{name} {label:?} missing:\n{text}"));
        match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => panic!("{name} is not a number"),
        }
    };
    let n = |v: &serde_json::Value| v.as_u64().unwrap() as f64;
    let a = &report["attempts"];
    assert_eq!(
        value("sluice_attempts_total", Some(("outcome", "launched"))),
        n(&a["launched"])
    );
    assert_eq!(
        value("sluice_attempts_total", Some(("outcome", "failed"))),
        n(&a["failed"])
    );
    assert_eq!(
        value("sluice_shuffle_bytes_total", None),
        n(&report["shuffle_bytes"])
    );
    assert_eq!(
        value("sluice_input_bytes_total", None),
        n(&report["input_bytes"])
    );
    for (level, maps) in report["maps_by_level"].as_object().unwrap() {
        assert_eq!(
            value("sluice_maps_total", Some(("level", level))),
            n(maps),
            "{level}"
        );
    }
    assert_eq!(value("sluice_jobs", Some(("state", "succeeded"))), 1.0);
    assert_eq!(value("sluice_workers", Some(("state", "alive"))), 2.0);
    assert_eq!(value("sluice_datasets", None), 2.0, "txt and wc");
    assert!(text.contains("sluice_heartbeat_seconds_count"), "{text}");

    // Each worker's own /metrics, linked from the workers page: its tasks
    // add up to the job's attempts, its input to the job's.
    let page = get(&addr, "/workers", Some(&cookie)).body;
    let links: Vec<&str> = page
        .split("<a href=\"https://")
        .skip(1)
        .map(|s| s.split_once("/metrics").unwrap().0)
        .collect();
    assert_eq!(links.len(), 2, "{page}");
    let (mut tasks, mut input) = (0.0, 0.0);
    for w in &links {
        assert_eq!(get(w, "/metrics", None).status, 401);
        let text = get(w, "/metrics", Some(&bearer)).body;
        let scrape =
            prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
        for s in &scrape.samples {
            let prometheus_parse::Value::Counter(v) = s.value else {
                continue;
            };
            match s.metric.as_str() {
                "sluice_worker_tasks_total" => tasks += v,
                "sluice_worker_input_bytes_total" => input += v,
                _ => {}
            }
        }
    }
    assert_eq!(tasks, n(&a["launched"]));
    assert_eq!(input, n(&report["input_bytes"]));

    // Chromium: the job in the list, one bar per attempt of the report.
    let shots = screenshot_dir();
    PIN.with(|p| *p.borrow_mut() = coordinator_pin(&c));
    let url = |path: &str| format!("https://{addr}{path}?token={token}");
    let jobs = dom(d.path(), &url("/"));
    assert!(
        jobs.contains(&format!(">{job}</a>")) && jobs.contains("wordcount"),
        "{jobs}"
    );
    let page = dom(d.path(), &url(&format!("/jobs/{job}")));
    let timeline = report["timeline"].as_array().unwrap();
    assert_eq!(timeline.len() as u64, a["launched"].as_u64().unwrap());
    let model = &report["model"];
    assert!(model["ideal_seconds"].as_f64().unwrap() > 0.0, "{model}");
    let eff = model["efficiency"].as_f64().unwrap();
    assert!(eff > 0.0 && eff.is_finite(), "{model}");
    // Seed 004's time-based losses: every worker's finish times lie in
    // the job, and the model takes the losses out of the phases, so its
    // actual time is still the job's (within a heartbeat's rounding).
    let total = report["phases"]["total_s"].as_f64().unwrap();
    for w in report["per_worker"].as_array().unwrap() {
        let end = w["map_end_s"].as_f64().unwrap();
        assert!(end > 0.0 && end <= total + 1e-6, "{w}");
    }
    let skew = &report["time_skew"];
    let losses = skew["map_stragglers_s"].as_f64().unwrap()
        + skew["reduce_stragglers_s"].as_f64().unwrap()
        + skew["receive_skew_s"].as_f64().unwrap();
    let accounted =
        model["stragglers_s"].as_f64().unwrap() + model["receive_skew_s"].as_f64().unwrap();
    assert!(accounted <= losses + 1e-9, "{model} against {skew}");
    let actual = model["actual_seconds"].as_f64().unwrap();
    assert!((actual - total).abs() < 0.05, "{model} against {total}");
    assert!(
        page.contains("efficiency"),
        "the model's account is on the job's page"
    );
    assert_eq!(
        page.matches("class=\"attempt\"").count(),
        timeline.len(),
        "{page}"
    );
    for span in timeline {
        let task = span["task"].as_str().unwrap();
        assert!(
            page.contains(&format!("data-task=\"{task}\"")),
            "{task} drawn"
        );
    }
    let workers = dom(d.path(), &url("/workers"));
    assert!(
        workers.contains("id=\"cpu-") && workers.contains("<polyline"),
        "{workers}"
    );
    let datasets = dom(d.path(), &url("/datasets"));
    assert!(
        datasets.contains(">txt</a>") && datasets.contains(">wc</a>"),
        "{datasets}"
    );
    for (name, path) in [
        ("jobs", "/".to_owned()),
        ("job", format!("/jobs/{job}")),
        ("workers", "/workers".into()),
        ("datasets", "/datasets".into()),
    ] {
        let f = screenshot(d.path(), &url(&path), name);
        std::fs::copy(&f, shots.join(format!("{name}.png"))).unwrap();
    }
}

#[test]
fn history_is_kept_bounded_across_a_coordinator_restart() {
    let d = tempfile::tempdir().unwrap();
    let c = Cluster::unsupervised(d.path(), 1, "--history 2");
    let data = gen(d.path(), "1MB");
    put(&c, &data, "txt", "1MB", "1");
    let jobs: Vec<JobId> = (0..3)
        .map(|i| wordcount(&c, "txt", &format!("wc{i}")))
        .collect();
    let before: BTreeMap<JobId, serde_json::Value> =
        jobs.iter().map(|j| (*j, history(&c, *j))).collect();

    let pid = c.coordinator_pid();
    let argv = argv_of(pid);
    signal(pid, "KILL");
    let _again = restart_coordinator(&c, &argv, 1);

    let err = fails(c.cmd(&["history", &jobs[0].to_string()]).output().unwrap());
    assert!(err.contains("no longer kept"), "{err}");
    for j in &jobs[1..] {
        let after = history(&c, *j);
        assert_eq!(
            after, before[j],
            "job {j}'s report is the one written when it ended"
        );
    }
    let out = ok(c.cmd(&["jobs", "--json"]).output().unwrap());
    let listed: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 3, "every job is still in the records");
    assert!(listed.iter().all(|j| j["state"] == "succeeded"));
    let with_report = listed
        .iter()
        .filter(|j| j["report"]["job_id"] == j["job"])
        .count();
    assert_eq!(with_report, 2);

    // The restarted coordinator serves the kept report on the same page.
    let (addr, token) = web(&c);
    let r = get(&addr, &format!("/jobs/{}?token={token}", jobs[2]), None);
    assert_eq!(r.status, 200);
    let launched = before[&jobs[2]]["attempts"]["launched"].as_u64().unwrap() as usize;
    assert_eq!(r.body.matches("class=\"attempt\"").count(), launched);
}

/// The web pages' address and `key`'s user's token.
fn web_as(c: &Cluster, key: &std::path::Path) -> (String, String) {
    let out = ok(c.cmd(&["web"]).arg("--user-key").arg(key).output().unwrap());
    let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let rest = url.strip_prefix("https://").unwrap();
    SITE_TLS.with(|t| *t.borrow_mut() = Some(client_tls(c)));
    let (addr, token) = rest.split_once("/?token=").unwrap();
    (addr.to_owned(), token.to_owned())
}

#[test]
fn a_users_token_shows_only_what_they_may_see() {
    let dir = tempfile::tempdir().unwrap();
    let c = Cluster::up(dir.path(), 1, "");
    let data = dir.path().join("words.txt");
    std::fs::write(&data, "a b a\n").unwrap();
    put(&c, &data, "words", "1m", "1");
    for u in ["alice", "bob"] {
        ok(c.cmd(&["user", "add", u]).output().unwrap());
    }
    let (alice, bob) = (c.dir.join("users/alice.key"), c.dir.join("users/bob.key"));
    let mut put = c.cmd(&["put"]);
    ok(put
        .arg("--user-key")
        .arg(&alice)
        .arg(&data)
        .args(["--dataset", "hers"])
        .output()
        .unwrap());
    let key = alice.to_str().unwrap();
    let wc = [
        "--user-key",
        key,
        "wordcount",
        "--input",
        "hers",
        "--output",
        "counts",
    ];
    ok(c.submit(&wc).output().unwrap());
    let job = wordcount(&c, "words", "admins-counts").to_string();

    let (addr, a) = web_as(&c, &alice);
    let page =
        |token: &str, path: &str| get(&addr, path, Some(&format!("Authorization: Bearer {token}")));
    let datasets = page(&a, "/datasets").body;
    assert!(
        datasets.contains("/datasets/hers\"") && !datasets.contains("/datasets/words\""),
        "{datasets}"
    );
    assert_eq!(page(&a, "/datasets/words").status, 404);
    assert_eq!(page(&a, "/datasets/hers").status, 200);
    assert_eq!(page(&a, "/workers").status, 403);
    assert_eq!(page(&a, "/metrics").status, 403);
    let jobs = page(&a, "/").body;
    assert!(jobs.contains("counts") && !jobs.contains(&job), "{jobs}");
    assert_eq!(page(&a, &format!("/jobs/{job}")).status, 404);
    // Bob sees none of it; an admin sees everything.
    let (_, b) = web_as(&c, &bob);
    assert!(!page(&b, "/datasets").body.contains("hers"));
    assert!(!page(&b, "/").body.contains("counts"));
    let (_, admin) = web(&c);
    assert!(page(&admin, "/").body.contains(&job));
    assert_eq!(page(&admin, "/workers").status, 200);
    // A removed user's token opens nothing.
    ok(c.cmd(&["user", "rm", "alice"]).output().unwrap());
    assert_eq!(page(&a, "/datasets").status, 401);
}
