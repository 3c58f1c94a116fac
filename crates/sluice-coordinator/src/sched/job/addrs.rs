//! A job's table of the data-plane addresses its winning maps ran at, so
//! that a reducer's call for map outputs names each output's worker by
//! its place in the table and each address crosses the wire once per
//! reducer (`MapOutputsRequest.addr_table`), not once per map output: at
//! 1,000 workers and 100,000 maps, 100 reducers would otherwise decode
//! ten million address strings.

use std::collections::HashMap;
use std::sync::Arc;

/// Addresses in the order they first won a map; places never change
/// while the job runs under this coordinator.
#[derive(Debug, Default)]
pub struct AddrTable {
    addrs: Vec<Arc<str>>,
    places: HashMap<Arc<str>, u32>,
}

impl AddrTable {
    /// The place of `addr`, added at the end if new.
    pub fn place(&mut self, addr: &Arc<str>) -> u32 {
        if let Some(&p) = self.places.get(addr) {
            return p;
        }
        let p = self.addrs.len() as u32;
        self.addrs.push(addr.clone());
        self.places.insert(addr.clone(), p);
        p
    }

    /// The entries from place `from` on.
    pub fn from(&self, from: usize) -> Vec<String> {
        let from = from.min(self.addrs.len());
        self.addrs[from..].iter().map(|a| a.to_string()).collect()
    }

    /// The address at `place` (empty past the table's end).
    pub fn addr(&self, place: u32) -> &str {
        self.addrs.get(place as usize).map_or("", |a| a)
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_keeps_its_first_place() {
        let mut t = AddrTable::default();
        let (a, b): (Arc<str>, Arc<str>) = ("h1:1".into(), "h2:1".into());
        assert_eq!(t.place(&a), 0);
        assert_eq!(t.place(&b), 1);
        assert_eq!(t.place(&"h1:1".into()), 0);
        assert_eq!(t.len(), 2);
        assert_eq!(t.from(1), vec!["h2:1".to_string()]);
        assert!(t.from(5).is_empty());
    }
}
