//! What the coordinator keeps of a finished attempt's report ([`Kept`]),
//! packed so that a job of a million tasks fits in well under a gigabyte.
//!
//! A worker's `TaskReport` as prost decodes it holds two hash maps of
//! counters and a `Vec<u64>` of partition sizes: about 2 KB an attempt
//! at 100 partitions and ten counters. [`Kept`] holds the same facts:
//! - counter names once per job ([`Names`]), an attempt's counters as
//!   LEB128 varint pairs (name id, value) in one boxed slice
//!   ([`Packed`]);
//! - partition sizes one byte each, rounded up to a power of 1.1 ([`Sizes`],
//!   Spark's `CompressedMapStatus`): they steer reduce placement (ARTS),
//!   where 10% does not matter, and their exact total is kept beside;
//! - worker names shared between attempts (`Arc<str>`, from [`Names`]);
//! - the rarely present parts (the output block, damaged replicas, remote
//!   reads) boxed or as boxed slices.
//!
//! Nothing else is rounded: [`Kept::to_proto`] gives back the report the
//! worker sent but for the partition sizes (the job log stores that, so
//! a coordinator that takes a job back counts the same sizes).

use std::collections::HashMap;
use std::sync::Arc;

use sluice_proto::proto;

/// Strings a job's attempts share: worker uids, addresses and data
/// centers (as `Arc<str>`), and counter names (as ids).
#[derive(Debug, Clone, Default)]
pub struct Names {
    ids: HashMap<Arc<str>, u32>,
    names: Vec<Arc<str>>,
}

impl Names {
    /// `name`'s id, given it now if it has none.
    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = u32::try_from(self.names.len()).expect("fewer than 2^32 names");
        let shared: Arc<str> = Arc::from(name);
        self.names.push(shared.clone());
        self.ids.insert(shared, id);
        id
    }

    /// `name`, shared with every other holder of it in this job.
    pub fn share(&mut self, name: &str) -> Arc<str> {
        let id = self.id(name);
        self.names[id as usize].clone()
    }

    /// The name of `id` (empty for an id it never gave).
    pub fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", |n| n)
    }
}

/// Unsigned integers, each as a LEB128 varint (7 bits a byte, low bits
/// first, the top bit set on every byte but an integer's last), in one
/// boxed slice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packed(Box<[u8]>);

impl Packed {
    /// Packs `values` in order.
    pub fn of(values: impl IntoIterator<Item = u64>) -> Packed {
        let mut out = Vec::new();
        for mut v in values {
            while v >= 0x80 {
                out.push((v as u8) | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        }
        Packed(out.into_boxed_slice())
    }

    /// The values, in the order they were packed.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            let mut v = 0u64;
            let mut shift = 0;
            loop {
                let b = *self.0.get(at)?;
                at += 1;
                v |= u64::from(b & 0x7f) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    return Some(v);
                }
            }
        })
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Bytes it takes on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.0.len()
    }
}

/// Partition sizes, one byte each: size 0 is 0, else `⌈log₁.₁ size⌉`
/// (at most 255), read back as `⌊1.1^c⌋`. A size comes back at least as
/// large as it was and less than 10% larger, up to 36 GB (larger ones
/// come back as about 36 GB). Spark's `CompressedMapStatus` keeps map
/// output sizes the same way, for the same reason: a million maps of a
/// hundred partitions each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sizes(Box<[u8]>);

/// The base of [`Sizes`]' logarithm.
const SIZE_BASE: f64 = 1.1;

impl Sizes {
    /// Keeps `sizes`, rounded up.
    pub fn of(sizes: impl IntoIterator<Item = u64>) -> Sizes {
        Sizes(sizes.into_iter().map(Self::code).collect())
    }

    fn code(size: u64) -> u8 {
        match size {
            0 => 0,
            1 => 1,
            n => ((n as f64).ln() / SIZE_BASE.ln()).ceil().min(255.0) as u8,
        }
    }

    fn size(code: u8) -> u64 {
        match code {
            0 => 0,
            c => {
                let v = SIZE_BASE.powi(i32::from(c));
                // Rounding of the power must not make a size smaller.
                (v.round() as u64).max(v as u64)
            }
        }
    }

    /// The sizes, as kept.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().map(|&c| Self::size(c))
    }
}

/// A map of counters as (name id, value) pairs.
fn pack_counters(counters: &HashMap<String, u64>, names: &mut Names) -> Packed {
    let mut pairs: Vec<(u32, u64)> = counters.iter().map(|(k, v)| (names.id(k), *v)).collect();
    pairs.sort_unstable();
    Packed::of(pairs.into_iter().flat_map(|(k, v)| [u64::from(k), v]))
}

