//! The caller's side of `MapOutputs`' table of addresses
//! (`MapOutputsRequest.addr_table`): the entries the coordinator has sent
//! so far, and each output's address filled in from its place.

use crate::proto::{MapOutput, MapOutputsReply};
use crate::ClusterError;

/// The job's addresses as far as the coordinator has sent them.
#[derive(Debug, Clone, Default)]
pub struct OutputAddrs(Vec<String>);

impl OutputAddrs {
    /// Entries known: the next request's `addrs_known`.
    pub fn known(&self) -> u32 {
        self.0.len() as u32
    }

    /// Takes a reply's entries (from place `from` on; another
    /// coordinator's table starts again at 0) and fills in the address of
    /// each output that names a place. A place beyond the table is an
    /// error naming the output: nothing is guessed.
    pub fn resolve(
        &mut self,
        from: u32,
        addrs: Vec<String>,
        outputs: &mut [MapOutput],
    ) -> Result<(), ClusterError> {
        let places = outputs
            .iter()
            .filter(|o| o.addr.is_empty())
            .map(|o| (o.map, o.worker));
        self.check(from, addrs, places)?;
        for o in outputs.iter_mut().filter(|o| o.addr.is_empty()) {
            o.addr = self.0[o.worker as usize].clone();
        }
        Ok(())
    }

    /// [`OutputAddrs::resolve`] without filling in the addresses: takes
    /// the reply's entries and checks that each `(map, worker place)` is
    /// in the table (the simulated reduces of `sluice bench cluster-sim`,
    /// which fetch nothing, and would otherwise copy a string an output:
    /// ten million of them in one process at 100 reduces of 100,000
    /// maps).
    pub fn check(
        &mut self,
        from: u32,
        addrs: Vec<String>,
        places: impl IntoIterator<Item = (u32, u32)>,
    ) -> Result<(), ClusterError> {
        self.0.truncate(from as usize);
        self.0.extend(addrs);
        let n = self.0.len();
        match places.into_iter().find(|&(_, w)| w as usize >= n) {
            None => Ok(()),
            Some((map, w)) => Err(ClusterError::Remote(format!(
                "map output {map} names worker place {w} of a table of {n}"
            ))),
        }
    }
}

/// Checks that a `MapOutputs` reply's columns of outputs
/// (`MapOutputsRequest.columns`) are as long as each other.
pub fn check_columns(r: &MapOutputsReply) -> Result<(), ClusterError> {
    let n = r.output_maps.len();
    if r.output_attempts.len() == n && r.output_workers.len() == n {
        return Ok(());
    }
    Err(ClusterError::Remote(format!(
        "a map outputs reply's columns differ in length: {n} maps, {} attempts, {} workers",
        r.output_attempts.len(),
        r.output_workers.len()
    )))
}

/// A `MapOutputs` reply's outputs as messages, those it sent as columns
/// first (their `addr` empty, for [`OutputAddrs::resolve`] to fill in).
pub fn outputs(r: &mut MapOutputsReply) -> Result<Vec<MapOutput>, ClusterError> {
    check_columns(r)?;
    let columns = r.output_maps.iter().zip(&r.output_attempts);
    let mut all: Vec<MapOutput> = columns
        .zip(&r.output_workers)
        .map(|((&map, &attempt), &worker)| MapOutput {
            map,
            attempt,
            worker,
            addr: String::new(),
        })
        .collect();
    all.append(&mut r.outputs);
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(map: u32, worker: u32) -> MapOutput {
        MapOutput {
            map,
            worker,
            ..Default::default()
        }
    }

    #[test]
    fn places_resolve_across_replies_and_a_new_table_starts_again() {
        let mut t = OutputAddrs::default();
        let mut first = vec![at(0, 1), at(1, 0)];
        t.resolve(0, vec!["a:1".into(), "b:1".into()], &mut first)
            .unwrap();
        assert_eq!(first[0].addr, "b:1");
        assert_eq!(first[1].addr, "a:1");
        assert_eq!(t.known(), 2);
        let mut next = vec![at(2, 2), at(3, 0)];
        t.resolve(2, vec!["c:1".into()], &mut next).unwrap();
        assert_eq!(
            (next[0].addr.as_str(), next[1].addr.as_str()),
            ("c:1", "a:1")
        );
        // Another coordinator's table replaces this one.
        let mut other = vec![at(4, 0)];
        t.resolve(0, vec!["z:1".into()], &mut other).unwrap();
        assert_eq!((other[0].addr.as_str(), t.known()), ("z:1", 1));
        // An output that carries its address keeps it.
        let mut plain = vec![MapOutput {
            addr: "p:1".into(),
            ..at(5, 9)
        }];
        t.resolve(1, Vec::new(), &mut plain).unwrap();
        assert_eq!(plain[0].addr, "p:1");
    }

    #[test]
    fn a_place_beyond_the_table_is_an_error_naming_the_output() {
        let mut t = OutputAddrs::default();
        let mut bad = vec![at(7, 3)];
        let e = t.resolve(0, vec!["a:1".into()], &mut bad).unwrap_err();
        assert!(
            e.to_string()
                .contains("map output 7 names worker place 3 of a table of 1"),
            "{e}"
        );
        // Checked alone, the same: the table grows, nothing is filled in.
        let mut t = OutputAddrs::default();
        let e = t.check(0, vec!["a:1".into()], [(7, 3)]).unwrap_err();
        assert!(
            e.to_string().contains("worker place 3 of a table of 1"),
            "{e}"
        );
        t.check(1, Vec::new(), [(8, 0)]).unwrap();
        assert_eq!(t.known(), 1);
    }

    #[test]
    fn outputs_sent_as_columns_read_as_messages_and_uneven_columns_are_refused() {
        let mut r = MapOutputsReply {
            output_maps: vec![4, 2],
            output_attempts: vec![0, 1],
            output_workers: vec![1, 0],
            outputs: vec![MapOutput {
                addr: "p:1".into(),
                ..at(9, 0)
            }],
            ..Default::default()
        };
        check_columns(&r).unwrap();
        let mut all = outputs(&mut r).unwrap();
        let seen: Vec<_> = all.iter().map(|o| (o.map, o.attempt, o.worker)).collect();
        assert_eq!(seen, [(4, 0, 1), (2, 1, 0), (9, 0, 0)]);
        let mut t = OutputAddrs::default();
        t.resolve(0, vec!["a:1".into(), "b:1".into()], &mut all)
            .unwrap();
        let addrs: Vec<_> = all.iter().map(|o| o.addr.as_str()).collect();
        assert_eq!(addrs, ["b:1", "a:1", "p:1"]);
        r.output_workers.pop();
        let e = check_columns(&r).unwrap_err();
        assert!(
            e.to_string()
                .contains("columns differ in length: 2 maps, 2 attempts, 1 workers"),
            "{e}"
        );
        assert!(outputs(&mut r).is_err());
    }
}
