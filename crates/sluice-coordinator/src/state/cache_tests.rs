//! The block cache played on the state: cached blocks placing maps, and
//! cache directives pinning blocks on their holders.

use super::tests::{check, config, settings, Sim, A, B, E::*};
use super::*;
use crate::config::{Delay, Settings};
use crate::policy::Fifo;

/// Cache 2, node 4, rack 6, data center 8 missed offers.
fn cache_settings() -> Settings {
    Settings {
        delay: Delay {
            cache: 2,
            node: 4,
            rack: 6,
            datacenter: 8,
        },
        ..settings()
    }
}

#[test]
fn a_cached_block_waits_for_its_cache_then_runs_node_local_elsewhere() {
    // Both blocks on a and b; b caches block 0.
    let start = [
        A,
        B,
        Data("in", &[&["a", "b"], &["a", "b"]]),
        Caches("b", &["bin0"]),
        Job("in", "p", 0),
    ];
    let mut script = start.to_vec();
    script.extend([Beat("a"), Beat("b"), Beat("a")]);
    check(
        Box::new(Fifo),
        cache_settings(),
        &script,
        &[
            "b: -",
            // a holds both blocks, but block 0 is cached on b: the job
            // waits for the cache level.
            "a: -",
            "b: j1 m00000 cache",
            // A cache-local launch resets the count, and no pending map's
            // block is cached: node level at once.
            "a: j1 m00001 node",
        ],
    );
    // b never asks: once past 2 missed offers (m = 0, 1, 2 decline), a
    // takes a map node-local, the one whose block no one caches first.
    let mut script = start.to_vec();
    script.extend([Beat("a"), Beat("a"), Beat("a"), Beat("a"), Beat("b")]);
    check(
        Box::new(Fifo),
        cache_settings(),
        &script,
        &[
            "b: -",
            "a: -",
            "a: -",
            "a: -",
            "a: j1 m00001 node",
            "b: j1 m00000 cache",
        ],
    );
}

#[test]
fn cache_directives_pin_blocks_on_one_holder_and_go_with_their_data_set() {
    let mut sim = Sim::new(config(settings(), None), Box::new(Fifo));
    for e in [A, B, Data("in", &[&["a", "b"], &["b", "a"]])] {
        sim.run(e);
    }
    let add = |worker: &str, block: Option<u32>| proto::CacheAddRequest {
        dataset: "in".into(),
        has_block: block.is_some(),
        block: block.unwrap_or(0),
        worker: worker.into(),
        pool: String::new(),
    };
    // Through a heartbeat: a reply with only pins in it is sent, not
    // held (a held reply would lose them).
    let pins = |sim: &mut Sim, uid: &'static str| {
        let beat = proto::HeartbeatRequest {
            worker_id: sim.workers[uid].0,
            epoch: 1,
            ..Default::default()
        };
        match sim.handle(Event::Heartbeat(beat)) {
            Answer::Heartbeat(Some(r)) => r
                .pins
                .map(|p| p.blocks.into_iter().map(|b| b.id).collect::<Vec<_>>()),
            Answer::Heartbeat(None) => None,
            a => panic!("{a:?}"),
        }
    };
    // Every block, one holder each: the first live replica.
    sim.handle(Event::CacheAdd(add("", None)));
    assert_eq!(pins(&mut sim, "a"), Some(vec!["bin0".to_string()]));
    assert_eq!(pins(&mut sim, "b"), Some(vec!["bin1".to_string()]));
    // Told once, until it changes.
    assert_eq!(pins(&mut sim, "a"), None);
    // One block on a named worker, as well.
    sim.handle(Event::CacheAdd(add("a", Some(1))));
    assert_eq!(
        pins(&mut sim, "a"),
        Some(vec!["bin0".into(), "bin1".into()])
    );
    // Refused: no such block, no such worker.
    let bad = sim.st.handle(Event::CacheAdd(add("", Some(2))), sim.at);
    assert!(matches!(
        bad.answer,
        Err(Refusal::NoBlock {
            blocks: 2,
            block: 2,
            ..
        })
    ));
    let bad = sim.st.handle(Event::CacheAdd(add("zz", None)), sim.at);
    assert!(matches!(bad.answer, Err(Refusal::NoLiveWorker(w)) if w == "zz"));
    // Removing the data set removes its directives: nothing pinned.
    sim.handle(Event::RemoveDataset("in".into()));
    assert!(sim.st.catalog.cache_directives.is_empty());
    assert_eq!(pins(&mut sim, "a"), Some(vec![]));
}
