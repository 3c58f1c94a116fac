use crate::context::{ReduceContext, Values};
use crate::task::{Reducer, ReducerFactory};
use crate::Result;

/// Combines values at emit time (Phoenix++'s associative combiner).
///
/// The engine keeps one accumulator per distinct key, starting as a copy of
/// the key's first value, and folds every further value into it. The fold
/// must be associative and commutative: accumulators from different map
/// slots and spills are folded together again before the reducer sees them.
pub trait Aggregator: Send + Sync {
    /// Folds `value` into `acc` in place when the result has the same length
    /// as `acc`; returns `false` (and leaves `acc` alone) otherwise.
    fn fold_in_place(&self, acc: &mut [u8], value: &[u8]) -> bool;

    /// Folds `value` into `acc`, writing the result to `out` (which is empty).
    /// Called only when [`Aggregator::fold_in_place`] returned `false`.
    fn fold(&self, acc: &[u8], value: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(acc);
        let folded = self.fold_in_place(out, value);
        debug_assert!(
            folded,
            "an aggregator must fold accumulators of its own width"
        );
    }

    /// Folds `value` into the accumulator `acc`: in place when it can,
    /// else through [`Aggregator::fold`] into `tmp`, which then becomes
    /// `acc` (the two buffers trade places, so neither is allocated again).
    fn fold_into(&self, acc: &mut Vec<u8>, value: &[u8], tmp: &mut Vec<u8>) {
        if !self.fold_in_place(acc, value) {
            tmp.clear();
            self.fold(acc, value, tmp);
            std::mem::swap(acc, tmp);
        }
    }

    /// Whether this aggregator is [`SumU64`]: a collector may then add
    /// 8-byte counts itself rather than call it once per record.
    fn is_sum_u64(&self) -> bool {
        false
    }
}

/// Sums 8-byte little-endian `u64` values (word count's combiner).
#[derive(Debug, Clone, Copy, Default)]
pub struct SumU64;

impl SumU64 {
    /// Encodes a count as this aggregator's value.
    #[inline]
    pub fn encode(n: u64) -> [u8; 8] {
        n.to_le_bytes()
    }

    /// Decodes a value; `None` unless it is exactly 8 bytes.
    #[inline]
    pub fn decode(v: &[u8]) -> Option<u64> {
        v.try_into().ok().map(u64::from_le_bytes)
    }
}

impl Aggregator for SumU64 {
    fn is_sum_u64(&self) -> bool {
        true
    }

    #[inline]
    fn fold_in_place(&self, acc: &mut [u8], value: &[u8]) -> bool {
        match (Self::decode(acc), Self::decode(value)) {
            (Some(a), Some(b)) => {
                acc.copy_from_slice(&a.wrapping_add(b).to_le_bytes());
                true
            }
            _ => false,
        }
    }
}

/// Sums vectors of 8-byte little-endian `f64`s element by element
/// (`SUM(adRevenue)`, or revenue, rank and count together for an average).
#[derive(Debug, Clone, Copy, Default)]
pub struct SumF64s;

impl SumF64s {
    /// Encodes values into `out` (cleared first).
    pub fn encode(values: &[f64], out: &mut Vec<u8>) {
        out.clear();
        for v in values {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// Element `i` of an encoded vector, if present.
    pub fn get(bytes: &[u8], i: usize) -> Option<f64> {
        let b = bytes.get(i * 8..i * 8 + 8)?;
        Some(f64::from_le_bytes(b.try_into().ok()?))
    }
}

impl Aggregator for SumF64s {
    #[inline]
    fn fold_in_place(&self, acc: &mut [u8], value: &[u8]) -> bool {
        if acc.len() != value.len() || !acc.len().is_multiple_of(8) {
            return false;
        }
        for (a, v) in acc.chunks_exact_mut(8).zip(value.chunks_exact(8)) {
            let sum = f64::from_le_bytes(a.try_into().expect("8 bytes"))
                + f64::from_le_bytes(v.try_into().expect("8 bytes"));
            a.copy_from_slice(&sum.to_le_bytes());
        }
        true
    }
}

/// A combiner folding each group's values with `agg` into one: how an
/// aggregating job combines wherever records meet sorted (merge passes,
/// map threads that stopped hashing), and a job's combiner when its fold
/// is cheaper after a sort than in a hash table.
pub fn aggregate_combiner(agg: std::sync::Arc<dyn Aggregator>) -> ReducerFactory {
    std::sync::Arc::new(move || {
        Box::new(AggregateCombiner {
            agg: agg.clone(),
            acc: Vec::new(),
            tmp: Vec::new(),
        }) as Box<dyn Reducer>
    })
}

struct AggregateCombiner {
    agg: std::sync::Arc<dyn Aggregator>,
    acc: Vec<u8>,
    tmp: Vec<u8>,
}

impl Reducer for AggregateCombiner {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> Result<()> {
        self.acc.clear();
        if let Some(first) = values.next_value() {
            self.acc.extend_from_slice(first);
        }
        while let Some(v) = values.next_value() {
            self.agg.fold_into(&mut self.acc, v, &mut self.tmp);
        }
        ctx.write(key, &self.acc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_vectors_sum_elementwise() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        SumF64s::encode(&[1.5, 2.0, 1.0], &mut a);
        SumF64s::encode(&[0.25, 3.0, 1.0], &mut b);
        assert!(SumF64s.fold_in_place(&mut a, &b));
        assert_eq!(
            (SumF64s::get(&a, 0), SumF64s::get(&a, 2)),
            (Some(1.75), Some(2.0))
        );
        assert!(!SumF64s.fold_in_place(&mut a, &b[..8]));
    }

    #[test]
    fn sum_folds_in_place() {
        let mut acc = SumU64::encode(5);
        assert!(SumU64.fold_in_place(&mut acc, &SumU64::encode(7)));
        assert_eq!(SumU64::decode(&acc), Some(12));
        assert!(!SumU64.fold_in_place(&mut acc, b"xyz"));
    }
}
