//! TLS on every connection: what crosses loopback while data is put,
//! counted and got holds none of the data's words (and does, as the
//! check's control, on an `--insecure` cluster); garbage sent to every
//! port before a handshake changes nothing; only a worker's certificate
//! joins as a worker; a client of another CA is refused.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// Words no other test writes: `pre` and a number of this run.
pub(crate) fn words(pre: &str) -> Vec<String> {
    let n = std::process::id() as u64 * 1_000_003 + sluice_proto::now_ms() % 1_000_003;
    ["quokka", "zanzibar", "marmalade"]
        .iter()
        .map(|w| format!("{pre}{w}{n:x}"))
        .collect()
}

/// tcpdump recording loopback into a file, until dropped.
pub(crate) struct Capture {
    child: Child,
    file: PathBuf,
}

impl Capture {
    /// Starts recording; `None` (said why) when tcpdump is absent.
    pub(crate) fn start(dir: &Path) -> Option<Capture> {
        let file = dir.join("lo.pcap");
        let child = Command::new("tcpdump")
            .args(["-i", "lo", "-U", "-s", "0", "-w"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                eprintln!("skipped: tcpdump does not run ({e}); scripts/test.sh installs it");
                return None;
            }
        };
        // It says so on stderr once it listens.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        assert!(line.contains("listening on lo"), "tcpdump: {line}");
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        Some(Capture { child, file })
    }