/// The pairs of a [`pack_counters`] packing, with their names.
fn counter_pairs<'a>(p: &'a Packed, names: &'a Names) -> impl Iterator<Item = (&'a str, u64)> + 'a {
    id_pairs(p).map(|(id, v)| (names.name(id), v))
}

/// The `(interned name, value)` pairs of packed counters.
fn id_pairs(p: &Packed) -> impl Iterator<Item = (u32, u64)> + '_ {
    let mut it = p.iter();
    std::iter::from_fn(move || {
        let id = it.next()?;
        let v = it.next()?;
        Some((id as u32, v))
    })
}

/// A finished attempt's report, as the coordinator keeps it.
#[derive(Debug, Clone, Default)]
pub struct Kept {
    pub ok: bool,
    pub fetch_failure: bool,
    pub cache_hit: bool,
    pub error: Box<str>,
    counters: Packed,
    user_counters: Packed,
    partition_bytes: Sizes,
    /// The exact sum of the partition sizes.
    pub partition_total: u64,
    pub output_records: u64,
    pub output_bytes: u64,
    pub input_bytes: u64,
    pub shuffle_bytes: u64,
    pub memory_bytes: u64,
    pub seconds: f64,
    pub fetch_seconds: f64,
    pub output: Option<Box<proto::BlockInfo>>,
    pub corrupt: Box<[proto::CorruptReplica]>,
    pub remote_reads: Box<[proto::RemoteRead]>,
}

impl Kept {
    /// Keeps `r`, its counter names in `names`.
    pub fn new(r: proto::TaskReport, names: &mut Names) -> Kept {
        Kept {
            ok: r.ok,
            fetch_failure: r.fetch_failure,
            cache_hit: r.cache_hit,
            error: r.error.into_boxed_str(),
            counters: pack_counters(&r.counters, names),
            user_counters: pack_counters(&r.user_counters, names),
            partition_total: r.partition_bytes.iter().sum(),
            partition_bytes: Sizes::of(r.partition_bytes),
            output_records: r.output_records,
            output_bytes: r.output_bytes,
            input_bytes: r.input_bytes,
            shuffle_bytes: r.shuffle_bytes,
            memory_bytes: r.memory_bytes,
            seconds: r.seconds,
            fetch_seconds: r.fetch_seconds,
            output: r.output.map(Box::new),
            corrupt: r.corrupt.into_boxed_slice(),
            remote_reads: r.remote_reads.into_boxed_slice(),
        }
    }

