//! Locality: how close a worker is to a map's input ([`Locality`]), where
//! the live workers are and what they cache ([`Topology`]), and the
//! worker asking for work ([`Asker`]).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use sluice_proto::ids::WorkerId;

use crate::input::MapInput;
use sluice_proto::catalog::BlockMeta;

/// How close a map runs to its input, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Locality {
    /// Its block is cached in the worker's memory.
    Cache,
    /// The worker holds a replica of its block (or it reads no block).
    Node,
    /// A live holder is in the worker's rack.
    Rack,
    /// A live holder is in the worker's data center.
    Datacenter,
    /// Anywhere else.
    Any,
}

impl Locality {
    /// Every level, best first.
    pub const ALL: [Locality; 5] = [
        Locality::Cache,
        Locality::Node,
        Locality::Rack,
        Locality::Datacenter,
        Locality::Any,
    ];

    /// `cache`, `node`, `rack`, `datacenter` or `any`.
    pub fn name(self) -> &'static str {
        match self {
            Locality::Cache => "cache",
            Locality::Node => "node",
            Locality::Rack => "rack",
            Locality::Datacenter => "datacenter",
            Locality::Any => "any",
        }
    }
}

/// Where the live workers are, and which blocks each caches (borrowed
/// from the workers' own sets, so building it costs the number of
/// workers, not of cached blocks).
#[derive(Debug, Clone, Default)]
pub struct Topology<'c> {
    places: Cow<'c, HashMap<String, Place>>,
    /// Each live worker's cached blocks, as a set and as reported.
    caches: HashMap<&'c str, (&'c HashSet<String>, &'c [String])>,
}

/// A worker's place in the network.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Place {
    pub datacenter: String,
    pub rack: String,
}

impl<'c> Topology<'c> {
    /// The live workers, by uid.
    pub fn new(places: impl IntoIterator<Item = (String, Place)>) -> Self {
        Topology {
            places: Cow::Owned(places.into_iter().collect()),
            caches: HashMap::new(),
        }
    }

    /// The live workers, by uid, from a map kept between offers (built
    /// again only when a worker registers or is lost).
    pub fn of(places: &'c HashMap<String, Place>) -> Self {
        Topology {
            places: Cow::Borrowed(places),
            caches: HashMap::new(),
        }
    }

    /// With the blocks each live worker caches: `(uid, set, list)`.
    pub fn with_caches(
        mut self,
        caches: impl IntoIterator<Item = (&'c str, &'c HashSet<String>, &'c [String])>,
    ) -> Self {
        for (uid, set, list) in caches {
            if !list.is_empty() {
                self.caches.insert(uid, (set, list));
            }
        }
        self
    }

    /// Whether worker `uid` caches block `block`.
    pub fn caches(&self, block: &str, uid: &str) -> bool {
        self.caches
            .get(uid)
            .is_some_and(|(set, _)| set.contains(block))
    }

    /// The blocks live worker `uid` caches.
    pub fn cached_by(&self, uid: &str) -> &[String] {
        self.caches.get(uid).map_or(&[], |(_, list)| list)
    }

    /// The blocks live workers cache (a block cached twice comes twice).
    pub fn cached_blocks(&self) -> impl Iterator<Item = &str> {
        self.caches
            .values()
            .flat_map(|(_, list)| list.iter().map(String::as_str))
    }

    /// How many blocks [`Topology::cached_blocks`] gives.
    pub fn cached_count(&self) -> usize {
        self.caches.values().map(|(_, list)| list.len()).sum()
    }

    /// The live workers other than `w` in its rack ([`Locality::Rack`]),
    /// or in its data center outside its rack ([`Locality::Datacenter`]).
    pub fn near<'t>(&'t self, w: &'t Asker<'_>, level: Locality) -> impl Iterator<Item = &'t str> {
        self.places
            .iter()
            .filter(move |(u, p)| is_near(w, u, p, level))
            .map(|(u, _)| u.as_str())
    }

    /// Whether live worker `uid` is one [`Topology::near`] gives for `w`
    /// at `level`.
    pub fn is_near(&self, w: &Asker<'_>, uid: &str, level: Locality) -> bool {
        self.places
            .get(uid)
            .is_some_and(|p| is_near(w, uid, p, level))
    }

    /// Whether some live worker caches block `block`.
    pub fn cached_anywhere(&self, block: &str) -> bool {
        self.caches.values().any(|(set, _)| set.contains(block))
    }

    /// Where live worker `uid` is; `None` when it is not live.
    pub fn place(&self, uid: &str) -> Option<&Place> {
        self.places.get(uid)
    }

    /// Live workers.
    pub fn len(&self) -> usize {
        self.places.len()
    }

    /// Whether no worker is live.
    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }
}

/// A worker asking for work.
#[derive(Debug, Clone)]
pub struct Asker<'a> {
    pub id: WorkerId,
    pub uid: &'a str,
    pub addr: &'a str,
    /// Where it is.
    pub place: &'a Place,
    /// Live workers in the cluster.
    pub live: usize,
    /// Map slots of the live workers.
    pub map_slots: usize,
}

/// Whether worker `uid` at `p` is another worker than `w` in its rack
/// ([`Locality::Rack`]), or in its data center outside its rack
/// ([`Locality::Datacenter`]).
fn is_near(w: &Asker<'_>, uid: &str, p: &Place, level: Locality) -> bool {
    uid != w.uid
        && match level {
            Locality::Rack => p == w.place,
            Locality::Datacenter => p.datacenter == w.place.datacenter && p != w.place,
            _ => false,
        }
}

/// How close `w` is to the nearest live replica of `b`.
pub(super) fn block_level(b: &BlockMeta, w: &Asker<'_>, topo: &Topology) -> Locality {
    holders_level(&b.replicas, w, topo)
}

/// How close `w` is to the nearest live worker of `holders`.
pub(super) fn holders_level(holders: &[String], w: &Asker<'_>, topo: &Topology) -> Locality {
    holders
        .iter()
        .filter_map(|u| topo.place(u).map(|p| (u, p)))
        .map(|(u, p)| {
            if u == w.uid {
                Locality::Node
            } else if p == w.place {
                Locality::Rack
            } else if p.datacenter == w.place.datacenter {
                Locality::Datacenter
            } else {
                Locality::Any
            }
        })
        .min()
        .unwrap_or(Locality::Any)
}

/// Whether a block `input` reads is cached on a live worker.
pub(super) fn cached_anywhere(input: &MapInput, topo: &Topology) -> bool {
    input
        .blocks()
        .iter()
        .any(|b| topo.cached_anywhere(b.id.as_str()))
}
