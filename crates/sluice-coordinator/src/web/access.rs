//! Who a web request comes from: the admins' web token (the secret's) or
//! a user's (their key's, [`Secret::web_token`]); and the pages only an
//! admin sees (workers, the cache, `/metrics`).

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sluice_proto::auth::{check_web_request, Secret};
use sluice_proto::users::{user_key, Caller};

use crate::core::Core;

/// The caller whose token the request carries (the cluster's `secret`'s
/// or a user's of `core`'s catalog), that token, and whether it came in
/// the query (then the answer sets the cookie).
pub(super) fn web_caller(
    secret: &Secret,
    core: &std::sync::Mutex<Core>,
    req: &Request,
) -> Option<(Caller, String, bool)> {
    let (query, headers) = (req.uri().query(), req.headers());
    let (ok, in_query) = check_web_request(secret, query, headers);
    if ok {
        return Some((Caller::Admin, secret.web_token(), in_query));
    }
    let keys: Vec<(String, Secret)> = {
        let core = core.lock().unwrap_or_else(|p| p.into_inner());
        let users = &core.state.catalog.users;
        (users.iter())
            .map(|(n, u)| (n.clone(), user_key(secret, n, &u.salt)))
            .collect()
    };
    keys.into_iter().find_map(|(name, key)| {
        let (ok, in_query) = check_web_request(&key, query, headers);
        ok.then(|| (Caller::User(name), key.web_token(), in_query))
    })
}

/// Lets only an admin's request through.
pub(super) async fn admins_only(req: Request, next: Next) -> Response {
    match req.extensions().get::<Caller>() {
        Some(Caller::Admin) => next.run(req).await,
        _ => (
            StatusCode::FORBIDDEN,
            "403: permission denied: only an admin sees this page\n",
        )
            .into_response(),
    }
}
