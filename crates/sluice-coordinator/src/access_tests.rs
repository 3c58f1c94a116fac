//! Every control call as every role: an admin (the secret), a data set's
//! owner, another user, a removed user and nobody (an unsigned call),
//! each answer checked; a removed key refused at once; users and
//! ownership kept across a restart.

use std::time::Duration;

use sluice_proto::auth::Secret;
use sluice_proto::proto::coordinator_client::CoordinatorClient;
use sluice_proto::proto::{self, Empty};
use sluice_proto::signed::{connect, Rpc};
use sluice_proto::users::user_key;
use tonic::Code;

use crate::config::{CoordinatorConfig, Scheduler};
use crate::durable::Files;
use crate::term::Term;

fn secret() -> Secret {
    Secret::new(&[7; 32]).unwrap()
}

fn config(dir: &std::path::Path) -> CoordinatorConfig {
    let pools = dir.join("pools.toml");
    std::fs::write(&pools, "[pool.restricted]\nsubmit = [\"alice\"]\n").unwrap();
    CoordinatorConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        state_dir: dir.join("state"),
        secret: secret(),
        heartbeat: Duration::from_millis(200),
        worker_timeout: Duration::from_secs(10),
        settings: crate::config::Settings::default(),
        jobs: std::sync::Arc::new(sluice_request::Registry::builtin()),
        placement: std::sync::Arc::new(crate::store::RackAware),
        orphan_grace: Duration::from_secs(3600),
        scheduler: Scheduler::Fair(Some(pools)),
        preemption_timeout: None,
        http: None,
        history: 10,
        hardware: sluice_model::Hardware::defaults("a test"),
        replication_streams: 0,
    }
}

/// A coordinator on `dir`'s state, and the term that ends it.
async fn coordinator(dir: &std::path::Path) -> (String, Term) {
    let cfg = config(dir);
    let (files, loaded) = Files::open(&cfg.state_dir, cfg.history).unwrap();
    let term = Term::forever();
    let s = crate::service::start_with(cfg, loaded, Box::new(files), term.clone())
        .await
        .unwrap();
    (s.addr.to_string(), term)
}

async fn client(addr: &str, key: &Secret) -> Rpc {
    connect(addr, key, Duration::from_secs(5)).await.unwrap()
}

/// Adds user `name`; their key.
async fn add_user(admin: &mut Rpc, name: &str) -> Secret {
    let req = proto::UsersRequest {
        add: name.into(),
        remove: String::new(),
    };
    let list = admin.users(req).await.unwrap().into_inner();
    let u = list.users.iter().find(|u| u.name == name).unwrap();
    user_key(&secret(), name, &u.salt)
}

/// An empty data set, committed by whoever `c` signs as.
async fn commit(c: &mut Rpc, name: &str, overwrite: bool) -> Result<(), tonic::Status> {
    let dataset = proto::Dataset {
        name: name.into(),
        ..Default::default()
    };
    let req = proto::CommitDatasetRequest {
        dataset: Some(dataset),
        overwrite,
    };
    c.commit_dataset(req).await.map(|_| ())
}

/// A job's request, encoded: wordcount of `input` into `output`, in
/// `pool`.
fn job(input: &str, output: &str, pool: &str) -> proto::SubmitRequest {
    let mut r = sluice_request::JobRequest::new("wordcount", &serde_json::json!({}), input, output);
    if !pool.is_empty() {
        r.properties
            .insert(crate::policy::POOL_PROPERTY.into(), pool.into());
    }
    proto::SubmitRequest {
        request: r.encode(),
        ..Default::default()
    }
}

/// What a call's answer says of the caller: it was let through to the
/// state (`ok`, whatever the state then said), refused for what it may
/// do (`denied`) or for who it is (`unauth`).
fn kind<T>(r: Result<T, tonic::Status>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(s) if s.code() == Code::PermissionDenied => "denied",
        Err(s) if s.code() == Code::Unauthenticated => "unauth",
        Err(_) => "ok",
    }
}

