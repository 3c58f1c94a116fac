//! The coordinator's state in etcd: [`EtcdStore`] writes it, each write
//! one transaction that holds only while this coordinator is the leader;
//! [`load`] reads it back into what a coordinator starts from.

use std::collections::{BTreeMap, BTreeSet};

use sluice_etcd::{Compare, Op, Txn};
use sluice_proto::catalog::{Catalog, DatasetMeta};
use sluice_proto::ids::JobId;
use sluice_proto::ClusterError;

use super::keys::{hex_after, seal, unseal, CatalogMeta, Keys};
use crate::durable::{Durable, Loaded};
use crate::editlog::CatalogEdit;
use crate::joblog::{recovered_from, JobEntry};
use crate::store::JobRecord;
use crate::term::Term;

type Result<T> = std::result::Result<T, ClusterError>;

/// The key-value pairs under a cluster's prefix, by key.
pub type Kvs = BTreeMap<Vec<u8>, Vec<u8>>;

/// Writes a leader's state into etcd.
pub struct EtcdStore {
    etcd: sluice_etcd::blocking::Etcd,
    keys: Keys,
    /// The condition every write carries: the leader key is still the
    /// one this coordinator created.
    fence: Compare,
    /// Ended when a write finds the fence gone.
    term: Term,
    /// The next job log record's number.
    next_seq: u64,
    /// The job records as last written (their framed values).
    records: BTreeMap<JobId, Vec<u8>>,
    /// The reports kept.
    history: BTreeSet<JobId>,
}

impl EtcdStore {
    /// A store for the leader whose leader key was created at
    /// `leader_rev`, starting from `kvs` (what it loaded).
    pub fn new(
        etcd: sluice_etcd::blocking::Etcd,
        keys: Keys,
        leader_rev: i64,
        term: Term,
        kvs: &Kvs,
    ) -> Result<EtcdStore> {
        let under = |p: Vec<u8>| under(kvs, p);
        let next_seq = under(keys.job_logs())
            .filter_map(|(k, _)| hex_after(k, &keys.job_logs()))
            .max()
            .map_or(0, |s| s + 1);
        let records = under(keys.records())
            .filter_map(|(k, v)| Some((JobId(hex_after(k, &keys.records())?), v.clone())))
            .collect();
        let history = under(keys.histories())
            .filter_map(|(k, _)| Some(JobId(hex_after(k, &keys.histories())?)))
            .collect();
        let fence = Compare::CreateRevision {
            key: keys.leader(),
            equals: leader_rev,
        };
        Ok(EtcdStore {
            etcd,
            keys,
            fence,
            term,
            next_seq,
            records,
            history,
        })
    }

    /// Runs `ops` in one transaction that holds only while this
    /// coordinator leads. A lost lead ends the term: nothing was written,
    /// and the coordinator steps down.
    fn write(&mut self, ops: Vec<Op>) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let txn = Txn {
            compare: vec![self.fence.clone()],
            success: ops,
            failure: Vec::new(),
        };
        let out = self
            .etcd
            .txn(txn)
            .map_err(|e| ClusterError::Remote(format!("writing the state to etcd: {e}")))?;
        if !out.succeeded {
            self.term.end();
            return Err(ClusterError::Remote(
                "this coordinator lost its lead in etcd; nothing was written, and it steps down"
                    .into(),
            ));
        }
        Ok(())
    }
}

impl Durable for EtcdStore {
    fn catalog_changed(&mut self, edit: &CatalogEdit, catalog: &Catalog) -> Result<()> {
        let mut ops = Vec::with_capacity(edit.datasets.len() + 1);
        for (name, d) in &edit.datasets {
            let key = self.keys.dataset(name.as_str());
            ops.push(match d {
                Some(d) => put(key, seal(d)?),
                None => Op::Delete { key },
            });
        }
        // The directives and counters as they are now (`catalog` holds
        // the edit), whether or not this change moved them.
        ops.push(put(
            self.keys.catalog_meta(),
            seal(&CatalogMeta {
                directives: catalog.cache_directives.clone(),
                next_block: catalog.next_block,
                next_directive: catalog.next_directive,
                users: catalog.users.clone(),
            })?,
        ));
        self.write(ops)
    }

