//! The client's plain types and their conversion to and from the wire.

use std::time::Duration;

use crate::proto;

/// One key and its value, as etcd stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// Revision of the key's creation (since it last did not exist).
    pub create_revision: i64,
    /// Revision of the key's last change.
    pub mod_revision: i64,
    /// Number of changes since creation (1 after the first put).
    pub version: i64,
    /// The lease the key is attached to, 0 if none.
    pub lease: i64,
}

impl From<proto::KeyValue> for Kv {
    fn from(kv: proto::KeyValue) -> Self {
        Kv {
            key: kv.key,
            value: kv.value,
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
            version: kv.version,
            lease: kv.lease,
        }
    }
}

/// A transaction: if every compare holds, `success` runs, else `failure`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Txn {
    /// Conditions, all of which must hold.
    pub compare: Vec<Compare>,
    /// Operations run when they hold.
    pub success: Vec<Op>,
    /// Operations run when one does not.
    pub failure: Vec<Op>,
}

/// An equality condition on one key. A missing key has create revision,
/// mod revision and version 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compare {
    /// The key's create revision equals (0: the key does not exist).
    CreateRevision {
        /// The key.
        key: Vec<u8>,
        /// The expected revision.
        equals: i64,
    },
    /// The key's last-modified revision equals.
    ModRevision {
        /// The key.
        key: Vec<u8>,
        /// The expected revision.
        equals: i64,
    },
    /// The key's value equals (false if the key does not exist).
    Value {
        /// The key.
        key: Vec<u8>,
        /// The expected value.
        equals: Vec<u8>,
    },
    /// The key's version equals (0: the key does not exist).
    Version {
        /// The key.
        key: Vec<u8>,
        /// The expected version.
        equals: i64,
    },
}

/// One operation of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Writes a key, attached to a lease if given.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// The lease, if any.
        lease: Option<i64>,
    },
    /// Deletes one key.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// Deletes every key that starts with the prefix.
    DeletePrefix {
        /// The prefix.
        prefix: Vec<u8>,
    },
    /// Reads one key.
    Get {
        /// The key.
        key: Vec<u8>,
    },
    /// Reads every key that starts with the prefix, in key order.
    GetPrefix {
        /// The prefix.
        prefix: Vec<u8>,
    },
}

/// What a transaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOutcome {
    /// Whether the compares held (so `success` ran).
    pub succeeded: bool,
    /// The store's revision after the transaction.
    pub revision: i64,
    /// The keys read by the `Get` and `GetPrefix` ops that ran, one list
    /// per op in op order.
    pub gets: Vec<Vec<Kv>>,
}

/// A granted lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The lease id.
    pub id: i64,
    /// The TTL etcd granted (at least its minimum, whole seconds).
    pub ttl: Duration,
}

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Written.
    Put,
    /// Deleted (by a delete or its lease ending); the event's key-value has
    /// only the key and the deletion's mod revision.
    Delete,
}

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Put or delete.
    pub kind: EventKind,
    /// The key after the change.
    pub kv: Kv,
}

/// The changes of one watch answer, in revision order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchBatch {
    /// The store's revision when etcd sent the batch: every change up to it
    /// has been delivered. Empty batches are progress notices.
    pub revision: i64,
    /// The changes, in revision order.
    pub events: Vec<Event>,
}

/// The key range `[key, end)` of the keys that start with `prefix`: `end`
/// is the prefix with its last byte below 0xff incremented and what follows
/// dropped, or `\0` (no end) when there is none. etcd refuses an empty key,
/// so the empty prefix is the range from `\0`.
pub(crate) fn prefix_range(prefix: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let key = if prefix.is_empty() {
        vec![0]
    } else {
        prefix.to_vec()
    };
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return (key, end);
        }
    }
    (key, vec![0])
}

pub(crate) fn range_request(key: &[u8], range_end: Vec<u8>) -> proto::RangeRequest {
    proto::RangeRequest {
        key: key.to_vec(),
        range_end,
        ..Default::default()
    }
}

fn compare_to_wire(c: Compare) -> proto::Compare {
    use proto::compare::{CompareTarget as T, TargetUnion as U};
    let (target, key, union) = match c {
        Compare::CreateRevision { key, equals } => (T::Create, key, U::CreateRevision(equals)),
        Compare::ModRevision { key, equals } => (T::Mod, key, U::ModRevision(equals)),
        Compare::Value { key, equals } => (T::Value, key, U::Value(equals)),
        Compare::Version { key, equals } => (T::Version, key, U::Version(equals)),
    };
    proto::Compare {
        result: proto::compare::CompareResult::Equal as i32,
        target: target as i32,
        key,
        target_union: Some(union),
        range_end: Vec::new(),
    }
}