/// Every control call once, as the client `$c` signs (giving up
/// `$alices_block` among them); the answers' kinds.
macro_rules! every_call {
    ($c:expr, $alices_block:expr) => {{
        let c = &mut $c;
        let mut out: Vec<(&str, &str)> = Vec::new();
        let name = |n: &str| proto::Name { name: n.into() };
        out.push((
            "Register",
            kind(c.register(proto::RegisterRequest::default()).await),
        ));
        out.push((
            "Heartbeat",
            kind(c.heartbeat(proto::HeartbeatRequest::default()).await),
        ));
        out.push((
            "MapOutputs",
            kind(c.map_outputs(proto::MapOutputsRequest::default()).await),
        ));
        out.push((
            "FetchFailed",
            kind(c.fetch_failed(proto::FetchFailedRequest::default()).await),
        ));
        out.push((
            "PlanBlocks",
            kind(c.plan_blocks(proto::PlanBlocksRequest::default()).await),
        ));
        let commit = proto::CommitDatasetRequest {
            dataset: Some(proto::Dataset {
                name: "private".into(),
                ..Default::default()
            }),
            overwrite: true,
        };
        out.push(("CommitDataset", kind(c.commit_dataset(commit).await)));
        out.push((
            "ListDatasets",
            kind(c.list_datasets(proto::ListDatasetsRequest::default()).await),
        ));
        out.push(("GetDataset", kind(c.get_dataset(name("private")).await)));
        out.push((
            "AbandonBlocks",
            kind(c.abandon_blocks(proto::BlockIds::default()).await),
        ));
        let alices = proto::BlockIds {
            ids: vec![$alices_block.clone()],
        };
        out.push((
            "AbandonBlocks(alice's)",
            kind(c.abandon_blocks(alices).await),
        ));
        out.push((
            "ReportCorrupt",
            kind(c.report_corrupt(proto::CorruptReport::default()).await),
        ));
        out.push(("Submit", kind(c.submit(job("private", "out", "")).await)));
        out.push((
            "Submit(pool)",
            kind(c.submit(job("everyone", "out", "restricted")).await),
        ));
        out.push((
            "WaitJob",
            kind(c.wait_job(proto::WaitJobRequest::default()).await),
        ));
        out.push((
            "KillJob",
            kind(c.kill_job(proto::KillJobRequest::default()).await),
        ));
        out.push(("ListJobs", kind(c.list_jobs(Empty {}).await)));
        out.push((
            "Pools",
            kind(c.pools(proto::PoolsRequest { reload: false }).await),
        ));
        out.push((
            "Pools(reload)",
            kind(c.pools(proto::PoolsRequest { reload: true }).await),
        ));
        out.push(("Info", kind(c.info(Empty {}).await)));
        let add = proto::CacheAddRequest {
            dataset: "private".into(),
            ..Default::default()
        };
        out.push(("CacheAdd", kind(c.cache_add(add).await)));
        let rm = proto::CacheRemoveRequest {
            id: 0,
            dataset: "private".into(),
        };
        out.push(("CacheRemove", kind(c.cache_remove(rm).await)));
        out.push(("CacheList", kind(c.cache_list(Empty {}).await)));
        out.push(("Users", kind(c.users(proto::UsersRequest::default()).await)));
        let share = proto::ShareRequest {
            dataset: "private".into(),
            users: vec!["bob".into()],
            ..Default::default()
        };
        out.push(("Share", kind(c.share(share).await)));
        out.push((
            "RemoveDataset",
            kind(c.remove_dataset(name("private")).await),
        ));
        out
    }};
}

/// Each call's expected answer for: nobody, a removed user, another
/// user, the owner, an admin (in the order they call).
const EXPECTED: &[(&str, [&str; 5])] = &[
    ("Register", ["unauth", "unauth", "denied", "denied", "ok"]),
    ("Heartbeat", ["unauth", "unauth", "denied", "denied", "ok"]),
    ("MapOutputs", ["unauth", "unauth", "denied", "denied", "ok"]),
    (
        "FetchFailed",
        ["unauth", "unauth", "denied", "denied", "ok"],
    ),
    ("PlanBlocks", ["unauth", "unauth", "ok", "ok", "ok"]),
    ("CommitDataset", ["unauth", "unauth", "denied", "ok", "ok"]),
    ("ListDatasets", ["unauth", "unauth", "ok", "ok", "ok"]),
    ("GetDataset", ["unauth", "unauth", "denied", "ok", "ok"]),
    ("AbandonBlocks", ["unauth", "unauth", "ok", "ok", "ok"]),
    (
        "AbandonBlocks(alice's)",
        ["unauth", "unauth", "denied", "ok", "ok"],
    ),
    (
        "ReportCorrupt",
        ["unauth", "unauth", "denied", "denied", "ok"],
    ),
    ("Submit", ["unauth", "unauth", "denied", "ok", "ok"]),
    ("Submit(pool)", ["unauth", "unauth", "denied", "ok", "ok"]),
    ("WaitJob", ["unauth", "unauth", "ok", "ok", "ok"]),
    ("KillJob", ["unauth", "unauth", "ok", "ok", "ok"]),
    ("ListJobs", ["unauth", "unauth", "ok", "ok", "ok"]),
    ("Pools", ["unauth", "unauth", "ok", "ok", "ok"]),
    (
        "Pools(reload)",
        ["unauth", "unauth", "denied", "denied", "ok"],
    ),
    ("Info", ["unauth", "unauth", "ok", "ok", "ok"]),
    ("CacheAdd", ["unauth", "unauth", "denied", "ok", "ok"]),
    ("CacheRemove", ["unauth", "unauth", "denied", "ok", "ok"]),
    ("CacheList", ["unauth", "unauth", "ok", "ok", "ok"]),
    ("Users", ["unauth", "unauth", "denied", "denied", "ok"]),
    ("Share", ["unauth", "unauth", "denied", "ok", "ok"]),
    ("RemoveDataset", ["unauth", "unauth", "denied", "ok", "ok"]),
];

