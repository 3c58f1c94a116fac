//! The data plane end to end: a server and its clients.

use std::io::{Read, Write};
use std::net::TcpListener;

use sluice_formats::spill::{self, SpillFile};

use super::client::connect;
use super::frame::secret_bytes;
use super::*;
use crate::auth::Secret;
use crate::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

fn secret() -> Secret {
    Secret::new(b"0123456789abcdef0123").unwrap()
}

fn server() -> (String, tempfile::TempDir, Layout) {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::create(dir.path()).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    serve(l, layout.clone(), secret(), None);
    (addr, dir, layout)
}

#[test]
fn blocks_round_trip_and_bad_ids_are_refused() {
    let (addr, _d, layout) = server();
    let data = b"hello\nworld\n".to_vec();
    let crc = crc32c::crc32c(&data);
    write_block(&addr, &secret(), "b1", &mut &data[..], 12, crc).unwrap();
    assert_eq!(std::fs::read(layout.block("b1")).unwrap(), data);
    let mut out = Vec::new();
    read_block(&addr, &secret(), "b1", 12, crc, &mut out).unwrap();
    assert_eq!(out, data);
    let e = write_block(&addr, &secret(), "../x", &mut &data[..], 12, crc).unwrap_err();
    assert!(e.to_string().contains("invalid block id"), "{e}");
    let e = write_block(&addr, &secret(), "b2", &mut &data[..], 12, crc ^ 1).unwrap_err();
    assert!(e.to_string().contains("crc"), "{e}");
    assert!(!layout.block("b2").exists());
}

#[test]
fn a_checked_stream_hands_out_only_chunks_that_pass() {
    let (addr, _d, layout) = server();
    // Three chunks and a bit.
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    let (len, crc) = (data.len() as u64, crc32c::crc32c(&data));
    write_block(&addr, &secret(), "b1", &mut &data[..], len, crc).unwrap();
    let read_all = |want_crc| -> (Vec<u8>, Result<()>) {
        let mut s = open_checked_stream(&addr, &secret(), "b1", len, want_crc).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 10_000];
        loop {
            match s.read_checked(&mut buf) {
                Ok(0) => return (out, Ok(())),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => return (out, Err(e)),
            }
        }
    };
    let (got, end) = read_all(crc);
    end.unwrap();
    assert!(got == data);
    // Another length than the catalog's: that copy is damaged.
    let e = open_checked_stream(&addr, &secret(), "b1", len + 1, crc)
        .err()
        .unwrap();
    assert!(matches!(e, ClusterError::Damaged { .. }), "{e}");
    // A byte flipped on disk in the second chunk: the first chunk is
    // handed out, nothing of the second.
    let path = layout.block("b1");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[70_000] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let (got, end) = read_all(crc);
    let e = end.unwrap_err();
    assert!(e.to_string().contains("chunk 1"), "{e}");
    assert!(matches!(e, ClusterError::Damaged { .. }));
    assert_eq!(got.len(), 64 << 10);
    assert!(got[..] == data[..got.len()]);
    // A stream that failed hands out nothing more.
    let mut s = open_checked_stream(&addr, &secret(), "b1", len, crc).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    assert_eq!(s.read_checked(&mut buf).unwrap(), 64 << 10);
    assert!(s.read_checked(&mut buf).is_err());
    assert!(s.read_checked(&mut buf).is_err());
}

#[test]
fn a_captured_request_cannot_be_replayed_or_altered() {
    let (addr, _d, layout) = server();
    std::fs::write(layout.block("b1"), b"data").unwrap();
    let send = |wire: &[u8]| -> String {
        let mut s = connect(&addr).unwrap();
        s.write_all(wire).unwrap();
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).into_owned()
    };
    // A real request, as a reader sends it, captured and sent twice.
    let req = Request::Stats { since: 0 };
    let wire = req.encode(&secret_bytes(&secret()));
    assert!(!send(&wire).contains("refused"));
    assert!(send(&wire).contains("replayed request refused"));
    // Altered in its body (another time window asked for): the MAC fails.
    let mut other = Request::Stats { since: 7 }.encode(&secret_bytes(&secret()));
    let body_at = 10 + 8 + 16;
    other[body_at..body_at + 8].copy_from_slice(&0u64.to_le_bytes());
    assert!(send(&other).contains("unauthenticated"));
}

