//! The client against a real etcd (`testing::EtcdServer`).

use std::time::{Duration, Instant};

use sluice_etcd::testing::EtcdServer;
use sluice_etcd::{blocking, Compare, Etcd, EtcdError, EventKind, Op, Txn};

async fn client(server: &EtcdServer) -> Etcd {
    Etcd::connect(&[server.url()]).await.unwrap()
}

fn keys(kvs: &[sluice_etcd::Kv]) -> Vec<&[u8]> {
    kvs.iter().map(|kv| kv.key.as_slice()).collect()
}

#[tokio::test]
async fn put_get_get_prefix_delete_prefix() {
    let server = EtcdServer::start();
    let etcd = client(&server).await;
    let r1 = etcd.put(b"job/a", b"1", None).await.unwrap();
    let r2 = etcd.put(b"job/b", b"2", None).await.unwrap();
    etcd.put(b"jobs", b"not under job/", None).await.unwrap();
    assert!(r2 > r1);

    let (rev, kv) = etcd.get(b"job/a").await.unwrap();
    let kv = kv.unwrap();
    assert!(rev >= r2);
    assert_eq!(
        (
            kv.value.as_slice(),
            kv.create_revision,
            kv.mod_revision,
            kv.version
        ),
        (&b"1"[..], r1, r1, 1)
    );
    assert_eq!(etcd.get(b"job/none").await.unwrap().1, None);

    let (_, kvs) = etcd.get_prefix(b"job/").await.unwrap();
    assert_eq!(keys(&kvs), [&b"job/a"[..], b"job/b"]);

    etcd.delete_prefix(b"job/").await.unwrap();
    assert!(etcd.get_prefix(b"job/").await.unwrap().1.is_empty());
    assert!(
        etcd.get(b"jobs").await.unwrap().1.is_some(),
        "a sibling outside the prefix stays"
    );
}

#[tokio::test]
async fn get_prefix_reads_past_one_page() {
    let server = EtcdServer::start();
    let etcd = client(&server).await;
    let n = 2500;
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let success = chunk
            .iter()
            .map(|i| Op::Put {
                key: format!("p/{i:05}").into_bytes(),
                value: vec![1],
                lease: None,
            })
            .collect();
        etcd.txn(Txn {
            success,
            ..Txn::default()
        })
        .await
        .unwrap();
    }
    let (_, kvs) = etcd.get_prefix(b"p/").await.unwrap();
    assert_eq!(kvs.len(), n);
    assert!(
        kvs.windows(2).all(|w| w[0].key < w[1].key),
        "in key order, no repeats"
    );
}

#[tokio::test]
async fn txn_on_create_revision_succeeds_then_fails() {
    let server = EtcdServer::start();
    let etcd = client(&server).await;
    let create_once = |value: &[u8]| Txn {
        compare: vec![Compare::CreateRevision {
            key: b"leader".to_vec(),
            equals: 0,
        }],
        success: vec![Op::Put {
            key: b"leader".to_vec(),
            value: value.to_vec(),
            lease: None,
        }],
        failure: vec![Op::Get {
            key: b"leader".to_vec(),
        }],
    };
    let first = etcd.txn(create_once(b"one")).await.unwrap();
    assert!(first.succeeded);
    assert!(first.gets.is_empty());

    let second = etcd.txn(create_once(b"two")).await.unwrap();
    assert!(!second.succeeded);
    assert_eq!(
        second.revision, first.revision,
        "a failed txn writes nothing"
    );
    assert_eq!(second.gets.len(), 1);
    assert_eq!(second.gets[0][0].value, b"one");
    assert_eq!(second.gets[0][0].create_revision, first.revision);

    let (_, kv) = etcd.get(b"leader").await.unwrap();
    let at = kv.unwrap().mod_revision;
    let guarded = Txn {
        compare: vec![
            Compare::ModRevision {
                key: b"leader".to_vec(),
                equals: at,
            },
            Compare::Value {
                key: b"leader".to_vec(),
                equals: b"one".to_vec(),
            },
            Compare::Version {
                key: b"leader".to_vec(),
                equals: 1,
            },
        ],
        success: vec![
            Op::DeletePrefix {
                prefix: b"lead".to_vec(),
            },
            Op::GetPrefix {
                prefix: b"lead".to_vec(),
            },
        ],
        failure: vec![],
    };
    let third = etcd.txn(guarded).await.unwrap();
    assert!(third.succeeded);
    assert_eq!(third.gets, vec![Vec::new()]);
}

