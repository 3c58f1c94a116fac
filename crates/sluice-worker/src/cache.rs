//! The worker's block cache (seed 002): stored blocks held in memory the
//! OS cannot page out, read by map tasks in place.
//!
//! A block enters the cache when a map first reads it here (admission on
//! first read: the map that missed reads its block into the cache and then
//! reads it in place, so the map's own verified read fills the cache) or
//! when a cache directive pins it (the worker's loading thread reads it).
//! Either way it is read from its file through its chunk checksums (a
//! damaged block is never admitted) into an anonymous mapping that is then
//! made read-only and locked with `mlock`, as an HDFS DataNode locks the
//! replicas it caches.
//! Maps read a cached block as a slice of that mapping: no copy, and no
//! second checksum pass (the bytes were verified when they were loaded
//! and locked memory does not change under them).
//!
//! Admission policies: [`Policy::FirstCome`] (the seed's: admit while
//! there is room, never evict), [`Policy::Lru`] (evict the least recently
//! used blocks to make room) and [`Policy::TinyLfu`] (LRU eviction, but a
//! block is admitted only if it was read more often lately than the block
//! it would evict, TinyLFU's admission as Caffeine has it: repeated scans
//! of more data than the cache holds keep a stable part cached instead of
//! evicting every block before its next read). Pinned blocks are admitted whatever
//! the policy while there is room and never evicted; unpinning evicts.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sluice_proto::proto;

/// How blocks are admitted when the cache is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Admit while there is room; a full cache admits nothing more.
    FirstCome,
    /// Evict the least recently used unpinned blocks to make room.
    Lru,
    /// LRU eviction behind a frequency filter: admit a block only if it
    /// was read more often lately than the one it would evict.
    TinyLfu,
}

impl Policy {
    /// `first` or `lru`.
    pub fn name(self) -> &'static str {
        match self {
            Policy::FirstCome => "first",
            Policy::Lru => "lru",
            Policy::TinyLfu => "tinylfu",
        }
    }

    /// From its name.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "first" => Ok(Policy::FirstCome),
            "lru" => Ok(Policy::Lru),
            "tinylfu" => Ok(Policy::TinyLfu),
            other => Err(format!(
                "unknown cache policy {other:?} (first, lru or tinylfu)"
            )),
        }
    }
}

/// A cached block: read-only memory locked in RAM, [`held`] bytes of
/// which the block's own are the first.
pub struct Locked {
    map: memmap2::Mmap,
    len: usize,
}

impl AsRef<[u8]> for Locked {
    fn as_ref(&self) -> &[u8] {
        &self.map[..self.len]
    }
}

impl Locked {
    /// The bytes it holds in memory (its block's, rounded up).
    fn held(&self) -> u64 {
        self.map.len() as u64
    }
}

/// The memory a block of `len` bytes is held in: `len` rounded up to a
/// granule of about a 64th of it (a power of two, at most a 2 MiB huge
/// page; tiny blocks exactly). Blocks are cut at record ends, so the
/// blocks of a data set differ in length by a few bytes; rounded, they
/// hold the same length, and under LRU a block evicted for another takes
/// its memory over (`Locked::room_from`). The cache counts what is
/// held, so its capacity bounds the memory it locks; the rounding costs
/// at most a 64th of it.
pub fn held(len: u64) -> u64 {
    const HUGE_PAGE: u64 = 2 << 20;
    let granule = (len / 64).max(1);
    let granule = (1u64 << granule.ilog2()).min(HUGE_PAGE);
    len.next_multiple_of(granule)
}

/// A block's memory while it is filled: the block's bytes of a mapping
/// of [`held`] length (the rest is never read).
pub(crate) struct Room {
    map: memmap2::MmapMut,
    len: usize,
}

impl std::ops::Deref for Room {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map[..self.len]
    }
}

impl std::ops::DerefMut for Room {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.map[..self.len]
    }
}

/// Why a block could not be loaded.
#[derive(Debug)]
pub enum LoadError<E> {
    /// Reading it failed (its file is damaged or unreadable).
    Fill(E),
    /// The memory could not be mapped or locked.
    Memory(String),
}