    /// Stops recording; the bytes recorded.
    pub(crate) fn stop(mut self) -> Vec<u8> {
        signal(self.child.id(), "INT");
        self.child.wait().unwrap();
        std::fs::read(&self.file).unwrap()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Puts a file of `words`, counts them on the cluster and gets the counts
/// while tcpdump records loopback; the recording, and the job's summary.
fn captured_round(c: &Cluster, dir: &Path, words: &[String]) -> Option<(Vec<u8>, String)> {
    let data = dir.join("secret-words.txt");
    let line = format!("{} {} {}\n", words[0], words[1], words[2]);
    std::fs::write(&data, line.repeat(20_000)).unwrap();
    let capture = Capture::start(dir)?;
    put(c, &data, "private", "1MB", "1");
    let out = ok(c
        .submit(&["wordcount", "--input", "private", "--output", "counts"])
        .output()
        .unwrap());
    let summary = String::from_utf8_lossy(&out.stderr).into_owned();
    let got = dir.join("got");
    get(c, "counts", &got);
    let counts = String::from_utf8(concat_parts(&got)).unwrap();
    for w in words {
        assert!(counts.contains(&format!("{w}\t20000")), "{counts}");
    }
    Some((capture.stop(), summary))
}

#[test]
fn a_capture_of_loopback_holds_none_of_the_words_and_does_with_insecure() {
    let d = tempfile::tempdir().unwrap();
    let c = Cluster::up(&d.path().join("tls"), 2, "");
    let secret = words("tls");
    let Some((pcap, summary)) = captured_round(&c, &c.dir, &secret) else {
        return;
    };
    assert!(pcap.len() > 1_000_000, "the capture saw the transfers");
    for w in &secret {
        assert!(!contains(&pcap, w), "{w} crossed loopback in clear");
    }
    assert!(!summary.contains("insecure"), "{summary}");
    drop(c);

    // The control: the same on an --insecure cluster shows the words,
    // and the job's summary and the web pages say it is insecure.
    let c = Cluster::up_args(&d.path().join("plain"), 2, "", "", &["--insecure"]);
    let clear = words("plain");
    let (pcap, summary) = captured_round(&c, &c.dir, &clear).unwrap();
    for w in &clear {
        assert!(
            contains(&pcap, w),
            "{w} not in the capture of an --insecure cluster"
        );
    }
    assert!(summary.contains("insecure plaintext"), "{summary}");
    let url = String::from_utf8(ok(c.cmd(&["web"]).output().unwrap()).stdout).unwrap();
    let addr = url.trim().strip_prefix("http://").unwrap();
    let (addr, token) = addr.split_once("/?token=").unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /?token={token} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut page = String::new();
    std::io::Read::read_to_string(&mut s, &mut page).unwrap();
    assert!(page.contains("id=\"insecure\""), "{page}");
}

/// Sends `bytes` to `addr` and leaves; returns whether it could connect.
fn throw(addr: &str, bytes: &[u8]) {
    let mut s = TcpStream::connect(addr).unwrap();
    let _ = s.write_all(bytes);
}

#[test]
fn garbage_before_a_handshake_changes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let c = Cluster::up(d.path(), 1, "");
    let j = c.json();
    let ports = [
        j["coordinator"].as_str().unwrap().to_owned(),
        j["http"].as_str().unwrap().to_owned(),
        j["workers"][0]["addr"].as_str().unwrap().to_owned(),
    ];
    // A peer that connects and says nothing holds no one up.
    let silent: Vec<TcpStream> = ports
        .iter()
        .map(|a| TcpStream::connect(a).unwrap())
        .collect();
    let plain_request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    let data_request = b"SLDP\x01\x01\x00\x00\x00\x00".to_vec();
    let noise: Vec<u8> = (0..70_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    // A TLS record header promising more than it sends.
    let short_record = b"\x16\x03\x01\xff\xff\x01\x00".to_vec();
    for addr in &ports {
        for bytes in [&plain_request, &data_request, &noise, &short_record] {
            throw(addr, bytes);
        }
    }
    let data = d.path().join("words.txt");
    std::fs::write(&data, "after the garbage\n".repeat(1000)).unwrap();
    put(&c, &data, "words", "1MB", "1");
    let got = d.path().join("got");
    get(&c, "words", &got);
    assert_eq!(std::fs::read(&got).unwrap(), std::fs::read(&data).unwrap());
    drop(silent);
    let log = std::fs::read_to_string(c.dir.join("worker-0.log")).unwrap();
    assert!(log.contains("data connection refused"), "{log}");
}

#[test]
fn only_a_worker_certificate_joins_as_a_worker() {
    let d = tempfile::tempdir().unwrap();
    let c = Cluster::up(d.path(), 1, "");
    let addr = c.json()["coordinator"].as_str().unwrap().to_owned();
    for (name, role) in [("not-a-worker", "client"), ("coordinator-2", "coordinator")] {
        let log = d.path().join(format!("{name}.log"));
        let mut w = Killed(
            sluice()
                .args(["worker", "--coordinator", &addr, "--data-dir"])
                .arg(d.path().join(name))
                .args(tls_flags(&c, name, role))
                .arg("--secret-file")
                .arg(c.dir.join("secret"))
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap(),
        );
        let t = Instant::now();
        let why = format!("Register needs a worker certificate; the peer's role is {role}");
        while !std::fs::read_to_string(&log).unwrap().contains(&why) {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "{}",
                std::fs::read_to_string(&log).unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = w.0.kill();
    }
    let status =
        String::from_utf8(ok(c.cmd(&["cluster", "status"]).output().unwrap()).stdout).unwrap();
    assert_eq!(c.json()["workers"].as_array().unwrap().len(), 1, "{status}");
}

#[test]
fn a_client_of_another_ca_is_refused_and_one_without_certificates_told_how() {
    let d = tempfile::tempdir().unwrap();
    let c = Cluster::up(d.path(), 1, "");
    let other = d.path().join("other");
    tls_flags_in(&other, "client", "client");
    let e = fails(
        c.cmd(&[
            "ls",
            "--wait-coordinator",
            "0s",
            "--tls-dir",
            other.join("tls").to_str().unwrap(),
        ])
        .output()
        .unwrap(),
    );
    assert!(e.contains("certificate"), "{e}");
    // No certificate at all: the error says what to pass.
    let addr = c.json()["coordinator"].as_str().unwrap().to_owned();
    let e = fails(
        sluice()
            .args(["ls", "--coordinator", &addr, "--cluster"])
            .arg(d.path().join("none"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("--tls-dir") && e.contains("--insecure"), "{e}");
    // Its data plane refuses the other CA's client too.
    let worker = c.json()["workers"][0]["addr"].as_str().unwrap().to_owned();
    let tcp = TcpStream::connect(&worker).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let theirs = sluice_proto::tls::Tls::load(&sluice_proto::tls::Files::in_dir(
        &other.join("tls"),
        "client",
    ))
    .unwrap();
    let e = sluice_proto::tls::stream::Conn::client(tcp, &worker, Some(&theirs)).unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
}
