use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use super::ca::Ca;
use super::stream::Conn;
use super::*;

fn hosts() -> Vec<String> {
    vec!["127.0.0.1".into(), "localhost".into()]
}

fn tls(ca: &Ca, role: Role) -> Tls {
    let (cert, key) = ca.issue(&hosts(), role).unwrap();
    Tls::from_pem(ca.cert_pem().as_bytes(), cert.as_bytes(), key.as_bytes()).unwrap()
}

/// Serves one connection on a thread: echoes what it reads, upper-cased;
/// returns the server's own result.
fn echo_once(server: Tls) -> (String, std::thread::JoinHandle<Result<()>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let (tcp, peer) = l.accept().unwrap();
        let mut c = Conn::server(tcp, &peer.to_string(), Some(&server))?;
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf)
            .map_err(|e| ClusterError::net("read", "peer", e))?;
        c.write_all(&buf.to_ascii_uppercase()).unwrap();
        c.close();
        Ok(())
    });
    (addr, h)
}

fn dial(addr: &str, client: &Tls) -> Result<String> {
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut c = Conn::client(tcp, addr, Some(client))?;
    c.write_all(b"hello").unwrap();
    c.flush().unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out)
        .map_err(|e| ClusterError::net("read", addr, e))?;
    Ok(out)
}

#[test]
fn a_certificate_carries_its_role() {
    let ca = Ca::new().unwrap();
    for role in [Role::Coordinator, Role::Worker, Role::Client] {
        let (cert, _) = ca.issue(&hosts(), role).unwrap();
        let der = CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
        assert_eq!(roles(&der), vec![role]);
    }
    assert!(roles(b"not a certificate").is_empty());
}

#[test]
fn peers_of_one_ca_talk_in_tls() {
    let ca = Ca::new().unwrap();
    let (addr, h) = echo_once(tls(&ca, Role::Worker));
    assert_eq!(dial(&addr, &tls(&ca, Role::Client)).unwrap(), "HELLO");
    h.join().unwrap().unwrap();
}

#[test]
fn a_client_of_another_ca_is_refused() {
    let (ours, theirs) = (Ca::new().unwrap(), Ca::new().unwrap());
    let (addr, h) = echo_once(tls(&ours, Role::Worker));
    let err = dial(&addr, &tls(&theirs, Role::Client)).unwrap_err();
    assert!(err.to_string().contains("TLS handshake"), "{err}");
    let served = h.join().unwrap().unwrap_err();
    assert!(served.to_string().contains("TLS handshake"), "{served}");
}

#[test]
fn an_expired_certificate_is_refused() {
    let ca = Ca::new().unwrap();
    let (cert, key) = ca.issue_expired(&hosts(), Role::Client).unwrap();
    let old = Tls::from_pem(ca.cert_pem().as_bytes(), cert.as_bytes(), key.as_bytes()).unwrap();
    let (addr, h) = echo_once(tls(&ca, Role::Worker));
    assert!(dial(&addr, &old).is_err());
    let served = h.join().unwrap().unwrap_err();
    assert!(
        served.to_string().to_lowercase().contains("expired"),
        "{served}"
    );
}

#[test]
fn a_server_must_be_named_in_its_certificate() {
    let ca = Ca::new().unwrap();
    let (cert, key) = ca
        .issue(&["elsewhere.example".into()], Role::Worker)
        .unwrap();
    let server = Tls::from_pem(ca.cert_pem().as_bytes(), cert.as_bytes(), key.as_bytes()).unwrap();
    let (addr, h) = echo_once(server);
    let err = dial(&addr, &tls(&ca, Role::Client)).unwrap_err();
    assert!(err.to_string().contains("not valid for name"), "{err}");
    let _ = h.join().unwrap();
}

#[test]
fn bad_files_get_clear_errors() {
    let ca = Ca::new().unwrap();
    let (cert, key) = ca.issue(&hosts(), Role::Client).unwrap();
    let ca_pem = ca.cert_pem().as_bytes();
    let err = Tls::from_pem(b"", cert.as_bytes(), key.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("no CA certificate"), "{err}");
    let err = Tls::from_pem(ca_pem, b"junk", key.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("no certificate"), "{err}");
    let err = Tls::from_pem(ca_pem, cert.as_bytes(), b"junk").unwrap_err();
    assert!(err.to_string().contains("private key"), "{err}");
}

#[test]
fn keys_are_written_private_and_a_ca_is_never_replaced() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::init(dir.path()).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir.path().join("ca.key")), 0o600);
    assert!(Ca::init(dir.path())
        .unwrap_err()
        .to_string()
        .contains("already holds a CA"));
    let files = Ca::load(dir.path())
        .unwrap()
        .issue_to(&hosts(), Role::Worker, &dir.path().join("w1"))
        .unwrap();
    assert_eq!(files, Files::in_dir(dir.path(), "w1"));
    assert_eq!(mode(&files.key), 0o600);
    let loaded = Tls::load(&files).unwrap();
    let (addr, h) = echo_once(loaded);
    assert_eq!(dial(&addr, &tls(&ca, Role::Client)).unwrap(), "HELLO");
    h.join().unwrap().unwrap();
}

#[test]
fn server_names_come_from_addresses() {
    assert_eq!(server_name("127.0.0.1:7000").unwrap().to_str(), "127.0.0.1");
    assert_eq!(
        server_name("node-1.example:7000").unwrap().to_str(),
        "node-1.example"
    );
    assert_eq!(server_name("[::1]:7000").unwrap().to_str(), "::1");
}

/// A connected TLS pair: (client, server).
fn pair() -> (Conn, Conn) {
    let ca = Ca::new().unwrap();
    let server = tls(&ca, Role::Worker);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let (tcp, peer) = l.accept().unwrap();
        Conn::server(tcp, &peer.to_string(), Some(&server)).unwrap()
    });
    let client = Conn::client(
        TcpStream::connect(&addr).unwrap(),
        &addr,
        Some(&tls(&ca, Role::Client)),
    )
    .unwrap();
    (client, h.join().unwrap())
}

/// Bytes a receiver's kernel holds for it, waiting until at least `min`.
fn wait_for_bytes(c: &Conn, min: usize) {
    let mut peek = vec![0u8; 4 << 20];
    while c.tcp().peek(&mut peek).unwrap() < min {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn one_large_write_is_taken_whole() {
    let (mut client, mut server) = pair();
    let data = vec![7u8; 256 << 10];
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        client.read_to_end(&mut got).map(|_| got)
    });
    // rustls' default limit would take 64 KiB of it.
    assert_eq!(server.write(&data).unwrap(), data.len());
    server.close();
    drop(server);
    assert_eq!(reader.join().unwrap().unwrap(), data);
}

#[test]
fn a_read_takes_every_record_already_received() {
    let (mut client, mut server) = pair();
    let data: Vec<u8> = (0..(64u32 << 10) + 100).map(|i| (i % 251) as u8).collect();
    client.write_all(&data).unwrap();
    client.flush().unwrap();
    // Five records, each 22 bytes over its plaintext, are all in.
    wait_for_bytes(&server, data.len() + 5 * 22);
    let mut buf = vec![0u8; 256 << 10];
    let n = server.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], &data[..], "one read, not one record's 16 KiB");
}