impl Locked {
    /// `len` bytes filled by `fill` (in the memory of an evicted block
    /// that held as much if `evicted` has one no reader holds), then made
    /// read-only and locked.
    fn load<E>(
        len: usize,
        evicted: Vec<Arc<Locked>>,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Self, LoadError<E>> {
        let mut room = Self::room_from(len, evicted).map_err(LoadError::Memory)?;
        fill(&mut room).map_err(LoadError::Fill)?;
        Self::seal(room).map_err(LoadError::Memory)
    }

    /// `held` bytes of fresh memory on transparent huge pages where the
    /// kernel gives them (`MADV_HUGEPAGE`): filling a 32 MB block then
    /// faults in 16 pages instead of 8,192, whose faults and zeroing were
    /// most of what admitting a block cost (on this project's virtual
    /// machines a 4 KiB first touch takes about 1.7 us). Where huge pages
    /// are off the advice is ignored and the pages fault in as filled.
    fn room(held: usize) -> Result<memmap2::MmapMut, String> {
        let map = memmap2::MmapOptions::new()
            .len(held)
            .map_anon()
            .map_err(|e| format!("mapping {held} bytes: {e}"))?;
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        Ok(map)
    }

    /// Room for a block of `len` bytes: the memory of one of the
    /// `evicted` blocks if one held as much as this one will ([`held`])
    /// and no reader holds it any more, else fresh. Under LRU every miss
    /// of a full cache evicts a block to admit one of about the same size;
    /// taking the evicted block's pages, already faulted in and locked,
    /// spares unmapping 32 MB and faulting and zeroing 32 MB anew (the
    /// misses of an LRU cache were 15% slower than reads with no cache
    /// while they took fresh memory). The filling overwrites every byte of
    /// the block before it is sealed; the rest of the mapping is never
    /// read. The other evicted blocks are unmapped here, outside the
    /// cache's lock.
    fn room_from(len: usize, evicted: Vec<Arc<Locked>>) -> Result<Room, String> {
        let want = held(len as u64);
        let mut reused = None;
        for e in evicted {
            if reused.is_some() || e.held() != want {
                continue;
            }
            if let Ok(Locked { map, .. }) = Arc::try_unwrap(e) {
                reused = map.make_mut().ok();
            }
        }
        let map = match reused {
            Some(map) => map,
            None => Self::room(want as usize)?,
        };
        Ok(Room { map, len })
    }

    /// Filled memory made read-only and locked.
    fn seal(room: Room) -> Result<Self, String> {
        let Room { map, len } = room;
        let held = map.len();
        let map = map
            .make_read_only()
            .map_err(|e| format!("protecting {held} bytes: {e}"))?;
        map.lock().map_err(|e| {
            format!(
                "locking {held} bytes in memory: {e} (RLIMIT_MEMLOCK is {}; raise it with \
                 `ulimit -l` or lower --cache-size)",
                memlock_limit().map_or("unknown".into(), |l| l.to_string())
            )
        })?;
        Ok(Locked { map, len })
    }
}

/// A block being admitted by the map that reads it: its room in the cache
/// is reserved and its memory mapped; the map's reader takes the memory,
/// reads the block's chunks straight into it, verifies each there and
/// scans the records in place ([`Fill`](sluice_formats::chunked::Fill)),
/// then gives it back whole, and the block is sealed and cached. A
/// filling whose memory never comes back whole (the map failed, or met a
/// damaged chunk) gives its room back when dropped: nothing partial or
/// unverified is ever cached. Its memory waits among the cache's rooms
/// until the reader takes it.
pub struct Filling {
    inner: Arc<Mutex<Inner>>,
    id: String,
    len: u64,
    /// Its memory's key among the cache's rooms.
    ticket: u64,
    /// The block was cached or its room given back.
    settled: AtomicBool,
}

impl Filling {
    /// Ends the load: caches the block, or gives its room back (the
    /// memory, if no reader took it, is unmapped outside the lock).
    fn settle(&self, loaded: Option<Arc<Locked>>) {
        let unused = lock(&self.inner).rooms.remove(&self.ticket);
        settle(&self.inner, &self.id, self.len, loaded);
        drop(unused);
    }
}

impl sluice_formats::chunked::Fill for Filling {
    fn take(&self) -> Option<Box<dyn sluice_formats::chunked::FillMemory>> {
        let map = lock(&self.inner).rooms.remove(&self.ticket)?;
        Some(Box::new(map))
    }

