//! The state through a real etcd: written by a leader, read back by the
//! next, and never written by one that lost its lead.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_etcd::testing::EtcdServer;
use sluice_proto::catalog::{Catalog, DatasetMeta};
use sluice_proto::ids::{DatasetName, JobId};
use sluice_request::JobRequest;

use super::elect::{campaign, Mirror, Won};
use super::keys::{Keys, Leader};
use super::store::{load, EtcdStore};
use crate::durable::Durable;
use crate::editlog::CatalogEdit;
use crate::input::MapInput;
use crate::joblog::{Accepted, JobEntry, TaskDone};
use crate::store::{JobRecord, RecordState};

const TTL: Duration = Duration::from_secs(2);

fn dataset(name: &str) -> DatasetMeta {
    DatasetMeta {
        name: DatasetName::new(name).unwrap(),
        files: Vec::new(),
        created_ms: 1,
        origin: "put x".into(),
        replication: 1,
        block_size: 0,
        access: Default::default(),
    }
}

fn accepted(id: u64) -> JobEntry {
    JobEntry::Accepted(Box::new(Accepted {
        id: JobId(id),
        request: JobRequest::new("wordcount", &serde_json::json!({}), "in", "out"),
        reducers: 1,
        replication: 1,
        inputs: vec![MapInput::Synthetic; 2],
        side: Vec::new(),
        submission: format!("s{id}"),
        user: Default::default(),
    }))
}

fn done(job: u64, index: u32) -> JobEntry {
    JobEntry::TaskDone(TaskDone {
        job: JobId(job),
        kind: 1,
        index,
        attempt: 0,
        uid: "w1".into(),
        addr: "127.0.0.1:1".into(),
        datacenter: String::new(),
        report: vec![9],
    })
}

async fn lead(etcd: &sluice_etcd::Etcd, keys: &Keys) -> (Mirror, Won) {
    let mut mirror = Mirror::follow(etcd, keys).await.unwrap();
    let won = campaign(etcd, &mut mirror, &Leader::default(), TTL)
        .await
        .unwrap();
    (mirror, won)
}

