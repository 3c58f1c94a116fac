//! Following the active coordinator among several (`--coordinator A,B`):
//! the addresses, the one followed now, and which is tried next.
//!
//! With a standby coordinator, one address answers at a time: the others
//! refuse connections (a standby does not listen), or accept them in the
//! kernel and never answer (a stopped process), or answer every call
//! `UNAVAILABLE` ("no longer active": a coordinator that lost its lease).
//! Clients and workers keep a [`Following`]: the address followed now and
//! its channel. A call that finds it gone moves on to the next address
//! ([`Coordinators::next`], the one place that decides which), and the
//! caller pauses (its own capped backoff) only once every address has
//! failed since one last answered.
//!
//! Channels to one of several coordinators ([`watched`]) give up on a
//! connection within [`CONNECT_TIMEOUT`] and ping their coordinator every
//! [`KEEP_ALIVE`]: a call in flight to one that stopped answering fails
//! within [`KEEP_ALIVE`] + [`KEEP_ALIVE_TIMEOUT`], however long the call
//! may be held (a heartbeat, a job's wait). A single address keeps the
//! channel it always had.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tonic::transport::Channel;

use crate::auth::Secret;
use crate::proto::coordinator_client::CoordinatorClient;
use crate::signed::{Rpc, Signed, MAX_CONTROL_BODY};
use crate::ClusterError;

/// How long connecting to one of several coordinators may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How often a channel to one of several coordinators pings it.
pub const KEEP_ALIVE: Duration = Duration::from_secs(1);
/// How long a ping may wait for its answer before the connection, and
/// every call on it, is given up.
pub const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(2);

/// The coordinators' addresses, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinators {
    addrs: Vec<String>,
}

impl Coordinators {
    /// `A` or `A,B[,C...]`: addresses separated by commas (spaces around
    /// them ignored). An empty list or an empty entry is refused.
    pub fn parse(list: &str) -> Result<Self, ClusterError> {
        let addrs: Vec<String> = list.split(',').map(|a| a.trim().to_owned()).collect();
        if addrs.iter().any(String::is_empty) {
            return Err(ClusterError::Config(format!(
                "bad coordinator list {list:?}: expected ADDR or ADDR,ADDR,... with no empty entry"
            )));
        }
        Ok(Coordinators { addrs })
    }

    /// How many addresses.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    /// Never: a parsed list has an address.
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    /// Whether there are several (a single address is followed as a
    /// client always did).
    pub fn several(&self) -> bool {
        self.addrs.len() > 1
    }

    /// Address `i`.
    pub fn addr(&self, i: usize) -> &str {
        &self.addrs[i % self.addrs.len()]
    }

    /// Every address.
    pub fn all(&self) -> &[String] {
        &self.addrs
    }

    /// The address tried after address `i` failed: the next in the list,
    /// the first after the last.
    pub fn next(&self, i: usize) -> usize {
        (i + 1) % self.addrs.len()
    }
}

impl std::fmt::Display for Coordinators {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.addrs.join(","))
    }
}

/// A channel to the coordinator at `addr`, one of several: it connects
/// at its first call (within [`CONNECT_TIMEOUT`]) and again after a
/// connection is lost, and pings its coordinator ([`KEEP_ALIVE`]).
pub fn watched(addr: &str, secret: &Secret) -> Result<Rpc, ClusterError> {
    let ch = Channel::from_shared(format!("http://{addr}"))
        .map_err(|e| ClusterError::Config(format!("bad coordinator address {addr}: {e}")))?
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(KEEP_ALIVE)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .tcp_nodelay(true);
    let ch = crate::tls::grpc::connect_lazy(ch, addr)?;
    Ok(CoordinatorClient::new(Signed::new(ch, secret.clone()))
        .max_decoding_message_size(MAX_CONTROL_BODY)
        .max_encoding_message_size(MAX_CONTROL_BODY))
}

/// The coordinators and the one followed now.
#[derive(Debug)]
pub struct Following {
    list: Coordinators,
    secret: Secret,
    now: Mutex<Now>,
}

/// The address followed, its channel, how many addresses failed in a
/// row since one last answered, and when one last failed.
#[derive(Debug)]
struct Now {
    index: usize,
    rpc: Rpc,
    misses: usize,
    outage: Option<Instant>,
}

impl Following {
    /// Follows address `index` of `list` over `rpc`, a channel to it.
    pub fn new(list: Coordinators, secret: Secret, index: usize, rpc: Rpc) -> Self {
        let index = index % list.len();
        Following {
            list,
            secret,
            now: Mutex::new(Now {
                index,
                rpc,
                misses: 0,
                outage: None,
            }),
        }
    }