    fn filled(&self, memory: Box<dyn sluice_formats::chunked::FillMemory>) {
        if self.settled.swap(true, Ordering::AcqRel) {
            return;
        }
        let sealed = match memory.into_any().downcast::<Room>() {
            Ok(m) if m.len as u64 == self.len => Locked::seal(*m),
            _ => Err("the memory handed back is not the block's".to_owned()),
        };
        if let Err(m) = &sealed {
            tracing::warn!("block {} not cached: {m}", self.id);
        }
        self.settle(sealed.ok().map(Arc::new));
    }
}

impl Drop for Filling {
    fn drop(&mut self) {
        if !*self.settled.get_mut() {
            self.settle(None);
        }
    }
}

fn lock(inner: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(|p| p.into_inner())
}

/// Ends the load of block `id` of `len` bytes, whose [`held`] bytes were
/// reserved: caches it, or gives the room back when it did not load.
fn settle(inner: &Mutex<Inner>, id: &str, len: u64, loaded: Option<Arc<Locked>>) {
    let mut c = lock(inner);
    c.loading.remove(id);
    match loaded {
        Some(bytes) => {
            c.clock += 1;
            let last_use = c.clock;
            c.entries.insert(id.to_owned(), Entry { bytes, last_use });
            c.changed = true;
        }
        None => c.used -= held(len),
    }
}

struct Entry {
    bytes: Arc<Locked>,
    /// The access clock at its last read.
    last_use: u64,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    /// Bytes the entries hold, and loads in progress (reserved), as
    /// [`held`] counts them.
    used: u64,
    /// Blocks being loaded.
    loading: HashSet<String>,
    /// The memory of blocks being filled by maps ([`Filling`]), until
    /// their readers take it, by ticket.
    rooms: HashMap<u64, Room>,
    /// The last ticket given a [`Filling`].
    tickets: u64,
    /// Blocks directives pin here.
    pins: HashSet<String>,
    clock: u64,
    hits: u64,
    misses: u64,
    evicted: u64,
    /// Its blocks or pins changed since the last report.
    changed: bool,
    /// Its counters changed since the last report.
    counted: bool,
    /// Reads of each block lately (TinyLFU's frequency, at most
    /// [`FREQ_MAX`], halved every [`AGE_EVERY`] reads).
    freq: HashMap<String, u8>,
    reads: u64,
    last_report: Option<std::time::Instant>,
}

/// The largest frequency a block is counted with (a 4-bit counter).
const FREQ_MAX: u8 = 15;
/// Frequencies are halved after this many reads, so that old popularity
/// fades.
const AGE_EVERY: u64 = 1024;

/// Counters alone are reported at most this often.
const REPORT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// A worker's block cache.
pub struct BlockCache {
    capacity: u64,
    /// Most blocks held at once: each is a memory mapping of its own, and a
    /// process may have only `vm.max_map_count` of them (65,530 by default)
    /// for everything, its threads' stacks and large allocations too; many
    /// small blocks would exhaust it long before the bytes run out.
    max_blocks: usize,
    policy: Policy,
    inner: Arc<Mutex<Inner>>,
}

/// The share of the process's memory mappings the cache may take.
const MAPPINGS_SHARE: usize = 4;

/// Most blocks a cache holds: a quarter of `vm.max_map_count` (65,530
/// when it cannot be read).
pub fn max_blocks() -> usize {
    let limit = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(65_530);
    limit / MAPPINGS_SHARE
}

impl BlockCache {
    /// A cache of `capacity` bytes (0: no cache), of at most
    /// [`max_blocks`] blocks.
    pub fn new(capacity: u64, policy: Policy) -> Self {
        Self::with_max_blocks(capacity, max_blocks(), policy)
    }

