//! How long this coordinator may act as the active one.
//!
//! A coordinator alone (its state directory, no etcd) is active for as
//! long as it runs ([`Term::forever`]). One of several that share etcd is
//! active while it holds the leader's lease: each renewal extends its
//! term to the time the lease would expire counted from when the renewal
//! was sent, so the term always ends before etcd could give the lease to
//! another. A process stopped past its term (SIGSTOP, a long pause) finds
//! on waking that its term has passed, before it learns anything from
//! etcd: it answers no call as the active coordinator from then on, and
//! its writes, each conditioned in etcd on the lease, fail.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::watch;

/// The time this coordinator may act as the active one; clones share it.
#[derive(Debug, Clone)]
pub struct Term(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// When it ends unless extended (`None`: never).
    until: Mutex<Option<Instant>>,
    /// Set once it has ended for good.
    ended: watch::Sender<bool>,
}

impl Term {
    /// A term with no end: the only coordinator.
    pub fn forever() -> Term {
        Term::new(None)
    }

    /// A term that ends at `until` unless extended.
    pub fn until(until: Instant) -> Term {
        Term::new(Some(until))
    }

    fn new(until: Option<Instant>) -> Term {
        Term(Arc::new(Inner {
            until: Mutex::new(until),
            ended: watch::channel(false).0,
        }))
    }

    /// Extends it to `to` (never shortens it).
    pub fn extend(&self, to: Instant) {
        let mut until = self.0.until.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(u) = until.as_mut() {
            *u = (*u).max(to);
        }
    }

    /// Ends it for good: the coordinator steps down.
    pub fn end(&self) {
        self.0.ended.send_replace(true);
    }

    /// Whether the coordinator is still the active one now.
    pub fn holds(&self) -> bool {
        if *self.0.ended.borrow() {
            return false;
        }
        let until = *self.0.until.lock().unwrap_or_else(|p| p.into_inner());
        until.is_none_or(|u| Instant::now() < u)
    }

    /// Resolves once [`Term::end`] was called.
    pub async fn ended(&self) {
        let mut rx = self.0.ended.subscribe();
        // The sender lives in `self`, so waiting cannot fail.
        let _ = rx.wait_for(|ended| *ended).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_term_holds_until_its_time_or_its_end() {
        assert!(Term::forever().holds());
        let t = Term::until(Instant::now() + Duration::from_secs(60));
        assert!(t.holds());
        t.end();
        assert!(!t.holds());
        let past = Term::until(Instant::now() - Duration::from_millis(1));
        assert!(!past.holds(), "a term past its time does not hold");
        past.extend(Instant::now() + Duration::from_secs(60));
        assert!(past.holds(), "a renewal extends it");
        past.extend(Instant::now());
        assert!(past.holds(), "an older renewal does not shorten it");
    }

    #[tokio::test]
    async fn ended_resolves_on_end_only() {
        let t = Term::forever();
        let waiting = tokio::spawn({
            let t = t.clone();
            async move { t.ended().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        t.end();
        waiting.await.unwrap();
    }
}