#[tokio::test]
async fn a_lease_kept_alive_then_let_expire_takes_its_key() {
    let server = EtcdServer::start();
    let etcd = client(&server).await;
    let lease = etcd.grant(Duration::from_secs(1)).await.unwrap();
    assert_eq!(
        lease.ttl,
        Duration::from_secs(1),
        "the test server's minimum TTL is 1 s"
    );
    etcd.put(b"alive", b"x", Some(lease.id)).await.unwrap();
    let mut keeper = etcd.keeper(lease.id).await.unwrap();
    // Kept alive for three TTLs: the key stays.
    let until = Instant::now() + 3 * lease.ttl;
    while Instant::now() < until {
        assert_eq!(keeper.keep_alive().await.unwrap(), lease.ttl);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(etcd.get(b"alive").await.unwrap().1.unwrap().lease, lease.id);
    // Let go: the key goes within the TTL and etcd's 500 ms expiry tick.
    let let_go = Instant::now();
    while etcd.get(b"alive").await.unwrap().1.is_some() {
        assert!(
            let_go.elapsed() < Duration::from_secs(5),
            "the key outlived its lease"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "a 1 s lease's key went {:?} after its last renewal",
        let_go.elapsed()
    );
    match keeper.keep_alive().await {
        Err(EtcdError::LeaseExpired { lease: id }) => assert_eq!(id, lease.id),
        other => panic!("expected LeaseExpired, got {other:?}"),
    }
    assert!(matches!(
        etcd.keeper(lease.id).await,
        Err(EtcdError::LeaseExpired { .. })
    ));
    assert!(matches!(
        etcd.revoke(lease.id).await,
        Err(EtcdError::LeaseExpired { .. })
    ));
}

#[tokio::test]
async fn a_watch_from_the_past_sees_puts_and_deletes_in_order() {
    let server = EtcdServer::start();
    let etcd = client(&server).await;
    let start = etcd.put(b"w/a", b"1", None).await.unwrap();
    etcd.put(b"w/b", b"2", None).await.unwrap();
    etcd.put(b"other", b"-", None).await.unwrap();
    etcd.delete_prefix(b"w/a").await.unwrap();

    let mut watch = etcd.watch_prefix(b"w/", start).await.unwrap();
    etcd.put(b"w/c", b"3", None).await.unwrap();
    let last = etcd.delete_prefix(b"w/").await.unwrap();

    let mut seen = Vec::new();
    let mut revisions = Vec::new();
    while revisions.last() != Some(&last) {
        let batch = tokio::time::timeout(Duration::from_secs(5), watch.next())
            .await
            .unwrap()
            .unwrap();
        for e in batch.events {
            revisions.push(e.kv.mod_revision);
            seen.push((e.kind, String::from_utf8(e.kv.key).unwrap()));
        }
    }
    let expected = [
        (EventKind::Put, "w/a"),
        (EventKind::Put, "w/b"),
        (EventKind::Delete, "w/a"),
        (EventKind::Put, "w/c"),
        (EventKind::Delete, "w/b"),
        (EventKind::Delete, "w/c"),
    ];
    let seen: Vec<(EventKind, &str)> = seen.iter().map(|(k, s)| (*k, s.as_str())).collect();
    assert_eq!(seen, expected);
    assert!(revisions.windows(2).all(|w| w[0] <= w[1]));
}

#[tokio::test]
async fn revoking_a_lease_deletes_its_key_and_the_watch_sees_it() {
    let server = EtcdServer::start();
    let etcd = client(&server).await;
    let lease = etcd.grant(Duration::from_secs(30)).await.unwrap();
    let put = etcd
        .put(b"owner/coordinator", b"host:1", Some(lease.id))
        .await
        .unwrap();
    let mut watch = etcd.watch_prefix(b"owner/", put + 1).await.unwrap();
    etcd.revoke(lease.id).await.unwrap();
    let batch = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(batch.events.len(), 1);
    assert_eq!(batch.events[0].kind, EventKind::Delete);
    assert_eq!(batch.events[0].kv.key, b"owner/coordinator");
    assert!(etcd.get(b"owner/coordinator").await.unwrap().1.is_none());
}

#[tokio::test]
async fn a_dead_endpoint_is_a_clear_error_within_seconds() {
    let mut server = EtcdServer::start();
    let url = server.url();
    server.stop();
    let t = Instant::now();
    let e = Etcd::connect(std::slice::from_ref(&url)).await.unwrap_err();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    assert!(matches!(e, EtcdError::Connect { .. }), "{e:?}");
    assert!(e.to_string().contains(&url), "{e}");
}

#[tokio::test]
async fn bad_endpoints_are_refused() {
    let e = Etcd::connect(&["https://127.0.0.1:1".into()])
        .await
        .unwrap_err();
    assert!(matches!(e, EtcdError::Endpoint { .. }), "{e:?}");
    let e = Etcd::connect(&[]).await.unwrap_err();
    assert!(matches!(e, EtcdError::Endpoint { .. }), "{e:?}");
}

#[tokio::test]
async fn a_call_fails_over_to_the_next_endpoint() {
    let dead = EtcdServer::start();
    let live = EtcdServer::start();
    let etcd = Etcd::connect(&[dead.url(), live.url()]).await.unwrap();
    etcd.put(b"k", b"v", None).await.unwrap();
    // A client that has not called yet has no connection to break.
    let fresh = Etcd::connect(&[dead.url(), live.url()]).await.unwrap();
    drop(dead);
    // Its write finds no etcd on the first endpoint: surely not applied
    // there, so sent to the next.
    fresh.put(b"fresh", b"1", None).await.unwrap();
    // The first endpoint was current and is gone: a read moves on to the
    // next one (a write over the broken connection might have been applied,
    // so it is not sent twice; it fails, and the next call moves on).
    let t = Instant::now();
    assert_eq!(
        etcd.get(b"k").await.unwrap().1,
        None,
        "the other cluster's store"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    etcd.put(b"k", b"w", None).await.unwrap();
    assert_eq!(etcd.get(b"k").await.unwrap().1.unwrap().value, b"w");
}

#[tokio::test]
async fn a_paused_etcd_is_a_timeout_not_a_hang() {
    let server = EtcdServer::start();
    let timeout = Duration::from_millis(500);
    let base = client(&server).await;
    // The grant waits on a disk shared with other tests: the default timeout.
    let lease = base.grant(Duration::from_secs(30)).await.unwrap();
    let etcd = base.with_call_timeout(timeout);
    let mut keeper = etcd.keeper(lease.id).await.unwrap();
    server.pause();
    let t = Instant::now();
    let e = etcd.get(b"k").await.unwrap_err();
    assert!(
        matches!(
            e,
            EtcdError::Timeout {
                call: "KV/Range",
                ..
            }
        ),
        "{e:?}"
    );
    let lost = keeper.keep_alive().await.unwrap_err();
    assert!(
        t.elapsed() < 2 * timeout + Duration::from_secs(1),
        "{:?}",
        t.elapsed()
    );
    server.resume();
    assert!(matches!(lost, EtcdError::LeaseLost { .. }), "{lost:?}");
    // The keeper is spent (a late answer could pass for the next one's); a
    // new one renews the lease again.
    assert!(matches!(
        keeper.keep_alive().await,
        Err(EtcdError::LeaseLost { .. })
    ));
    etcd.get(b"k").await.unwrap();
    assert_eq!(
        etcd.keeper(lease.id)
            .await
            .unwrap()
            .keep_alive()
            .await
            .unwrap(),
        lease.ttl
    );
}

fn blocking_round_trip(etcd: &blocking::Etcd) {
    let lock = std::sync::Mutex::new(());
    let _held = lock.lock().unwrap();
    etcd.put(b"b/1", b"one", None).unwrap();
    let out = etcd
        .txn(Txn {
            compare: vec![Compare::Version {
                key: b"b/1".to_vec(),
                equals: 1,
            }],
            success: vec![Op::Put {
                key: b"b/2".to_vec(),
                value: b"two".to_vec(),
                lease: None,
            }],
            failure: vec![],
        })
        .unwrap();
    assert!(out.succeeded);
    let (rev, kvs) = etcd.get_prefix(b"b/").unwrap();
    assert_eq!(rev, out.revision);
    assert_eq!(keys(&kvs), [&b"b/1"[..], b"b/2"]);
    etcd.txn(Txn {
        success: vec![Op::DeletePrefix {
            prefix: b"b/".to_vec(),
        }],
        ..Txn::default()
    })
    .unwrap();
}

#[test]
fn blocking_works_outside_a_runtime() {
    let server = EtcdServer::start();
    let etcd = blocking::Etcd::connect(&[server.url()]).unwrap();
    blocking_round_trip(&etcd);
    let clone = etcd.clone();
    drop(etcd);
    clone.put(b"b/after", b"x", None).unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn blocking_works_inside_a_runtime() {
    let server = EtcdServer::start();
    let etcd = blocking::Etcd::connect(&[server.url()]).unwrap();
    blocking_round_trip(&etcd);
}

#[test]
fn blocking_connect_to_a_dead_endpoint_is_an_error() {
    let mut server = EtcdServer::start();
    server.stop();
    let e = blocking::Etcd::connect(&[server.url()]).unwrap_err();
    assert!(matches!(e, EtcdError::Connect { .. }), "{e:?}");
}

#[tokio::test]
async fn the_empty_prefix_is_every_key() {
    let server = EtcdServer::start();
    let etcd = client(&server).await;
    etcd.put(b"a", b"1", None).await.unwrap();
    etcd.put(b"\xff", b"2", None).await.unwrap();
    let mut watch = etcd.watch_prefix(b"", 1).await.unwrap();
    let (_, kvs) = etcd.get_prefix(b"").await.unwrap();
    assert_eq!(keys(&kvs), [&b"a"[..], b"\xff"]);
    let batch = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(batch.events.len(), 2);
    etcd.delete_prefix(b"").await.unwrap();
    assert!(etcd.get_prefix(b"").await.unwrap().1.is_empty());
}

#[tokio::test]
async fn watches_and_keepers_open_on_the_next_endpoint() {
    let dead = EtcdServer::start();
    let live = EtcdServer::start();
    let urls = [dead.url(), live.url()];
    let (watching, keeping) = (
        Etcd::connect(&urls).await.unwrap(),
        Etcd::connect(&urls).await.unwrap(),
    );
    drop(dead);

    let mut watch = watching.watch_prefix(b"w/", 0).await.unwrap();
    let lease = watching.grant(Duration::from_secs(30)).await.unwrap();
    let mut keeper = keeping.keeper(lease.id).await.unwrap();
    assert_eq!(keeper.keep_alive().await.unwrap(), lease.ttl);

    let put = client(&live).await.put(b"w/x", b"1", None).await.unwrap();
    let batch = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(batch.events[0].kv.mod_revision, put);
}

#[tokio::test]
async fn a_watch_from_a_compacted_revision_says_so() {
    let server = EtcdServer::start();
    let etcd = client(&server).await;
    let first = etcd.put(b"c/k", b"1", None).await.unwrap();
    etcd.put(b"c/k", b"2", None).await.unwrap();
    let third = etcd.put(b"c/k", b"3", None).await.unwrap();
    etcd.compact(third).await.unwrap();
    let watched = async {
        let mut watch = etcd.watch_prefix(b"c/", first).await?;
        watch.next().await
    };
    match tokio::time::timeout(Duration::from_secs(5), watched)
        .await
        .unwrap()
    {
        Err(EtcdError::WatchCompacted {
            start_revision,
            compact_revision,
            ..
        }) => {
            assert_eq!((start_revision, compact_revision), (first, third));
        }
        other => panic!("expected WatchCompacted, got {other:?}"),
    }
    // From the compaction revision on, the watch works.
    let mut watch = etcd.watch_prefix(b"c/", third).await.unwrap();
    let batch = watch.next().await.unwrap();
    assert_eq!(batch.events[0].kv.value, b"3");
}

#[tokio::test]
async fn a_watch_whose_etcd_dies_is_canceled() {
    let mut server = EtcdServer::start();
    let etcd = client(&server).await;
    let mut watch = etcd.watch_prefix(b"d/", 0).await.unwrap();
    server.stop();
    let r = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .unwrap();
    assert!(matches!(r, Err(EtcdError::WatchCanceled { .. })), "{r:?}");
}

#[tokio::test]
async fn an_oversized_txn_is_refused_and_writes_nothing() {
    let server = EtcdServer::start();
    let etcd = client(&server).await;
    // etcd's default --max-txn-ops is 128.
    let success = (0..129)
        .map(|i| Op::Put {
            key: format!("t/{i}").into_bytes(),
            value: vec![],
            lease: None,
        })
        .collect();
    let e = etcd
        .txn(Txn {
            success,
            ..Txn::default()
        })
        .await
        .unwrap_err();
    match &e {
        EtcdError::Rpc {
            call: "KV/Txn",
            code: sluice_etcd::Code::InvalidArgument,
            message,
            ..
        } => {
            assert!(message.contains("too many operations"), "{message}");
        }
        other => panic!("expected etcd's refusal, got {other:?}"),
    }
    assert!(etcd.get_prefix(b"t/").await.unwrap().1.is_empty());
}

#[test]
fn blocking_calls_to_a_paused_etcd_time_out() {
    let server = EtcdServer::start();
    // The write before the pause waits on a disk shared with other tests:
    // the default timeout.
    blocking::Etcd::connect(&[server.url()])
        .unwrap()
        .put(b"k", b"v", None)
        .unwrap();
    let timeout = Duration::from_millis(300);
    let etcd = blocking::Etcd::connect_with(&[server.url()], timeout).unwrap();
    server.pause();
    let t = Instant::now();
    let e = etcd.get_prefix(b"k").unwrap_err();
    let waited = t.elapsed();
    server.resume();
    assert!(matches!(e, EtcdError::Timeout { .. }), "{e:?}");
    assert!(waited < timeout + Duration::from_secs(1), "{waited:?}");
    assert_eq!(etcd.get_prefix(b"k").unwrap().1.len(), 1);
}

#[tokio::test]
async fn a_client_outlives_an_etcd_restart() {
    let mut server = EtcdServer::start();
    let etcd = client(&server).await;
    let put = etcd.put(b"r/k", b"v", None).await.unwrap();
    server.restart();
    let (rev, kv) = etcd.get(b"r/k").await.unwrap();
    assert_eq!(
        (rev, kv.unwrap().mod_revision),
        (put, put),
        "the data survives"
    );
}

#[test]
fn the_handles_move_between_threads_and_tasks() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Etcd>();
    send_sync::<blocking::Etcd>();
    send_sync::<EtcdError>();
    send::<sluice_etcd::Keeper>();
    send::<sluice_etcd::Watcher>();
}