#[test]
fn unauthenticated_requests_are_refused() {
    let (addr, _d, layout) = server();
    std::fs::write(layout.block("b1"), b"secret data").unwrap();
    let wrong = Secret::new(b"not-the-cluster-secret").unwrap();
    let e = read_block(&addr, &wrong, "b1", 11, 0, &mut Vec::new()).unwrap_err();
    assert!(e.to_string().contains("unauthenticated"), "{e}");
}

#[test]
fn a_link_probe_sends_what_it_says_and_needs_the_secret() {
    let (from, _d1, _) = server();
    let (to, _d2, _) = server();
    let secs = probe_link(&from, &to, &secret(), 4 << 20).unwrap();
    assert!(secs > 0.0);
    sink(&to, &secret(), 1 << 20).unwrap();
    let wrong = Secret::new(b"not-the-cluster-secret").unwrap();
    let e = probe_link(&from, &to, &wrong, 1 << 20).unwrap_err();
    assert!(e.to_string().contains("unauthenticated"), "{e}");
    let e = sink(&to, &wrong, 1 << 20).unwrap_err();
    assert!(e.to_string().contains("unauthenticated"), "{e}");
    // A target nobody serves: the error names it.
    let gone = TcpListener::bind("127.0.0.1:0").unwrap();
    let gone_addr = gone.local_addr().unwrap().to_string();
    drop(gone);
    let e = probe_link(&from, &gone_addr, &secret(), 1 << 20).unwrap_err();
    assert!(e.to_string().contains(&gone_addr), "{e}");
}

#[test]
fn fetches_need_the_jobs_token() {
    let (addr, d, layout) = server();
    std::fs::create_dir_all(layout.shuffle_dir(7)).unwrap();
    let mut w = spill::SpillWriter::create(&layout.map_output(7, 0, 0), 2).unwrap();
    w.append(0, b"a", b"1").unwrap();
    w.append(1, b"b", b"2").unwrap();
    w.finish().unwrap();
    let req = Request::Fetch {
        job: 7,
        map: 0,
        attempt: 0,
        part: 1,
    };
    let out = d.path().join("got.run");
    // Another job's token, or the secret itself, does not sign job 7's fetches.
    let e = fetch(
        &addr,
        &secret().job_token(8),
        &req,
        &out,
        &Default::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("unauthenticated"), "{e}");
    fetch(
        &addr,
        &secret().job_token(7),
        &req,
        &out,
        &Default::default(),
    )
    .unwrap();
    let f = SpillFile::open(&out).unwrap();
    let mut r = f.reader(0);
    assert!(r.advance().unwrap());
    assert_eq!((r.key(), r.value()), (&b"b"[..], &b"2"[..]));
    assert!(!r.advance().unwrap());
}

/// A fetch stopped before its first block (its attempt was killed)
/// still counts the bytes that reached this host: the kernel's count,
/// here at least the answer's header, which the fetch read before it
/// saw the stop.
#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn a_stopped_fetch_counts_the_bytes_that_crossed() {
    let (addr, d, layout) = server();
    std::fs::create_dir_all(layout.shuffle_dir(7)).unwrap();
    let path = layout.map_output(7, 0, 0);
    let mut w = spill::SpillWriter::create(&path, 1).unwrap();
    for i in 0..100_000u32 {
        w.append(0, &i.to_be_bytes(), &[7; 40]).unwrap();
    }
    w.finish().unwrap();
    let req = Request::Fetch {
        job: 7,
        map: 0,
        attempt: 0,
        part: 0,
    };
    let watch = FetchWatch::default();
    watch.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let e = fetch(
        &addr,
        &secret().job_token(7),
        &req,
        &d.path().join("x"),
        &watch,
    )
    .unwrap_err();
    assert!(e.to_string().contains("stopped"), "{e}");
    let got = watch.received.into_inner();
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(got > 0 && got <= size + 64, "{got} of {size}");
}