/// The names `c` sees listed.
async fn listed(c: &mut Rpc) -> Vec<String> {
    let list = c
        .list_datasets(proto::ListDatasetsRequest::default())
        .await
        .unwrap();
    list.into_inner()
        .datasets
        .into_iter()
        .map(|d| d.name)
        .collect()
}

#[tokio::test]
async fn every_call_as_every_role() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, _term) = coordinator(dir.path()).await;
    let mut admin = client(&addr, &secret()).await;
    let mut alice = client(&addr, &add_user(&mut admin, "alice").await).await;
    let mut bob = client(&addr, &add_user(&mut admin, "bob").await).await;
    let mut carol = client(&addr, &add_user(&mut admin, "carol").await).await;
    commit(&mut alice, "private", false).await.unwrap();
    commit(&mut alice, "everyone", false).await.unwrap();
    commit(&mut admin, "admins", false).await.unwrap();
    let all = proto::ShareRequest {
        dataset: "everyone".into(),
        all: true,
        ..Default::default()
    };
    alice.share(all).await.unwrap();
    // Carol's key worked; once she is removed it does not.
    carol.info(Empty {}).await.unwrap();
    let rm = proto::UsersRequest {
        add: String::new(),
        remove: "carol".into(),
    };
    admin.users(rm).await.unwrap();
    // Listings show each what they may read.
    assert_eq!(listed(&mut admin).await, ["admins", "everyone", "private"]);
    assert_eq!(listed(&mut alice).await, ["everyone", "private"]);
    assert_eq!(listed(&mut bob).await, ["everyone"]);
    let e = bob
        .get_dataset(proto::Name {
            name: "private".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        e.message(),
        "permission denied: data set private belongs to alice"
    );
    let e = bob
        .submit(job("everyone", "o", "restricted"))
        .await
        .unwrap_err();
    assert_eq!(
        e.message(),
        "permission denied: user bob may not submit to pool restricted"
    );

    // A put of alice's in progress: a block she was handed, which only
    // she or an admin gives up.
    let worker = proto::RegisterRequest {
        protocol_version: sluice_proto::PROTOCOL_VERSION,
        data_addr: "127.0.0.1:1".into(),
        uid: "w1".into(),
        slots: 1,
        ..Default::default()
    };
    admin.register(worker).await.unwrap();
    let ask = proto::PlanBlocksRequest {
        blocks: 1,
        replication: 1,
        ..Default::default()
    };
    let planned = alice.plan_blocks(ask).await.unwrap().into_inner();
    let alices_block = planned.blocks[0].id.clone();
    let e = bob
        .abandon_blocks(proto::BlockIds {
            ids: vec![alices_block.clone()],
        })
        .await
        .unwrap_err();
    assert_eq!(
        e.message(),
        format!("permission denied: block {alices_block} is being written by alice")
    );

    let endpoint = format!("http://{addr}");
    let mut nobody = CoordinatorClient::connect(endpoint).await.unwrap();
    let mut got: Vec<Vec<(&str, &str)>> = Vec::new();
    got.push(every_call!(nobody, alices_block));
    got.push(every_call!(carol, alices_block));
    got.push(every_call!(bob, alices_block));
    got.push(every_call!(alice, alices_block));
    got.push(every_call!(admin, alices_block));
    let mut wrong = Vec::new();
    for (i, (call, want)) in EXPECTED.iter().enumerate() {
        for (role, w) in want.iter().enumerate() {
            let (name, answer) = got[role][i];
            assert_eq!(name, *call);
            if answer != *w {
                wrong.push(format!("{call} as role {role}: {answer}, expected {w}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(got[0].len(), EXPECTED.len(), "every call is in the table");
}

#[tokio::test]
async fn users_and_ownership_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, term) = coordinator(dir.path()).await;
    let mut admin = client(&addr, &secret()).await;
    let alice_key = add_user(&mut admin, "alice").await;
    let bob_key = add_user(&mut admin, "bob").await;
    commit(&mut client(&addr, &alice_key).await, "mine", false)
        .await
        .unwrap();
    term.end();
    drop(admin);
    let (addr, _term) = coordinator(dir.path()).await;
    let mut alice = client(&addr, &alice_key).await;
    let mut bob = client(&addr, &bob_key).await;
    assert_eq!(listed(&mut alice).await, ["mine"]);
    assert!(listed(&mut bob).await.is_empty());
    let e = bob
        .remove_dataset(proto::Name {
            name: "mine".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    // Removing bob is kept too.
    let mut admin = client(&addr, &secret()).await;
    let rm = proto::UsersRequest {
        add: String::new(),
        remove: "bob".into(),
    };
    admin.users(rm).await.unwrap();
    assert_eq!(
        bob.info(Empty {}).await.unwrap_err().code(),
        Code::Unauthenticated
    );
}
