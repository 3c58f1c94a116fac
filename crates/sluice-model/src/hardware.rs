//! The machine's rates the model charges movements at.

use serde::{Deserialize, Serialize};

/// Stated defaults for rates no probe measured (bytes/s): a commodity SATA
/// SSD and gigabit Ethernet, the paper's order of magnitude.
pub const DEFAULT_DISK_READ: f64 = 500e6;
/// See [`DEFAULT_DISK_READ`].
pub const DEFAULT_DISK_WRITE: f64 = 400e6;
/// See [`DEFAULT_DISK_READ`].
pub const DEFAULT_NETWORK: f64 = 110e6;
/// Memory copy bandwidth when no probe measured it: one channel of DDR4
/// copies at about this rate.
pub const DEFAULT_MEMORY: f64 = 5e9;

fn default_memory() -> f64 {
    DEFAULT_MEMORY
}

/// The rates the model uses, and where each came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hardware {
    /// `D_r`, bytes/s.
    pub disk_read: f64,
    /// `D_w`, bytes/s.
    pub disk_write: f64,
    /// `N`, bytes/s.
    pub network: f64,
    /// Memory copy bandwidth, bytes/s: what the page cache moves bytes at.
    #[serde(default = "default_memory")]
    pub memory: f64,
    /// Where the figures came from, naming any default used.
    pub source: String,
}

impl Hardware {
    /// The stated defaults, with the reason no measured figures are used.
    pub fn defaults(why: &str) -> Self {
        Hardware {
            disk_read: DEFAULT_DISK_READ,
            disk_write: DEFAULT_DISK_WRITE,
            network: DEFAULT_NETWORK,
            memory: DEFAULT_MEMORY,
            source: format!(
                "defaults (disk read {:.0} MB/s, disk write {:.0} MB/s, network {:.0} MB/s, \
                 memory {:.0} MB/s): {why}",
                DEFAULT_DISK_READ / 1e6,
                DEFAULT_DISK_WRITE / 1e6,
                DEFAULT_NETWORK / 1e6,
                DEFAULT_MEMORY / 1e6
            ),
        }
    }
}