fn store(server: &EtcdServer, keys: &Keys, mirror: &Mirror, won: &Won) -> EtcdStore {
    let writer = sluice_etcd::blocking::Etcd::connect(&[server.url()]).unwrap();
    EtcdStore::new(
        writer,
        keys.clone(),
        won.leader_rev,
        won.term.clone(),
        &mirror.kvs,
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_leader_writes_the_next_one_loads() {
    let server = EtcdServer::start();
    let etcd = sluice_etcd::Etcd::connect(&[server.url()]).await.unwrap();
    let keys = Keys::new("/sluice/test");
    let (mirror, won) = lead(&etcd, &keys).await;
    assert_eq!(won.epoch, 1);
    let mut s = store(&server, &keys, &mirror, &won);
    let mut catalog = Catalog {
        next_block: 41,
        ..Catalog::default()
    };
    let names = ["a", "b"].map(|n| DatasetName::new(n).unwrap());
    for n in &names {
        catalog.datasets.insert(n.clone(), dataset(n.as_str()));
    }
    // Users and who owns what come back too.
    let alice = sluice_proto::catalog::UserMeta {
        salt: "00ff".into(),
        created_ms: 5,
    };
    catalog.users.insert("alice".into(), alice);
    let a = catalog.datasets.get_mut(&names[0]).unwrap();
    a.access = sluice_proto::catalog::Access::owned_by("alice");
    a.access.readers.push("bob".into());
    s.catalog_changed(&CatalogEdit::of(&catalog, names.clone(), false), &catalog)
        .unwrap();
    catalog.datasets.remove(&names[1]);
    s.catalog_changed(
        &CatalogEdit::of(&catalog, [names[1].clone()], false),
        &catalog,
    )
    .unwrap();
    s.log_jobs(&[accepted(7), accepted(8), done(7, 0)]).unwrap();
    s.log_jobs(&[done(8, 0), JobEntry::Ended { job: JobId(8) }])
        .unwrap();
    s.log_jobs(&[done(7, 1), JobEntry::CommitStarted { job: JobId(7) }])
        .unwrap();
    let mut records = BTreeMap::new();
    for (id, state) in [(7, RecordState::Running), (8, RecordState::Succeeded)] {
        let r = JobRecord {
            id: JobId(id),
            request: None,
            state,
            error: String::new(),
            submission: String::new(),
            user: "alice".into(),
        };
        records.insert(JobId(id), r);
    }
    s.save_records(&records).unwrap();
    for id in 1..=3 {
        s.save_history(JobId(id), &format!("{{\"job\":{id}}}"), 2)
            .unwrap();
    }
    // The next leader (after this one's lease is gone) loads it all.
    etcd.revoke(won.lease).await.unwrap();
    let (mirror, next) = lead(&etcd, &keys).await;
    assert_eq!(next.epoch, 2);
    let loaded = load(&mirror.kvs, &keys, next.epoch, 10).unwrap();
    assert_eq!(loaded.catalog, catalog);
    assert_eq!(loaded.records.len(), 2);
    assert_eq!(loaded.records[&JobId(8)].state, RecordState::Succeeded);
    assert_eq!(loaded.records[&JobId(8)].user, "alice");
    assert_eq!(loaded.catalog.users.len(), 1);
    assert_eq!(loaded.recovered.len(), 1, "the ended job's log went");
    let j = &loaded.recovered[0];
    assert_eq!(j.accepted.id, JobId(7));
    assert!(j.committing);
    let winners: Vec<u32> = j.done.iter().map(|t| t.index).collect();
    assert_eq!(winners, vec![0, 1]);
    let kept: Vec<u64> = loaded.history.keys().map(|j| j.0).collect();
    assert_eq!(kept, vec![2, 3], "the newest two reports are kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_that_lost_its_lead_writes_nothing_and_its_term_ends() {
    let server = EtcdServer::start();
    let etcd = sluice_etcd::Etcd::connect(&[server.url()]).await.unwrap();
    let keys = Keys::new("/sluice/test");
    let (mirror, old) = lead(&etcd, &keys).await;
    let mut stale = store(&server, &keys, &mirror, &old);
    // Its lease goes (as when it was paused past it); another leads.
    etcd.revoke(old.lease).await.unwrap();
    let (_, new) = lead(&etcd, &keys).await;
    assert_eq!(new.epoch, 2);
    let (before, _) = etcd.get_prefix(keys.prefix()).await.unwrap();
    let mut catalog = Catalog::default();
    let n = DatasetName::new("x").unwrap();
    catalog.datasets.insert(n.clone(), dataset("x"));
    let e = stale
        .catalog_changed(&CatalogEdit::of(&catalog, [n], false), &catalog)
        .unwrap_err();
    assert!(e.to_string().contains("lost its lead"), "{e}");
    assert!(!old.term.holds(), "its term ended: it steps down");
    assert!(new.term.holds());
    let e = stale.log_jobs(&[accepted(1)]).unwrap_err();
    assert!(e.to_string().contains("lost its lead"), "{e}");
    let (after, kvs) = etcd.get_prefix(keys.prefix()).await.unwrap();
    assert_eq!(after, before, "nothing was written");
    assert!(kvs.iter().all(|kv| !kv.key.ends_with(b"/x")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_campaigns_when_the_lease_runs_out_and_a_damaged_value_is_named() {
    let server = EtcdServer::start();
    let etcd = sluice_etcd::Etcd::connect(&[server.url()]).await.unwrap();
    let keys = Keys::new("/sluice/test");
    let (_, first) = lead(&etcd, &keys).await;
    // A standby waits while the leader's lease is kept...
    let standby = tokio::spawn({
        let (etcd, keys) = (etcd.clone(), keys.clone());
        async move { lead(&etcd, &keys).await }
    });
    let keeper = tokio::spawn(super::elect::keep_lease(
        etcd.clone(),
        first.lease,
        TTL,
        first.term.clone(),
    ));
    tokio::time::sleep(TTL * 2).await;
    assert!(
        !standby.is_finished(),
        "no takeover while the lease is kept"
    );
    assert!(first.term.holds());
    // ...and takes over once it is not.
    keeper.abort();
    let (_, second) = tokio::time::timeout(Duration::from_secs(10), standby)
        .await
        .expect("a takeover within the lease and etcd's expiry check")
        .unwrap();
    assert_eq!(second.epoch, 2);
    // A damaged value refuses the start, naming its key.
    etcd.put(&keys.record(JobId(3)), b"\x00\x00\x00\x00{}", None)
        .await
        .unwrap();
    let mirror = Mirror::follow(&etcd, &keys).await.unwrap();
    let e = load(&mirror.kvs, &keys, 3, 10).unwrap_err().to_string();
    assert!(e.contains("records/0000000000000003 is damaged"), "{e}");
}