    /// A cache of `capacity` bytes and at most `max_blocks` blocks.
    pub fn with_max_blocks(capacity: u64, max_blocks: usize, policy: Policy) -> Self {
        BlockCache {
            capacity,
            max_blocks: max_blocks.max(1),
            policy,
            inner: Arc::new(Mutex::new(Inner {
                changed: true,
                ..Inner::default()
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// A map's lookup of block `id`: the bytes on a hit; a miss is
    /// counted (the map then reads its block from disk, filling the cache
    /// as it goes through [`BlockCache::reserve`] when the policy makes
    /// room). A map whose job does not admit (`admitting` false: input
    /// read once) counts as a hit or a miss but not in the frequencies
    /// TinyLFU admits by.
    pub fn lookup(&self, id: &str, admitting: bool) -> Option<Arc<Locked>> {
        let mut c = self.lock();
        c.clock += 1;
        c.counted = true;
        if admitting {
            count_read(&mut c, id);
        }
        let clock = c.clock;
        let Some(e) = c.entries.get_mut(id) else {
            c.misses += 1;
            return None;
        };
        e.last_use = clock;
        let bytes = e.bytes.clone();
        c.hits += 1;
        Some(bytes)
    }

    /// Reserves room ([`held`] bytes) for block `id` of `len` bytes if it
    /// is not cached and the policy makes room, for the map about to read
    /// it to fill ([`Filling`]). `None`: not admitted.
    pub fn reserve(&self, id: &str, len: u64) -> Result<Option<Filling>, String> {
        let mut evicted = Vec::new();
        {
            let mut c = self.lock();
            if c.entries.contains_key(id) || !self.make_room(&mut c, id, len, false, &mut evicted) {
                return Ok(None);
            }
        }
        match Locked::room_from(len as usize, evicted) {
            Ok(map) => Ok(Some(self.filling(id, len, map))),
            Err(m) => {
                settle(&self.inner, id, len, None);
                Err(m)
            }
        }
    }

    /// The filling of block `id` of `len` bytes, whose room is reserved,
    /// into `room`.
    fn filling(&self, id: &str, len: u64, room: Room) -> Filling {
        let ticket = {
            let mut c = self.lock();
            c.tickets += 1;
            let ticket = c.tickets;
            c.rooms.insert(ticket, room);
            ticket
        };
        Filling {
            inner: self.inner.clone(),
            id: id.to_owned(),
            len,
            ticket,
            settled: AtomicBool::new(false),
        }
    }

    /// Loads pinned block `id` unless it is cached or loading; returns
    /// whether it is cached now.
    pub fn load_pinned<E>(
        &self,
        id: &str,
        len: u64,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<bool, LoadError<E>> {
        let mut evicted = Vec::new();
        {
            let mut c = self.lock();
            if c.entries.contains_key(id) {
                return Ok(true);
            }
            if !c.pins.contains(id) || !self.make_room(&mut c, id, len, true, &mut evicted) {
                return Ok(false);
            }
        }
        self.load(id, len, evicted, fill).map(|_| true)
    }

    /// Reserves the [`held`] bytes of a block of `len` for loading `id` if the policy allows,
    /// evicting least recently used unpinned blocks under LRU (or for a
    /// pinned block) into `evicted`, for the caller to reuse or unmap
    /// outside the lock.
    fn make_room(
        &self,
        c: &mut Inner,
        id: &str,
        len: u64,
        pinned: bool,
        evicted: &mut Vec<Arc<Locked>>,
    ) -> bool {
        let need = held(len);
        if len == 0 || need > self.capacity || c.loading.contains(id) {
            return false;
        }
        let evicting = matches!(self.policy, Policy::Lru | Policy::TinyLfu) || pinned;
        let full = |c: &Inner| {
            c.used + need > self.capacity || c.entries.len() + c.loading.len() >= self.max_blocks
        };
        if full(c) && evicting {
            let mut victims: Vec<(u64, String)> = c
                .entries
                .iter()
                .filter(|(b, _)| !c.pins.contains(*b))
                .map(|(b, e)| (e.last_use, b.clone()))
                .collect();
            victims.sort_unstable();
            let filtered = self.policy == Policy::TinyLfu && !pinned;
            if filtered && !more_frequent(c, id, need, &victims, self.capacity) {
                return false;
            }
            for (_, b) in victims {
                if !full(c) {
                    break;
                }
                if let Some(e) = c.entries.remove(&b) {
                    c.used -= e.bytes.held();
                    c.evicted += 1;
                    evicted.push(e.bytes);
                }
            }
        }
        if full(c) {
            return false;
        }
        c.used += need;
        c.loading.insert(id.to_owned());
        true
    }

    /// Loads a block whose room is reserved, outside the lock.
    fn load<E>(
        &self,
        id: &str,
        len: u64,
        evicted: Vec<Arc<Locked>>,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Arc<Locked>, LoadError<E>> {
        let loaded = Locked::load(len as usize, evicted, fill).map(Arc::new);
        settle(&self.inner, id, len, loaded.as_ref().ok().cloned());
        loaded
    }

    /// Drops block `id` (deleted, or no longer pinned).
    pub fn evict(&self, id: &str) {
        let mut c = self.lock();
        if let Some(e) = c.entries.remove(id) {
            c.used -= e.bytes.held();
            c.evicted += 1;
            c.changed = true;
        }
        c.pins.remove(id);
    }

    /// The blocks directives pin here now: those no longer pinned are
    /// evicted. Returns the pinned blocks not cached yet, to load.
    pub fn set_pins(&self, pins: HashSet<String>) -> Vec<String> {
        let old: Vec<String> = {
            let mut c = self.lock();
            let old = c.pins.difference(&pins).cloned().collect();
            c.pins = pins;
            c.changed = true;
            old
        };
        for b in &old {
            self.evict(b);
        }
        let c = self.lock();
        c.pins
            .iter()
            .filter(|b| !c.entries.contains_key(*b))
            .cloned()
            .collect()
    }

    /// What it holds, when `force`d, when its blocks changed since the
    /// last report, or when only its counters did and a second has passed
    /// (a worker reading from its cache all the time does not send its
    /// block list on every heartbeat).
    pub fn report(&self, force: bool) -> Option<proto::CacheReport> {
        let mut c = self.lock();
        let stale = c.last_report.is_none_or(|t| t.elapsed() >= REPORT_EVERY);
        if !(force || c.changed || (c.counted && stale)) {
            return None;
        }
        (c.changed, c.counted) = (false, false);
        c.last_report = Some(std::time::Instant::now());
        drop(c);
        Some(self.stats())
    }

    /// What it holds now, as a report says it (changes no report state).
    pub fn stats(&self) -> proto::CacheReport {
        let c = self.lock();
        let mut blocks: Vec<String> = c.entries.keys().cloned().collect();
        blocks.sort();
        let mut pinned: Vec<String> = c.pins.iter().cloned().collect();
        pinned.sort();
        proto::CacheReport {
            blocks,
            used: c.entries.values().map(|e| e.bytes.held()).sum(),
            capacity: self.capacity,
            policy: self.policy.name().into(),
            hits: c.hits,
            misses: c.misses,
            evicted: c.evicted,
            pinned,
        }
    }

    /// Marks the cache changed, so the next heartbeat reports it (a
    /// report that failed to arrive).
    pub fn unreported(&self) {
        self.lock().changed = true;
    }
}

/// Counts a read of block `id` (TinyLFU's frequency), ageing every count
/// now and then.
fn count_read(c: &mut Inner, id: &str) {
    let f = c.freq.entry(id.to_owned()).or_insert(0);
    *f = (*f + 1).min(FREQ_MAX);
    c.reads += 1;
    if c.reads >= AGE_EVERY {
        c.reads = 0;
        c.freq.retain(|_, f| {
            *f /= 2;
            *f > 0
        });
    }
}

/// Whether block `id` was read more often lately than every block the
/// least-recently-used order would evict to make `need` bytes of room.
fn more_frequent(c: &Inner, id: &str, need: u64, victims: &[(u64, String)], capacity: u64) -> bool {
    let mine = c.freq.get(id).copied().unwrap_or(0);
    let mut free = capacity.saturating_sub(c.used);
    for (_, b) in victims {
        if free >= need {
            break;
        }
        if c.freq.get(b).copied().unwrap_or(0) >= mine {
            return false;
        }
        free += c.entries[b].bytes.held();
    }
    true
}

/// The process's `RLIMIT_MEMLOCK` in bytes (`None`: unlimited or
/// unknown), from `/proc/self/limits` (no system call needed).
pub fn memlock_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max locked memory"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Whether the process may lock memory beyond its limit
/// (`CAP_IPC_LOCK`, bit 14 of its effective capabilities).
fn can_lock_any() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 14) != 0)
}

/// Refuses a cache larger than the memory this process may lock, with
/// how to fix it.
pub fn check_lockable(capacity: u64) -> Result<(), String> {
    if capacity == 0 || can_lock_any() {
        return Ok(());
    }
    match memlock_limit() {
        Some(limit) if limit < capacity => Err(format!(
            "--cache-size {capacity} bytes is more than this process may lock in memory \
             (RLIMIT_MEMLOCK {limit} bytes): raise the limit (`ulimit -l`, or LimitMEMLOCK= \
             for a systemd service), lower --cache-size, or turn the cache off with \
             --cache-size 0"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a read that waits for its block to be loaded finds.
    enum Read {
        Hit(Arc<Locked>),
        Loaded,
        Disk,
    }

    impl BlockCache {
        /// Admits block `id` of `len` bytes if it is not cached and the
        /// policy makes room, loading it with `fill` (which must verify what
        /// it reads). `None`: not admitted. A block that cannot be loaded
        /// (damaged, or memory not lockable) is not admitted and the error is
        /// returned.
        fn admit<E>(
            &self,
            id: &str,
            len: u64,
            fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
        ) -> Result<Option<Arc<Locked>>, LoadError<E>> {
            let mut evicted = Vec::new();
            {
                let mut c = self.lock();
                if c.entries.contains_key(id)
                    || !self.make_room(&mut c, id, len, false, &mut evicted)
                {
                    return Ok(None);
                }
            }
            self.load(id, len, evicted, fill).map(Some)
        }

        /// A lookup, and on a miss an admission at once: what a read that
        /// waits for its block to be loaded sees.
        fn read<E>(
            &self,
            id: &str,
            len: u64,
            fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
        ) -> Result<Read, LoadError<E>> {
            if let Some(bytes) = self.lookup(id, true) {
                return Ok(Read::Hit(bytes));
            }
            Ok(match self.admit(id, len, fill)? {
                Some(_) => Read::Loaded,
                None => Read::Disk,
            })
        }
    }

    fn fill(byte: u8) -> impl FnOnce(&mut [u8]) -> Result<(), String> {
        move |b: &mut [u8]| {
            b.fill(byte);
            Ok(())
        }
    }

    fn cached(c: &BlockCache) -> Vec<String> {
        c.report(true).unwrap().blocks
    }

    fn hit(c: &BlockCache, id: &str) -> bool {
        matches!(c.read(id, 100, fill(1)).unwrap(), Read::Hit(_))
    }

    /// What a map's reader does with a filling: takes its memory, writes
    /// `parts` into it in order, and hands it back when `whole`.
    fn fill_in(f: &Filling, parts: &[&[u8]], whole: bool) {
        use sluice_formats::chunked::Fill;
        let mut m = f.take().expect("memory to fill");
        let mut at = 0;
        for p in parts {
            m.bytes_mut()[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        if whole {
            f.filled(m);
        }
    }

    /// A block whose memory comes back whole is cached with the bytes
    /// written into it; memory taken and never given back (a read that
    /// failed) leaves nothing cached and the room is given back once.
    #[test]
    fn a_filling_caches_a_whole_block_and_gives_back_a_partial_one() {
        use sluice_formats::chunked::Fill;
        let c = BlockCache::new(100, Policy::FirstCome);
        let f = c.reserve("a", 100).unwrap().expect("room");
        assert!(c.reserve("a", 100).unwrap().is_none(), "already loading");
        let mut m = f.take().expect("memory");
        assert!(f.take().is_none(), "taken once");
        m.bytes_mut()[..60].copy_from_slice(&[7; 60]);
        assert!(
            c.lookup("a", true).is_none(),
            "not cached before it is back"
        );
        m.bytes_mut()[60..].copy_from_slice(&[8; 40]);
        f.filled(m);
        let bytes = c.lookup("a", true).expect("cached");
        let b: &[u8] = (*bytes).as_ref();
        assert_eq!(&b[..60], &[7; 60][..]);
        assert_eq!(&b[60..], &[8; 40][..]);
        drop(f);
        assert!(
            c.lookup("a", true).is_some(),
            "dropping a sealed filling keeps it"
        );

        let c = BlockCache::new(100, Policy::FirstCome);
        let f = c.reserve("b", 100).unwrap().expect("room");
        assert!(c.reserve("c", 100).unwrap().is_none(), "room reserved");
        fill_in(&f, &[&[1; 50]], false);
        assert!(c.reserve("c", 100).unwrap().is_none(), "still reserved");
        drop(f);
        assert!(
            c.lookup("b", true).is_none(),
            "a partial block is not cached"
        );
        let e = c.reserve("c", 100).unwrap().expect("its room is back");
        assert!(c.reserve("d", 1).unwrap().is_none(), "room given back once");
        drop(e);
        // A filling never read is given back too.
        let f = c.reserve("e", 100).unwrap().expect("room");
        drop(f);
        assert!(c.reserve("e", 100).unwrap().is_some());
    }

    /// Under LRU a block admitted in place of an evicted one that held
    /// the same length takes its memory when no reader holds it, and
    /// holds only its own bytes; a reader's block keeps its bytes and the
    /// new one gets fresh memory.
    #[test]
    fn lru_reuses_an_evicted_blocks_memory_that_no_reader_holds() {
        let c = BlockCache::new(150, Policy::Lru);
        let at = |b: &Arc<Locked>| (**b).as_ref().as_ptr() as usize;
        let a = {
            let f = c.reserve("a", 100).unwrap().expect("room");
            fill_in(&f, &[&[1; 100]], true);
            let a = c.lookup("a", true).expect("cached");
            at(&a)
        };
        let f = c.reserve("b", 100).unwrap().expect("a evicted");
        assert!(c.lookup("a", true).is_none());
        fill_in(&f, &[&[2; 40], &[3; 60]], true);
        let b = c.lookup("b", true).expect("cached");
        assert_eq!(at(&b), a, "a's memory reused");
        let bytes: &[u8] = (*b).as_ref();
        assert_eq!((&bytes[..40], &bytes[40..]), (&[2; 40][..], &[3; 60][..]));

        // A map still reads b: c gets new memory and b's bytes stay.
        let f = c.reserve("c", 100).unwrap().expect("b evicted");
        fill_in(&f, &[&[4; 100]], true);
        let cb = c.lookup("c", true).expect("cached");
        assert_ne!(at(&cb), at(&b));
        assert!((*cb).as_ref().iter().all(|&x| x == 4));
        assert_eq!(&(*b).as_ref()[..40], &[2; 40][..]);
        // Another length never takes it.
        drop((b, cb));
        let f = c.reserve("d", 60).unwrap().expect("c evicted");
        fill_in(&f, &[&[5; 60]], true);
        assert_eq!(
            (*c.lookup("d", true).expect("cached")).as_ref(),
            &[5; 60][..]
        );
        assert_eq!(c.report(true).unwrap().evicted, 3);
    }

    /// Blocks cut at record ends differ by a few bytes: each is held in
    /// a mapping rounded up to a granule of about a 64th of its length,
    /// so an LRU miss takes over the memory of the block it evicts; the
    /// cache counts what it holds.
    #[test]
    fn blocks_of_nearly_the_same_length_share_memory() {
        assert_eq!(held(100), 100, "tiny blocks exactly");
        assert_eq!((held(6400), held(6390), held(6401)), (6400, 6400, 6464));
        let mb32 = 32_000_000;
        assert_eq!(held(mb32 - 700), held(mb32));
        assert!(held(mb32) - mb32 <= mb32 / 64);
        assert_eq!(held(64 << 20), 64 << 20);
        assert_eq!(held((64 << 20) + 1), 65 << 20);
        assert_eq!(held((256 << 20) + 1), 258 << 20, "a huge page at most");

        let c = BlockCache::new(10_000, Policy::Lru);
        let at = |b: &Arc<Locked>| (**b).as_ref().as_ptr() as usize;
        let f = c.reserve("a", 6400).unwrap().expect("room");
        fill_in(&f, &[&[1; 6400]], true);
        let a = at(&c.lookup("a", true).expect("cached"));
        let f = c.reserve("b", 6390).unwrap().expect("a evicted");
        fill_in(&f, &[&[2; 6390]], true);
        let b = c.lookup("b", true).expect("cached");
        assert_eq!(at(&b), a, "a's memory reused");
        assert_eq!((*b).as_ref(), &[2; 6390][..], "the block's bytes only");
        assert_eq!(c.report(true).unwrap().used, 6400, "what it holds");
        // Held bytes count against the capacity: 3600 bytes are held in
        // 3616, and b is evicted though 6390 + 3600 would fit.
        drop(b);
        assert!(c.reserve("d", 3600).unwrap().is_some());
        assert_eq!(c.report(true).unwrap().evicted, 2);
    }

    #[test]
    fn first_come_admits_until_full_and_never_evicts() {
        let c = BlockCache::new(250, Policy::FirstCome);
        for b in ["a", "b", "c"] {
            c.read(b, 100, fill(7)).unwrap();
        }
        assert_eq!(cached(&c), ["a", "b"]);
        // c was read from disk; a is read from memory, as loaded.
        assert!(!hit(&c, "c"));
        let Read::Hit(a) = c.read("a", 100, fill(0)).unwrap() else {
            panic!("a not cached");
        };
        assert!((*a).as_ref().iter().all(|&x| x == 7));
        let r = c.report(true).unwrap();
        assert_eq!((r.hits, r.misses, r.used, r.evicted), (1, 4, 200, 0));
    }

    #[test]
    fn the_cache_holds_no_more_blocks_than_its_mapping_budget() {
        let first = BlockCache::with_max_blocks(1 << 20, 2, Policy::FirstCome);
        let lru = BlockCache::with_max_blocks(1 << 20, 2, Policy::Lru);
        for b in ["a", "b", "c"] {
            first.read(b, 10, fill(1)).unwrap();
            lru.read(b, 10, fill(1)).unwrap();
        }
        // Bytes to spare, but two blocks at most: first-come refuses the
        // third, LRU evicts for it.
        assert_eq!(cached(&first), ["a", "b"]);
        assert_eq!(cached(&lru), ["b", "c"]);
        assert!(max_blocks() >= 1);
    }

    #[test]
    fn lru_evicts_the_least_recently_used_block() {
        let c = BlockCache::new(250, Policy::Lru);
        // a, b in; a used again; c evicts b (least recent), not a.
        for b in ["a", "b", "a", "c"] {
            c.read(b, 100, fill(1)).unwrap();
        }
        assert_eq!(cached(&c), ["a", "c"]);
        // d evicts a (c is more recent).
        c.read("d", 100, fill(1)).unwrap();
        assert_eq!(cached(&c), ["c", "d"]);
        assert_eq!(c.report(true).unwrap().evicted, 2);
    }

    #[test]
    fn tinylfu_keeps_part_of_a_scan_larger_than_the_cache() {
        let (lru, tiny) = (
            BlockCache::new(250, Policy::Lru),
            BlockCache::new(250, Policy::TinyLfu),
        );
        for _ in 0..5 {
            for b in ["a", "b", "c"] {
                lru.read(b, 100, fill(1)).unwrap();
                tiny.read(b, 100, fill(1)).unwrap();
            }
        }
        let (l, t) = (lru.report(true).unwrap(), tiny.report(true).unwrap());
        // LRU evicts each block before its next read; TinyLFU keeps a and b.
        assert_eq!(l.hits, 0);
        assert_eq!(t.hits, 8, "{t:?}");
        assert_eq!(t.blocks, ["a", "b"]);
        // A block read more often than the least recent one gets in.
        for _ in 0..6 {
            tiny.read("d", 100, fill(1)).unwrap();
        }
        assert!(tiny.report(true).unwrap().blocks.contains(&"d".to_string()));
    }

    /// Reads of a job that does not admit count as hits and misses, not
    /// in TinyLFU's frequencies: a scan told not to cache cannot push a
    /// block in.
    #[test]
    fn reads_that_do_not_admit_leave_the_frequencies_alone() {
        let c = BlockCache::new(250, Policy::TinyLfu);
        for b in ["a", "b", "a", "b"] {
            c.read(b, 100, fill(1)).unwrap();
        }
        for _ in 0..6 {
            assert!(c.lookup("d", false).is_none());
        }
        c.read("d", 100, fill(1)).unwrap();
        assert_eq!(
            cached(&c),
            ["a", "b"],
            "d read once as far as TinyLFU knows"
        );
        let r = c.report(true).unwrap();
        assert_eq!((r.hits, r.misses), (2, 9));
    }

    #[test]
    fn pinned_blocks_are_never_evicted_and_unpinning_evicts() {
        let c = BlockCache::new(250, Policy::Lru);
        let todo = c.set_pins(["p".to_string()].into());
        assert_eq!(todo, ["p"]);
        assert!(c.load_pinned("p", 100, fill(2)).unwrap());
        for b in ["a", "b", "c"] {
            c.read(b, 100, fill(1)).unwrap();
        }
        let now = cached(&c);
        assert!(now.contains(&"p".to_string()) && now.len() == 2, "{now:?}");
        assert!(c.set_pins(HashSet::new()).is_empty());
        assert!(!cached(&c).contains(&"p".to_string()));
        // A block no directive pins is not loaded as pinned.
        assert!(!c.load_pinned("q", 100, fill(2)).unwrap());
    }

    #[test]
    fn a_block_that_fails_to_load_is_not_admitted() {
        let c = BlockCache::new(1000, Policy::FirstCome);
        let bad = |_: &mut [u8]| Err("chunk 0: checksum mismatch".to_string());
        let Err(LoadError::Fill(e)) = c.read("x", 100, bad) else {
            panic!("loaded a damaged block");
        };
        assert!(e.contains("checksum"), "{e}");
        assert!(cached(&c).is_empty());
        assert_eq!(c.report(true).unwrap().used, 0);
        // Read again later, it is admitted once intact.
        assert!(matches!(c.read("x", 100, fill(1)).unwrap(), Read::Loaded));
        assert!(hit(&c, "x"));
    }

    #[test]
    fn deleted_blocks_leave_the_cache() {
        let c = BlockCache::new(1000, Policy::FirstCome);
        c.read("x", 100, fill(1)).unwrap();
        c.evict("x");
        assert!(cached(&c).is_empty());
        assert_eq!(c.report(true).unwrap().used, 0);
    }

    #[test]
    fn the_memlock_limit_is_read_and_checked() {
        // Readable on Linux; a cache of 0 bytes is always fine.
        assert!(std::fs::read_to_string("/proc/self/limits").is_ok());
        assert!(check_lockable(0).is_ok());
        if !can_lock_any() {
            if let Some(limit) = memlock_limit() {
                let e = check_lockable(limit + 1).unwrap_err();
                assert!(e.contains("RLIMIT_MEMLOCK"), "{e}");
            }
        }
    }
}
