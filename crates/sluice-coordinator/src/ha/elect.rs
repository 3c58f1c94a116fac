//! Standing by and taking over: a standby keeps a copy of the cluster's
//! keys current through one watch ([`Mirror`]), and when the leader key
//! goes (its lease ran out, or it was revoked) it campaigns
//! ([`campaign`]): one transaction creates the leader key on its own
//! lease and counts the epoch up, and holds only if no other coordinator
//! got there first. The leader then keeps its lease ([`keep_lease`]),
//! which extends its [`Term`].
//!
//! One watch delivers its events in revision order, so when a standby
//! sees the leader key's deletion it has seen every write the old leader
//! made before it: the copy it takes over from is whole.

use std::time::{Duration, Instant};

use sluice_etcd::{Compare, Etcd, EtcdError, EventKind, Op, Txn, Watcher};
use sluice_proto::ClusterError;

use super::keys::{seal, unseal, Keys, Leader};
use super::store::Kvs;
use crate::term::Term;

type Result<T> = std::result::Result<T, ClusterError>;

/// etcd's error as the coordinator's.
pub(crate) fn etcd_error(e: EtcdError) -> ClusterError {
    ClusterError::Remote(e.to_string())
}

/// A copy of the keys under a cluster's prefix, kept current.
pub struct Mirror {
    keys: Keys,
    pub kvs: Kvs,
    /// The epoch key's last revision (0: none yet).
    epoch_rev: i64,
    /// Every change up to this revision is in `kvs`.
    pub revision: i64,
    watcher: Watcher,
}

impl Mirror {
    /// Reads every key under `keys`' prefix and watches from there.
    pub async fn follow(etcd: &Etcd, keys: &Keys) -> Result<Mirror> {
        let (revision, all) = etcd.get_prefix(keys.prefix()).await.map_err(etcd_error)?;
        let watcher = etcd
            .watch_prefix(keys.prefix(), revision + 1)
            .await
            .map_err(etcd_error)?;
        let mut m = Mirror {
            keys: keys.clone(),
            kvs: Kvs::new(),
            epoch_rev: 0,
            revision,
            watcher,
        };
        for kv in all {
            m.put(kv);
        }
        Ok(m)
    }

    fn put(&mut self, kv: sluice_etcd::Kv) {
        if kv.key == self.keys.epoch() {
            self.epoch_rev = kv.mod_revision;
        }
        self.kvs.insert(kv.key, kv.value);
    }

    /// Waits for the next changes and applies them.
    pub async fn next(&mut self) -> Result<()> {
        let batch = self.watcher.next().await.map_err(etcd_error)?;
        for e in batch.events {
            match e.kind {
                EventKind::Put => self.put(e.kv),
                EventKind::Delete => {
                    self.kvs.remove(&e.kv.key);
                }
            }
        }
        self.revision = self.revision.max(batch.revision);
        Ok(())
    }

    /// The active coordinator, if there is one.
    pub fn leader(&self) -> Option<Leader> {
        let key = self.keys.leader();
        let v = self.kvs.get(&key)?;
        // A leader value that does not read is still a leader: wait for
        // its lease to end rather than take over beside it.
        Some(unseal(&key, v).unwrap_or_default())
    }

    /// The last epoch.
    pub fn epoch(&self) -> Result<u64> {
        let key = self.keys.epoch();
        self.kvs.get(&key).map_or(Ok(0), |v| unseal(&key, v))
    }
}

/// A won election.
#[derive(Debug, Clone)]
pub struct Won {
    pub lease: i64,
    /// The leader key's create revision: every write is conditioned on it.
    pub leader_rev: i64,
    pub epoch: u64,
    /// The term the lease gives from its grant.
    pub term: Term,
}

/// Waits until no coordinator leads, then tries to lead; returns once it
/// does. `me` is this coordinator as the leader key will say.
pub async fn campaign(etcd: &Etcd, mirror: &mut Mirror, me: &Leader, ttl: Duration) -> Result<Won> {
    loop {
        if mirror.leader().is_none() {
            if let Some(won) = try_lead(etcd, mirror, me, ttl).await? {
                return Ok(won);
            }
        }
        mirror.next().await?;
    }
}

/// One attempt to lead: `None` when another coordinator got there first.
async fn try_lead(etcd: &Etcd, mirror: &Mirror, me: &Leader, ttl: Duration) -> Result<Option<Won>> {
    let granted_at = Instant::now();
    let lease = etcd.grant(ttl).await.map_err(etcd_error)?;
    let epoch = mirror.epoch()? + 1;
    let keys = &mirror.keys;
    let leader = Leader {
        epoch,
        lease: lease.id,
        ..me.clone()
    };
    let txn = Txn {
        compare: vec![
            Compare::CreateRevision {
                key: keys.leader(),
                equals: 0,
            },
            Compare::ModRevision {
                key: keys.epoch(),
                equals: mirror.epoch_rev,
            },
        ],
        success: vec![
            Op::Put {
                key: keys.leader(),
                value: seal(&leader)?,
                lease: Some(lease.id),
            },
            Op::Put {
                key: keys.epoch(),
                value: seal(&epoch)?,
                lease: None,
            },
        ],
        failure: Vec::new(),
    };
    let out = etcd.txn(txn).await.map_err(etcd_error)?;
    if !out.succeeded {
        let _ = etcd.revoke(lease.id).await;
        return Ok(None);
    }
    Ok(Some(Won {
        lease: lease.id,
        leader_rev: out.revision,
        epoch,
        term: Term::until(granted_at + lease.ttl),
    }))
}

/// Keeps the leader's lease until the term ends: each renewal extends
/// the term to its send time plus the TTL etcd gives; the term ends when
/// etcd says the lease is gone or when it passes without a renewal.
pub async fn keep_lease(etcd: Etcd, lease: i64, ttl: Duration, term: Term) {
    let every = (ttl / 4).max(Duration::from_millis(100));
    let mut keeper = None;
    while term.holds() {
        let sent = Instant::now();
        match renew(&etcd, lease, &mut keeper).await {
            Ok(left) => term.extend(sent + left),
            Err(EtcdError::LeaseExpired { .. }) => break,
            Err(e) => {
                tracing::warn!("renewing the leader's lease: {e}");
                keeper = None;
            }
        }
        tokio::time::sleep(every).await;
    }
    term.end();
}

async fn renew(
    etcd: &Etcd,
    lease: i64,
    keeper: &mut Option<sluice_etcd::Keeper>,
) -> std::result::Result<Duration, EtcdError> {
    if keeper.is_none() {
        *keeper = Some(etcd.keeper(lease).await?);
    }
    keeper.as_mut().expect("set above").keep_alive().await
}