    /// A map's output bytes per partition, as [`Sizes`] keeps them
    /// (rounded up, by less than 10%).
    pub fn partition_bytes(&self) -> impl Iterator<Item = u64> + '_ {
        self.partition_bytes.iter()
    }

    /// Its task counters by name.
    pub fn counters<'a>(&'a self, names: &'a Names) -> impl Iterator<Item = (&'a str, u64)> + 'a {
        counter_pairs(&self.counters, names)
    }

    /// Its counters by interned name ([`Names`]).
    pub fn counter_ids(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        id_pairs(&self.counters)
    }

    /// Its user counters by interned `group.name`.
    pub fn user_counter_ids(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        id_pairs(&self.user_counters)
    }

    /// Its user counters by `group.name`.
    pub fn user_counters<'a>(
        &'a self,
        names: &'a Names,
    ) -> impl Iterator<Item = (&'a str, u64)> + 'a {
        counter_pairs(&self.user_counters, names)
    }

    /// The report the worker sent, for task `task`.
    pub fn to_proto(&self, task: proto::TaskId, names: &Names) -> proto::TaskReport {
        let map = |it: &mut dyn Iterator<Item = (&str, u64)>| {
            it.map(|(k, v)| (k.to_owned(), v)).collect()
        };
        proto::TaskReport {
            task: Some(task),
            ok: self.ok,
            error: self.error.to_string(),
            fetch_failure: self.fetch_failure,
            counters: map(&mut self.counters(names)),
            user_counters: map(&mut self.user_counters(names)),
            output_records: self.output_records,
            output_bytes: self.output_bytes,
            seconds: self.seconds,
            output: self.output.as_deref().cloned(),
            input_bytes: self.input_bytes,
            shuffle_bytes: self.shuffle_bytes,
            fetch_seconds: self.fetch_seconds,
            corrupt: self.corrupt.to_vec(),
            memory_bytes: self.memory_bytes,
            cache_hit: self.cache_hit,
            partition_bytes: self.partition_bytes().collect(),
            remote_reads: self.remote_reads.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_values_come_back_in_order() {
        let values = [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ];
        let p = Packed::of(values);
        assert_eq!(p.iter().collect::<Vec<_>>(), values);
        // One byte for each value under 128, ten for u64::MAX.
        assert_eq!(p.heap_bytes(), 1 + 1 + 1 + 2 + 2 + 2 + 3 + 5 + 10);
        assert!(Packed::of([]).is_empty());
    }

    #[test]
    fn a_kept_report_gives_back_the_report_sent() {
        let mut names = Names::default();
        let task = proto::TaskId {
            job: 7,
            kind: 0,
            index: 3,
            attempt: 1,
        };
        let r = proto::TaskReport {
            task: Some(task),
            ok: true,
            counters: [
                ("MAP_INPUT_RECORDS".to_owned(), 1_000_000),
                ("SPILLS".to_owned(), 2),
            ]
            .into_iter()
            .collect(),
            user_counters: [("g.n".to_owned(), 5)].into_iter().collect(),
            partition_bytes: vec![670_000, 0, 5 << 30],
            output: Some(proto::BlockInfo {
                id: "b1".into(),
                len: 9,
                ..Default::default()
            }),
            remote_reads: vec![proto::RemoteRead {
                addr: "a:1".into(),
                bytes: 4,
            }],
            seconds: 1.5,
            ..Default::default()
        };
        let kept = Kept::new(r.clone(), &mut names);
        let back = kept.to_proto(task, &names);
        assert_eq!(kept.partition_total, 670_000 + (5 << 30));
        let rounded = back.partition_bytes.clone();
        assert_eq!(rounded.len(), 3);
        assert_eq!(rounded[1], 0);
        for (kept, sent) in rounded.iter().zip(&r.partition_bytes) {
            assert!(
                *kept >= *sent && (*kept as f64) <= *sent as f64 * 1.1,
                "{kept} {sent}"
            );
        }
        assert_eq!(
            proto::TaskReport {
                partition_bytes: r.partition_bytes.clone(),
                ..back
            },
            r
        );
        // Another attempt's counters share the names.
        let again = Kept::new(r, &mut names);
        assert_eq!(names.names.len(), 3);
        assert_eq!(again.counters(&names).count(), 2);
    }

    #[test]
    fn sizes_come_back_rounded_up_by_less_than_a_tenth() {
        let mut sizes: Vec<u64> = (0..2_000).collect();
        sizes.extend((0..60).map(|s| 1u64 << (s / 2) | (s % 3)));
        sizes.extend([670_000, 64 << 20, 30 << 30]);
        let kept = Sizes::of(sizes.iter().copied());
        for (back, size) in kept.iter().zip(&sizes) {
            assert!(back >= *size, "{size} came back as {back}");
            assert!(
                (back as f64) < (*size as f64) * 1.1 + 1.0,
                "{size} came back as {back}"
            );
        }
        assert_eq!(kept.iter().count(), sizes.len());
        // Beyond about 36 GB a size saturates rather than wrapping.
        assert!(Sizes::of([u64::MAX]).iter().next().unwrap() > 35_000_000_000);
    }

    #[test]
    fn shared_names_are_one_allocation() {
        let mut names = Names::default();
        let a = names.share("worker-1");
        let b = names.share("worker-1");
        assert!(Arc::ptr_eq(&a, &b));
        let id = names.id("worker-1");
        assert_eq!(names.name(id), "worker-1");
        assert_eq!(names.name(99), "");
    }
}

#[cfg(test)]
mod size_tests {
    use super::super::task::{Attempt, Task};
    use super::Kept;

    /// What a task costs the coordinator is mostly these three: a job of
    /// a million tasks holds a million of each. Growing one is a choice
    /// to make knowingly (`docs/PERFORMANCE.md`, the control plane).
    #[test]
    fn a_task_and_its_attempt_stay_small() {
        let sizes = (
            std::mem::size_of::<Task>(),
            std::mem::size_of::<Attempt>(),
            std::mem::size_of::<Kept>(),
        );
        eprintln!("Task, Attempt, Kept: {sizes:?} bytes");
        assert!(sizes.0 <= 96, "{sizes:?}");
        assert!(sizes.1 <= 128, "{sizes:?}");
        assert!(sizes.2 <= 176, "{sizes:?}");
    }
}
