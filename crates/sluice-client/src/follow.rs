//! A client's first coordinator among several (`--coordinator A,B`): the
//! first that answers a call within [`CONNECT_TIMEOUT`], starting with
//! the one that answered this process last. Which address comes after
//! which is [`Coordinators::next`]'s to say.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use sluice_proto::auth::Secret;
use sluice_proto::follow::{watched, Coordinators, Following, CONNECT_TIMEOUT};
use sluice_proto::proto::Empty;
use sluice_proto::signed::Rpc;
use sluice_proto::ClusterError;

use crate::patience::{Patience, Waiting};

type Result<T> = std::result::Result<T, ClusterError>;

/// How long a client with no patience keeps trying (as with one address).
const WITHOUT_PATIENCE: Duration = Duration::from_secs(5);

/// The pause between rounds while a client with no patience tries.
const ROUND_PAUSE: Duration = Duration::from_millis(100);

/// The address of each list that answered this process last.
static LAST: Mutex<Option<HashMap<String, usize>>> = Mutex::new(None);

fn remembered(list: &Coordinators) -> usize {
    let last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    last.as_ref()
        .and_then(|m| m.get(&list.to_string()).copied())
        .unwrap_or(0)
}

/// Remembers the coordinator `follow` follows now, where the next
/// client of this process starts (after a call that it answered).
pub(crate) fn remember_current(follow: &Following) {
    if follow.list().several() {
        remember(follow.list(), follow.current().0);
    }
}

fn remember(list: &Coordinators, index: usize) {
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    last.get_or_insert_with(HashMap::new)
        .insert(list.to_string(), index);
}

/// Follows the first coordinator of `list` that answers, trying each in
/// turn from the one that answered last; after a round with no answer it
/// waits as `patience` says (with none, it tries for 5 s silently).
pub(crate) async fn first_answering(
    list: Coordinators,
    secret: &Secret,
    patience: &Patience,
) -> Result<Following> {
    let began = Instant::now();
    let mut waiting = Waiting::new();
    let mut at = remembered(&list);
    let mut outage = false;
    loop {
        let mut why = Vec::new();
        for _ in 0..list.len() {
            match probe(list.addr(at), secret).await {
                Ok(rpc) => {
                    remember(&list, at);
                    let f = Following::new(list, secret.clone(), at, rpc);
                    if outage {
                        f.note_outage();
                    }
                    return Ok(f);
                }
                Err(e @ ClusterError::Config(_)) => return Err(e),
                Err(e) if crate::patience::certificate_refused(&e.to_string()) => return Err(e),
                Err(e) => why.push(e.to_string()),
            }
            at = list.next(at);
        }
        outage = true;
        let pause = if began.elapsed() < WITHOUT_PATIENCE && patience.wait.is_zero() {
            Some(ROUND_PAUSE)
        } else {
            waiting.pause(patience)
        };
        match pause {
            Some(p) => tokio::time::sleep(p).await,
            None => {
                return Err(ClusterError::Rpc(format!(
                    "no coordinator of {list} answered: {}",
                    why.join("; ")
                )))
            }
        }
    }
}

/// A channel to the coordinator at `addr` if it answers a call within
/// [`CONNECT_TIMEOUT`].
pub(crate) async fn probe(addr: &str, secret: &Secret) -> Result<Rpc> {
    let rpc = watched(addr, secret)?;
    match tokio::time::timeout(CONNECT_TIMEOUT, rpc.clone().info(Empty {})).await {
        Ok(Ok(_)) => Ok(rpc),
        Ok(Err(s)) => Err(ClusterError::Rpc(format!("{addr}: {}", s.message()))),
        Err(_) => Err(ClusterError::Rpc(format!(
            "{addr}: no answer within {} ms",
            CONNECT_TIMEOUT.as_millis()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::new(b"0123456789abcdef0123").unwrap()
    }

    /// A port nothing listens on.
    fn dead() -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    }

    #[tokio::test]
    async fn with_no_coordinator_answering_the_error_names_each_one() {
        let list = Coordinators::parse(&format!("{},{}", dead(), dead())).unwrap();
        let patience = Patience {
            wait: Duration::from_millis(300),
            notice: None,
        };
        let e = first_answering(list.clone(), &secret(), &patience)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("no coordinator of {list} answered")),
            "{e}"
        );
        for a in list.all() {
            assert!(e.contains(a.as_str()), "{e}");
        }
    }

    #[tokio::test]
    async fn a_coordinator_that_accepts_and_never_answers_is_left_within_the_timeout() {
        // The kernel accepts connections to a listener nobody serves.
        let hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = hole.local_addr().unwrap().to_string();
        let t0 = Instant::now();
        let e = probe(&addr, &secret()).await.unwrap_err().to_string();
        assert!(e.contains("no answer within"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn the_address_that_answered_last_is_tried_first() {
        let list = Coordinators::parse("127.0.0.1:9,127.0.0.1:8").unwrap();
        assert_eq!(remembered(&list), 0);
        remember(&list, 1);
        assert_eq!(remembered(&list), 1);
        // A client that moved on to another address remembers it.
        let f = Following::lazy(list.clone(), secret(), 1).unwrap();
        f.missed(1);
        remember_current(&f);
        assert_eq!(remembered(&list), 0);
    }
}