#[test]
fn corrupt_map_output_fails_the_fetch() {
    let (addr, d, layout) = server();
    std::fs::create_dir_all(layout.shuffle_dir(7)).unwrap();
    let path = layout.map_output(7, 0, 0);
    let mut w = spill::SpillWriter::create(&path, 1).unwrap();
    w.append(0, b"key", b"value").unwrap();
    w.finish().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let req = Request::Fetch {
        job: 7,
        map: 0,
        attempt: 0,
        part: 0,
    };
    let e = fetch(
        &addr,
        &secret().job_token(7),
        &req,
        &d.path().join("x"),
        &Default::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("checksum"), "{e}");
}

/// Block requests as an admin (the secret), the holder of a capability
/// for the block, a user with another block's or mode's capability, one
/// with only their user key, one whose capability expired, and nobody.
#[test]
fn a_block_opens_only_to_the_secret_or_its_capability() {
    use crate::capability::{capability_key, Capability, Mode};
    let (addr, _d, layout) = server();
    let data = b"private words\n".to_vec();
    let (len, crc) = (data.len() as u64, crc32c::crc32c(&data));
    write_block(&addr, &secret(), "b1", &mut &data[..], len, crc).unwrap();
    let now = crate::now_ms();
    let cap = |user: &str, block: &str, mode| Capability::issue(&secret(), user, block, mode, now);
    let read = |c: &Capability| read_block_capable(&addr, c, "b1", (len, crc), &mut Vec::new());
    // The owner's capability reads it, whole.
    let mut out = Vec::new();
    let owner = cap("alice", "b1", Mode::Read);
    read_block_capable(&addr, &owner, "b1", (len, crc), &mut out).unwrap();
    assert_eq!(out, data);
    // Another block's, another mode's, a forged user's, an expired one.
    assert!(read(&cap("bob", "b2", Mode::Read)).is_err());
    assert!(read(&cap("bob", "b1", Mode::Write)).is_err());
    let mut forged = cap("alice", "b1", Mode::Read);
    forged.user = "bob".into();
    assert!(read(&forged).is_err());
    let expiry = now - 1;
    let expired = Capability {
        user: "alice".into(),
        expiry_ms: expiry,
        key: capability_key(&secret(), "alice", "b1", Mode::Read, expiry),
    };
    let e = read(&expired).unwrap_err();
    assert!(e.to_string().contains("expired"), "{e}");
    // A user's key is not the secret.
    let user = crate::users::user_key(&secret(), "alice", "00");
    assert!(read_block(&addr, &user, "b1", len, crc, &mut Vec::new()).is_err());
    assert!(stats(&addr, &user, 0).is_err());
    // A write capability writes its block only.
    let w = cap("alice", "b3", Mode::Write);
    write_block_capable(&addr, &w, "b3", &mut &data[..], len, crc).unwrap();
    assert_eq!(std::fs::read(layout.block("b3")).unwrap(), data);
    assert!(write_block_capable(&addr, &w, "b4", &mut &data[..], len, crc).is_err());
    let r = cap("alice", "b4", Mode::Read);
    assert!(write_block_capable(&addr, &r, "b4", &mut &data[..], len, crc).is_err());
    assert!(!layout.block("b4").exists());
    // A capability opens no other request (a stats request carrying one).
    let wire = Request::Stats { since: 0 }.encode_capable(&cap("alice", "b1", Mode::Read));
    let mut s = connect(&addr).unwrap();
    s.write_all(&wire).unwrap();
    let mut status = [0u8; 1];
    s.read_exact(&mut status).unwrap();
    assert_ne!(status[0], 0, "refused");
    // Nobody: garbage is refused and changes nothing.
    let mut s = connect(&addr).unwrap();
    s.write_all(b"SLDP\x02\x01\x05\x00\x00\x00hello").unwrap();
    let mut status = [0u8; 1];
    let _ = s.read_exact(&mut status);
    assert_eq!(std::fs::read(layout.block("b1")).unwrap(), data);
}