    fn log_jobs(&mut self, entries: &[JobEntry]) -> Result<()> {
        let ended: BTreeSet<JobId> = entries
            .iter()
            .filter(|e| matches!(e, JobEntry::Ended { .. }))
            .map(JobEntry::job)
            .collect();
        let mut ops = Vec::new();
        for e in entries {
            let job = e.job();
            if ended.contains(&job) {
                continue;
            }
            let key = self.keys.job_log_record(job, self.next_seq);
            self.next_seq += 1;
            ops.push(put(key, seal(e)?));
        }
        for job in ended {
            ops.push(Op::DeletePrefix {
                prefix: self.keys.job_log(job),
            });
        }
        self.write(ops)
    }

    fn jobs_idle(&mut self) -> Result<()> {
        // An ended job's records went with its end.
        Ok(())
    }

    fn save_records(&mut self, records: &BTreeMap<JobId, JobRecord>) -> Result<()> {
        let mut ops = Vec::new();
        let mut now = BTreeMap::new();
        for (id, r) in records {
            let v = seal(r)?;
            if self.records.get(id) != Some(&v) {
                ops.push(put(self.keys.record(*id), v.clone()));
            }
            now.insert(*id, v);
        }
        for id in self.records.keys().filter(|id| !records.contains_key(id)) {
            ops.push(Op::Delete {
                key: self.keys.record(*id),
            });
        }
        self.write(ops)?;
        self.records = now;
        Ok(())
    }

    fn save_history(&mut self, id: JobId, json: &str, keep: usize) -> Result<()> {
        let mut ops = vec![put(self.keys.history(id), seal(&json)?)];
        let mut kept = self.history.clone();
        kept.insert(id);
        while kept.len() > keep {
            let old = kept.pop_first().expect("not empty");
            ops.push(Op::Delete {
                key: self.keys.history(old),
            });
        }
        self.write(ops)?;
        self.history = kept;
        Ok(())
    }
}

/// The pairs of `kvs` whose keys start with `prefix`, in key order.
fn under(kvs: &Kvs, prefix: Vec<u8>) -> impl Iterator<Item = (&Vec<u8>, &Vec<u8>)> {
    kvs.range(prefix.clone()..)
        .take_while(move |(k, _)| k.starts_with(&prefix))
}

fn put(key: Vec<u8>, value: Vec<u8>) -> Op {
    Op::Put {
        key,
        value,
        lease: None,
    }
}

/// The state `kvs` holds, for a coordinator of `epoch` keeping `history`
/// reports. A damaged value refuses the start, naming its key, except a
/// report (a record of what happened, left out with a warning).
pub fn load(kvs: &Kvs, keys: &Keys, epoch: u64, history: usize) -> Result<Loaded> {
    let under = |p: Vec<u8>| under(kvs, p).collect::<Vec<_>>();
    let mut catalog = Catalog::default();
    let mut edit = CatalogEdit::default();
    if let Some(v) = kvs.get(&keys.catalog_meta()) {
        let meta: CatalogMeta = unseal(&keys.catalog_meta(), v)?;
        edit.directives = Some(meta.directives);
        edit.next_block = meta.next_block;
        edit.next_directive = meta.next_directive;
        edit.users = Some(meta.users);
    }
    for (k, v) in under(keys.datasets()) {
        let d: DatasetMeta = unseal(k, v)?;
        edit.datasets.push((d.name.clone(), Some(d)));
    }
    edit.apply(&mut catalog);
    let mut records = BTreeMap::new();
    for (k, v) in under(keys.records()) {
        let r: JobRecord = unseal(k, v)?;
        records.insert(r.id, r);
    }
    let mut entries: Vec<(u64, JobEntry)> = Vec::new();
    for (k, v) in under(keys.job_logs()) {
        let seq = hex_after(k, &keys.job_logs()).unwrap_or(u64::MAX);
        entries.push((seq, unseal(k, v)?));
    }
    entries.sort_by_key(|(seq, _)| *seq);
    let mut reports = BTreeMap::new();
    let all = under(keys.histories());
    for (k, v) in all.iter().skip(all.len().saturating_sub(history)) {
        match (hex_after(k, &keys.histories()), unseal::<String>(k, v)) {
            (Some(id), Ok(json)) => {
                reports.insert(JobId(id), json);
            }
            (_, Err(e)) => tracing::warn!("{e}; left out of the job history"),
            (None, _) => {}
        }
    }
    Ok(Loaded {
        epoch,
        catalog,
        records,
        recovered: recovered_from(entries.into_iter().map(|(_, e)| e)),
        history: reports,
    })
}
