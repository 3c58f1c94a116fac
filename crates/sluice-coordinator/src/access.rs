//! Who a call comes from, and what the service lets them do: the users'
//! keys for the control plane's verification, calls only admins make,
//! and the users' listing.
//!
//! Every call reaches the service with its [`Caller`] (the verification
//! layer puts it in the request's extensions). Calls of the workers and
//! of cluster administration (`Register`, `Heartbeat`, `MapOutputs`,
//! `FetchFailed`, `ReportCorrupt`, `Users`, `Pools` with reload) are an
//! admin's only; the others are checked against the data set's or the
//! job's owner under the state's lock, with the event they guard.

use std::sync::{Arc, Mutex};

use sluice_proto::auth::Secret;
use sluice_proto::capability::{Capability, Mode};
use sluice_proto::proto;
use sluice_proto::signed::UserKeys;
use sluice_proto::users::{user_key, Caller};
use tonic::{Request, Status};

use crate::core::Core;

/// The caller of a verified call; a call without one did not pass the
/// verification layer and is refused.
pub(crate) fn caller<T>(req: &Request<T>) -> Result<Caller, Status> {
    req.extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| Status::unauthenticated("no verified caller"))
}

/// Refuses a call only an admin may make.
pub(crate) fn admin_only<T>(req: &Request<T>, what: &str) -> Result<(), Status> {
    match caller(req)? {
        Caller::Admin => Ok(()),
        Caller::User(u) => Err(Status::permission_denied(format!(
            "permission denied: only an admin may {what} (this call is user {u}'s)"
        ))),
    }
}

/// The users' keys as the verification layer looks them up: computed
/// from the catalog's salts at each call, so a removed user is refused
/// at once.
pub(crate) fn user_keys(core: Arc<Mutex<Core>>, secret: Secret) -> UserKeys {
    Arc::new(move |name: &str| {
        let core = core.lock().unwrap_or_else(|p| p.into_inner());
        let u = core.state.catalog.users.get(name)?;
        Some(user_key(&secret, name, &u.salt))
    })
}

/// Gives user `user` a capability to read each block of `d` (they may
/// read it: the caller checked).
pub(crate) fn grant_reads(secret: &Secret, user: &str, d: &mut proto::Dataset) {
    let now = sluice_proto::now_ms();
    for b in d.files.iter_mut().flat_map(|f| f.blocks.iter_mut()) {
        b.capability = Capability::issue(secret, user, &b.id, Mode::Read, now).to_text();
    }
}

/// Gives user `user` a capability to write each block planned for them.
pub(crate) fn grant_writes(secret: &Secret, user: &str, p: &mut proto::PlanBlocksReply) {
    let now = sluice_proto::now_ms();
    for b in &mut p.blocks {
        b.capability = Capability::issue(secret, user, &b.id, Mode::Write, now).to_text();
    }
}

/// The users, for `sluice user ls` (salts left out but for `with_salt`).
pub(crate) fn user_list(
    users: &std::collections::BTreeMap<String, sluice_proto::catalog::UserMeta>,
    with_salt: &str,
) -> sluice_proto::proto::UserList {
    sluice_proto::proto::UserList {
        users: users
            .iter()
            .map(|(n, u)| sluice_proto::proto::UserInfo {
                name: n.clone(),
                created_ms: u.created_ms,
                salt: if n == with_salt {
                    u.salt.clone()
                } else {
                    String::new()
                },
            })
            .collect(),
    }
}