    /// Follows address `index` of `list` over a [`watched`] channel,
    /// connected at its first call.
    pub fn lazy(list: Coordinators, secret: Secret, index: usize) -> Result<Self, ClusterError> {
        let rpc = watched(list.addr(index), &secret)?;
        Ok(Self::new(list, secret, index, rpc))
    }

    fn now(&self) -> MutexGuard<'_, Now> {
        self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The addresses.
    pub fn list(&self) -> &Coordinators {
        &self.list
    }

    /// The address followed now and a channel to it.
    pub fn current(&self) -> (usize, Rpc) {
        let n = self.now();
        (n.index, n.rpc.clone())
    }

    /// A channel to the address followed now.
    pub fn rpc(&self) -> Rpc {
        self.now().rpc.clone()
    }

    /// Notes that no coordinator answered for a while (before this
    /// one was found).
    pub fn note_outage(&self) {
        self.now().outage = Some(Instant::now());
    }

    /// Whether a coordinator failed to answer within the last `d`: one
    /// that answers now may have just restarted or taken over.
    pub fn outage_within(&self, d: Duration) -> bool {
        self.now().outage.is_some_and(|t| t.elapsed() < d)
    }

    /// Address `index` answered.
    pub fn answered(&self, index: usize) {
        let mut n = self.now();
        if n.index == index {
            n.misses = 0;
        }
    }

    /// Address `index` failed as a coordinator that is gone does: the
    /// next address is followed (unless another caller moved on from it
    /// already). True when every address has failed in a row since one
    /// last answered, the time for the caller to pause. A single address
    /// keeps its channel (which connects again by itself) and is always
    /// at the end of its round.
    pub fn missed(&self, index: usize) -> bool {
        let mut n = self.now();
        if n.index != index {
            return false;
        }
        n.misses += 1;
        n.outage = Some(Instant::now());
        if self.list.several() {
            let next = self.list.next(index);
            match watched(self.list.addr(next), &self.secret) {
                Ok(rpc) => {
                    n.index = next;
                    n.rpc = rpc;
                }
                Err(e) => tracing::warn!("{e}"),
            }
        }
        n.misses.is_multiple_of(self.list.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::new(b"0123456789abcdef0123").unwrap()
    }

    #[test]
    fn lists_are_read_with_their_order_and_bad_ones_refused() {
        let l = Coordinators::parse("127.0.0.1:1, 127.0.0.1:2").unwrap();
        assert_eq!(l.all(), ["127.0.0.1:1", "127.0.0.1:2"]);
        assert!(l.several());
        assert_eq!(l.to_string(), "127.0.0.1:1,127.0.0.1:2");
        let one = Coordinators::parse("h:7070").unwrap();
        assert!(!one.several());
        assert_eq!(one.next(0), 0);
        for bad in ["", ",", "a,", ",b", "a,,b"] {
            let e = Coordinators::parse(bad).unwrap_err().to_string();
            assert!(e.contains("bad coordinator list"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn the_next_address_goes_round_the_list() {
        let l = Coordinators::parse("a:1,b:2,c:3").unwrap();
        assert_eq!([l.next(0), l.next(1), l.next(2)], [1, 2, 0]);
        assert_eq!(l.addr(4), "b:2");
    }

    #[tokio::test]
    async fn a_miss_moves_on_once_and_a_whole_round_of_misses_says_pause() {
        let l = Coordinators::parse("127.0.0.1:1,127.0.0.1:2,127.0.0.1:3").unwrap();
        let f = Following::lazy(l, secret(), 1).unwrap();
        assert!(!f.outage_within(Duration::from_secs(60)));
        assert_eq!(f.current().0, 1);
        assert!(!f.missed(1));
        assert_eq!(f.current().0, 2);
        // A second caller that failed on address 1 moves nothing.
        assert!(!f.missed(1));
        assert_eq!(f.current().0, 2);
        assert!(!f.missed(2));
        assert!(f.missed(0), "three misses in a row: a whole round");
        assert_eq!(f.current().0, 1);
        f.answered(1);
        assert!(!f.missed(1));
        assert!(f.outage_within(Duration::from_secs(60)));
        assert!(!f.outage_within(Duration::ZERO));
    }

    #[tokio::test]
    async fn a_single_address_keeps_its_place_and_pauses_at_each_miss() {
        let one = Coordinators::parse("127.0.0.1:1").unwrap();
        let f = Following::lazy(one, secret(), 0).unwrap();
        assert!(f.missed(0));
        assert!(f.missed(0));
        assert_eq!(f.current().0, 0);
    }
}
