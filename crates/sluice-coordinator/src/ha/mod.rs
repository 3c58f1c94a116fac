//! Coordinators that stand by for each other through etcd, as HDFS's
//! NameNodes do through a shared edit log and YARN's ResourceManagers
//! through ZooKeeper.
//!
//! Every coordinator of a cluster (`--etcd URL --etcd-prefix P`) starts
//! as a standby: it follows the cluster's state in etcd ([`elect::Mirror`])
//! and serves nothing, so a client or worker that tries it is refused and
//! moves on to the next address it was given. When no coordinator leads,
//! each standby campaigns; the one that wins counts the epoch up, takes
//! the state over from its copy ([`store::load`]) and starts serving,
//! writing every change through [`store::EtcdStore`] as one transaction
//! conditioned on its leader key. Workers see a new epoch and register
//! again with their running attempts, which it adopts (as after a
//! restart, `crate::state::recover`).
//!
//! A leader's [`crate::term::Term`] lasts while its lease is renewed. When it ends (the
//! lease lost, a write refused, a pause past the lease) the coordinator
//! answers nothing more, stops its servers and stands by again: it never
//! writes once another may lead.

pub mod elect;
pub mod keys;
pub mod store;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_proto::ClusterError;

use crate::config::CoordinatorConfig;
use crate::service::{start_with, Started};
use elect::{campaign, etcd_error, keep_lease, Mirror};
use keys::{seal, Keys, Leader};
use store::{load, EtcdStore};

/// How coordinators find each other.
#[derive(Debug, Clone)]
pub struct HaConfig {
    /// etcd's client URLs.
    pub endpoints: Vec<String>,
    /// The prefix of this cluster's keys.
    pub prefix: String,
    /// The leader's lease (etcd grants whole seconds, at least its
    /// minimum: 2 s with etcd's default election timeout).
    pub ttl: Duration,
}

/// The lease's TTL when none is given.
pub const DEFAULT_TTL: Duration = Duration::from_secs(2);

/// The lease of the term under way, if any: given back when the process
/// is asked to stop, so a standby takes over at once.
type Current = Arc<Mutex<Option<(sluice_etcd::Etcd, i64)>>>;

/// Stands by, leads when no other coordinator does, and stands by again
/// when its term ends, until the process is asked to stop (SIGTERM or
/// SIGINT): a leader then gives its lease back, so a standby takes over
/// without waiting for it to run out. `on_active` is told each time this
/// coordinator starts serving.
pub async fn run(
    cfg: CoordinatorConfig,
    ha: HaConfig,
    on_active: impl Fn(&Started),
) -> Result<(), ClusterError> {
    let keys = Keys::new(&ha.prefix);
    let current = Current::default();
    let terms = async {
        loop {
            match lead_once(&cfg, &ha, &keys, &on_active, &current).await {
                Ok(()) => tracing::warn!("this coordinator's term ended; it stands by again"),
                Err(e) => {
                    tracing::error!("standing by through etcd: {e}; trying again");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    };
    tokio::select! {
        () = terms => Ok(()),
        r = stop_asked() => {
            let held = current.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some((etcd, lease)) = held {
                tracing::info!("stopping: giving the lead back");
                let _ = etcd.revoke(lease).await;
            }
            r
        }
    }
}

/// Resolves when the process gets SIGTERM or SIGINT.
async fn stop_asked() -> Result<(), ClusterError> {
    use tokio::signal::unix::{signal, SignalKind};
    let listen = |k| signal(k).map_err(|e| ClusterError::Config(format!("signals: {e}")));
    let (mut term, mut int) = (
        listen(SignalKind::terminate())?,
        listen(SignalKind::interrupt())?,
    );
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

/// One standby period and, if it wins, one term.
async fn lead_once(
    cfg: &CoordinatorConfig,
    ha: &HaConfig,
    keys: &Keys,
    on_active: &impl Fn(&Started),
    current: &Current,
) -> Result<(), ClusterError> {
    let etcd = sluice_etcd::Etcd::connect(&ha.endpoints)
        .await
        .map_err(etcd_error)?;
    let mut mirror = Mirror::follow(&etcd, keys).await?;
    tracing::info!(
        "standby: following {} in etcd (revision {})",
        String::from_utf8_lossy(keys.prefix()),
        mirror.revision
    );
    let me = Leader {
        addr: cfg.listen.to_string(),
        http: cfg.http.map(|h| h.to_string()),
        pid: std::process::id(),
        ..Leader::default()
    };
    let won = campaign(&etcd, &mut mirror, &me, ha.ttl).await?;
    let term = won.term.clone();
    // A renewal that does not answer within a quarter of the lease is
    // given up and sent again, well inside the term.
    let renewing = etcd
        .clone()
        .with_call_timeout((ha.ttl / 4).max(Duration::from_millis(100)));
    tokio::spawn(keep_lease(renewing, won.lease, ha.ttl, term.clone()));
    *current.lock().unwrap_or_else(|p| p.into_inner()) = Some((etcd.clone(), won.lease));
    tracing::info!("active: epoch {} (lease {:x})", won.epoch, won.lease);
    let started = match serve(cfg, ha, keys, &mirror, &won).await {
        Ok(s) => s,
        Err(e) => {
            let _ = etcd.revoke(won.lease).await;
            term.end();
            return Err(e);
        }
    };
    say_where(&etcd, keys, &me, &won, &started).await;
    on_active(&started);
    term.ended().await;
    current.lock().unwrap_or_else(|p| p.into_inner()).take();
    // In-flight calls get a moment to end (refused: the term is over),
    // then the server goes with its listener.
    let mut server = started.server;
    let _ = tokio::time::timeout(Duration::from_secs(1), &mut server).await;
    server.abort();
    Ok(())
}

/// Starts serving from the mirror's state.
async fn serve(
    cfg: &CoordinatorConfig,
    ha: &HaConfig,
    keys: &Keys,
    mirror: &Mirror,
    won: &elect::Won,
) -> Result<Started, ClusterError> {
    let loaded = load(&mirror.kvs, keys, won.epoch, cfg.history)?;
    let writer = sluice_etcd::blocking::Etcd::connect(&ha.endpoints).map_err(etcd_error)?;
    let durable = EtcdStore::new(
        writer,
        keys.clone(),
        won.leader_rev,
        won.term.clone(),
        &mirror.kvs,
    )?;
    start_with(cfg.clone(), loaded, Box::new(durable), won.term.clone()).await
}

/// Puts the addresses it serves on in the leader key (bound now, so a
/// port 0 is known), on its lease and only while it leads.
async fn say_where(
    etcd: &sluice_etcd::Etcd,
    keys: &Keys,
    me: &Leader,
    won: &elect::Won,
    s: &Started,
) {
    let leader = Leader {
        addr: s.addr.to_string(),
        http: s.http.map(|h| h.to_string()),
        epoch: won.epoch,
        lease: won.lease,
        ..me.clone()
    };
    let Ok(value) = seal(&leader) else { return };
    let txn = sluice_etcd::Txn {
        compare: vec![sluice_etcd::Compare::CreateRevision {
            key: keys.leader(),
            equals: won.leader_rev,
        }],
        success: vec![sluice_etcd::Op::Put {
            key: keys.leader(),
            value,
            lease: Some(won.lease),
        }],
        failure: Vec::new(),
    };
    if let Err(e) = etcd.txn(txn).await {
        tracing::warn!("saying where this coordinator serves: {e}");
    }
}