fn op_to_wire(op: Op) -> proto::RequestOp {
    use proto::request_op::Request as R;
    let request = match op {
        Op::Put { key, value, lease } => R::RequestPut(proto::PutRequest {
            key,
            value,
            lease: lease.unwrap_or(0),
            prev_kv: false,
        }),
        Op::Delete { key } => R::RequestDeleteRange(proto::DeleteRangeRequest {
            key,
            ..Default::default()
        }),
        Op::DeletePrefix { prefix } => {
            let (key, range_end) = prefix_range(&prefix);
            R::RequestDeleteRange(proto::DeleteRangeRequest {
                key,
                range_end,
                prev_kv: false,
            })
        }
        Op::Get { key } => R::RequestRange(range_request(&key, Vec::new())),
        Op::GetPrefix { prefix } => {
            let (key, end) = prefix_range(&prefix);
            R::RequestRange(range_request(&key, end))
        }
    };
    proto::RequestOp {
        request: Some(request),
    }
}

impl Txn {
    pub(crate) fn into_wire(self) -> proto::TxnRequest {
        proto::TxnRequest {
            compare: self.compare.into_iter().map(compare_to_wire).collect(),
            success: self.success.into_iter().map(op_to_wire).collect(),
            failure: self.failure.into_iter().map(op_to_wire).collect(),
        }
    }
}

impl TxnOutcome {
    pub(crate) fn from_wire(r: proto::TxnResponse) -> crate::Result<TxnOutcome> {
        let revision = header_revision(r.header.as_ref(), "KV/Txn")?;
        let gets = r
            .responses
            .into_iter()
            .filter_map(|op| match op.response {
                Some(proto::response_op::Response::ResponseRange(range)) => {
                    Some(range.kvs.into_iter().map(Kv::from).collect())
                }
                _ => None,
            })
            .collect();
        Ok(TxnOutcome {
            succeeded: r.succeeded,
            revision,
            gets,
        })
    }
}

/// The revision of an answer's header, which etcd always sends.
pub(crate) fn header_revision(
    h: Option<&proto::ResponseHeader>,
    call: &'static str,
) -> crate::Result<i64> {
    h.map(|h| h.revision).ok_or(crate::EtcdError::BadResponse {
        call,
        reason: "no response header".into(),
    })
}

impl Event {
    pub(crate) fn from_wire(e: proto::Event) -> crate::Result<Event> {
        let kind = match proto::event::EventType::try_from(e.r#type) {
            Ok(proto::event::EventType::Put) => EventKind::Put,
            Ok(proto::event::EventType::Delete) => EventKind::Delete,
            Err(_) => {
                return Err(crate::EtcdError::BadResponse {
                    call: "Watch/Watch",
                    reason: format!("unknown event type {}", e.r#type),
                })
            }
        };
        let kv = e.kv.ok_or(crate::EtcdError::BadResponse {
            call: "Watch/Watch",
            reason: "an event without a key".into(),
        })?;
        Ok(Event {
            kind,
            kv: kv.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_range_ends_past_the_last_byte_below_0xff() {
        let range = |p: &[u8]| prefix_range(p);
        assert_eq!(range(b"a/"), (b"a/".to_vec(), b"a0".to_vec()));
        assert_eq!(range(b"a\xff"), (b"a\xff".to_vec(), b"b".to_vec()));
        assert_eq!(range(b"\xff\xff"), (b"\xff\xff".to_vec(), b"\0".to_vec()));
        assert_eq!(range(b""), (b"\0".to_vec(), b"\0".to_vec()));
    }

    #[test]
    fn answers_without_what_etcd_always_sends_are_bad_responses() {
        let no_header = proto::TxnResponse {
            header: None,
            succeeded: true,
            responses: vec![],
        };
        let e = TxnOutcome::from_wire(no_header).unwrap_err();
        assert!(
            matches!(e, crate::EtcdError::BadResponse { call: "KV/Txn", .. }),
            "{e:?}"
        );

        let unknown = proto::Event {
            r#type: 7,
            kv: Some(proto::KeyValue::default()),
            prev_kv: None,
        };
        let e = Event::from_wire(unknown).unwrap_err();
        assert!(e.to_string().contains("unknown event type 7"), "{e}");

        let keyless = proto::Event {
            r#type: 0,
            kv: None,
            prev_kv: None,
        };
        assert!(matches!(
            Event::from_wire(keyless),
            Err(crate::EtcdError::BadResponse { .. })
        ));
    }

    #[test]
    fn a_txn_goes_on_the_wire_as_etcd_expects() {
        let txn = Txn {
            compare: vec![Compare::CreateRevision {
                key: b"k".to_vec(),
                equals: 0,
            }],
            success: vec![Op::Put {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
                lease: Some(7),
            }],
            failure: vec![Op::GetPrefix {
                prefix: b"k/".to_vec(),
            }],
        };
        let wire = txn.into_wire();
        let c = &wire.compare[0];
        assert_eq!(c.target, proto::compare::CompareTarget::Create as i32);
        assert_eq!(c.result, proto::compare::CompareResult::Equal as i32);
        assert_eq!(
            c.target_union,
            Some(proto::compare::TargetUnion::CreateRevision(0))
        );
        match &wire.success[0].request {
            Some(proto::request_op::Request::RequestPut(p)) => assert_eq!(p.lease, 7),
            other => panic!("{other:?}"),
        }
        match &wire.failure[0].request {
            Some(proto::request_op::Request::RequestRange(r)) => {
                assert_eq!(
                    (r.key.as_slice(), r.range_end.as_slice()),
                    (&b"k/"[..], &b"k0"[..])
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
