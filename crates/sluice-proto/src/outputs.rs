//! The caller's side of `MapOutputs`' table of addresses
//! (`MapOutputsRequest.addr_table`): the entries the coordinator has sent
//! so far, and each output's address filled in from its place.

use crate::proto::MapOutput;
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
        self.0.truncate(from as usize);
        self.0.extend(addrs);
        for o in outputs.iter_mut().filter(|o| o.addr.is_empty()) {
            o.addr = self.0.get(o.worker as usize).cloned().ok_or_else(|| {
                ClusterError::Remote(format!(
                    "map output {} names worker place {} of a table of {}",
                    o.map,
                    o.worker,
                    self.0.len()
                ))
            })?;
        }
        Ok(())
    }
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
    }
}
