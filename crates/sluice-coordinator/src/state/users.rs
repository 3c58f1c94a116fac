//! Users and who may read a data set: adding and removing users, sharing
//! data sets, and the permission checks the service asks before an event.

use sluice_proto::catalog::{Access, UserMeta};
use sluice_proto::ids::DatasetName;
use sluice_proto::proto;
use sluice_proto::users::check_user_name;

use super::{Refusal, State};

impl State {
    /// Adds user `name` with `salt` (`Some`), or removes them (`None`),
    /// as part of this step's write.
    pub(super) fn set_user(&mut self, name: String, salt: Option<String>) -> Result<(), Refusal> {
        check_user_name(&name).map_err(|e| Refusal::Invalid(e.to_string()))?;
        let exists = self.catalog.users.contains_key(&name);
        let before = self.catalog.users.clone();
        match salt {
            Some(_) if exists => return Err(Refusal::UserExists(name)),
            None if !exists => return Err(Refusal::NoUser(name)),
            Some(salt) => {
                let meta = UserMeta {
                    salt,
                    created_ms: self.at.ms,
                };
                self.catalog.users.insert(name, meta);
            }
            None => {
                self.catalog.users.remove(&name);
            }
        }
        let w = self.write();
        w.client = true;
        w.users.get_or_insert(before);
        Ok(())
    }

    /// Grants or takes back reading a data set (the service checked that
    /// the caller may).
    pub(super) fn share(&mut self, r: &proto::ShareRequest) -> Result<(), Refusal> {
        let name =
            DatasetName::new(r.dataset.clone()).map_err(|e| Refusal::Invalid(e.to_string()))?;
        let mut d = self
            .catalog
            .datasets
            .get(&name)
            .cloned()
            .ok_or_else(|| Refusal::NoDataset(r.dataset.clone()))?;
        for u in &r.users {
            if !r.revoke && !self.catalog.users.contains_key(u) {
                return Err(Refusal::NoUser(u.clone()));
            }
        }
        let a = &mut d.access;
        if r.revoke {
            a.readers.retain(|x| !r.users.contains(x));
            a.public &= !r.all;
        } else {
            for u in &r.users {
                if !a.readers.contains(u) && *u != a.owner {
                    a.readers.push(u.clone());
                }
            }
            a.public |= r.all;
        }
        self.put_dataset(d);
        self.write().client = true;
        Ok(())
    }

    /// Who owns data set `name` and who may read it (`None`: no such
    /// data set).
    pub(crate) fn access(&self, name: &str) -> Option<&Access> {
        self.catalog.datasets.get(name).map(|d| &d.access)
    }

    /// Refuses `user` (`None`: an admin) reading data set `name`; one
    /// that does not exist is left for the event to refuse.
    pub(crate) fn check_read(&self, user: Option<&str>, name: &str) -> Result<(), Refusal> {
        match self.access(name) {
            Some(a) if !a.may_read(user) => Err(denied(name, a)),
            _ => Ok(()),
        }
    }

    /// Refuses `user` writing, removing, caching or sharing data set
    /// `name`.
    pub(crate) fn check_write(&self, user: Option<&str>, name: &str) -> Result<(), Refusal> {
        match self.access(name) {
            Some(a) if !a.may_write(user) => Err(denied(name, a)),
            _ => Ok(()),
        }
    }

    /// Refuses `user` abandoning blocks another asked for (a put of
    /// theirs in progress); an admin abandons any.
    pub(crate) fn check_abandon(&self, user: Option<&str>, ids: &[String]) -> Result<(), Refusal> {
        let Some(u) = user else {
            return Ok(());
        };
        let theirs = ids.iter().find_map(|b| {
            let by = match self.planners.get(b) {
                Some(by) if by == u => return None,
                Some(by) => by.as_str(),
                None if self.planned.contains_key(b) => "an admin",
                None => return None,
            };
            Some((b, by))
        });
        match theirs {
            Some((b, by)) => Err(Refusal::Denied(format!(
                "block {b} is being written by {by}"
            ))),
            None => Ok(()),
        }
    }

    /// Refuses `user` killing job `job` unless it runs as them.
    pub(crate) fn check_job(
        &self,
        user: Option<&str>,
        job: sluice_proto::ids::JobId,
    ) -> Result<(), Refusal> {
        match user {
            Some(u) if self.records.contains_key(&job) && self.job_user(job) != u => {
                let owner = match self.job_user(job) {
                    "" => "an admin",
                    o => o,
                };
                Err(Refusal::Denied(format!("job {job} belongs to {owner}")))
            }
            _ => Ok(()),
        }
    }
}

impl State {
    /// Refuses a submission whose user may not read an input, or write
    /// its output (when it replaces one), or submit to its pool. The
    /// blocks of its inputs are planned in the same step, so what is
    /// checked here is what its tasks read.
    pub(crate) fn check_submit(
        &self,
        user: Option<&str>,
        s: &super::Submission,
    ) -> Result<(), Refusal> {
        let r = &s.request;
        let inputs = r.input.split(',').filter(|n| !sluice_storage_like(n));
        for n in inputs.chain(s.side.iter().map(String::as_str)) {
            self.check_read(user, n)?;
        }
        self.check_write(user, &r.output)?;
        self.check_pool(user, r)
    }

    /// Refuses `user` removing cache directives of a data set they do not
    /// own.
    pub(crate) fn check_uncache(
        &self,
        user: Option<&str>,
        r: &proto::CacheRemoveRequest,
    ) -> Result<(), Refusal> {
        let named = self.catalog.cache_directives.iter().find(|d| d.id == r.id);
        match named {
            Some(d) => self.check_write(user, d.dataset.as_str()),
            None => self.check_write(user, &r.dataset),
        }
    }

    /// Refuses `user` submitting to a pool whose `submit` list leaves
    /// them out.
    pub(crate) fn check_pool(
        &self,
        user: Option<&str>,
        r: &sluice_request::JobRequest,
    ) -> Result<(), Refusal> {
        let Some(u) = user else {
            return Ok(());
        };
        let pool =
            (r.property(crate::policy::POOL_PROPERTY)).unwrap_or(crate::policy::DEFAULT_POOL);
        let pools = self.policy.pools();
        let listed = pools.iter().find(|(n, _)| n == pool);
        match listed.and_then(|(_, c)| c.submit.as_ref()) {
            Some(list) if !list.iter().any(|x| x == u) => Err(Refusal::Denied(format!(
                "user {u} may not submit to pool {pool}"
            ))),
            _ => Ok(()),
        }
    }
}

/// Whether an input names an external store (`hdfs://`, `s3://`,
/// `synthetic:`), not a data set.
fn sluice_storage_like(input: &str) -> bool {
    input.contains(':')
}

/// The refusal of an access to data set `name`.
fn denied(name: &str, a: &Access) -> Refusal {
    Refusal::Denied(format!("data set {name} belongs to {}", a.owner_name()))
}
