//! The Pavlo tasks' columns read straight from Arrow arrays
//! ([`sluice_api::columnar`]): the values their text records would carry,
//! or nothing when a batch holds anything the text path might read
//! differently (a null, a value with the separator `|` in it, a type
//! other than the common ones, a date that is no `YYYY-MM-DD`), so the
//! engine maps that batch as text records instead.

use sluice_api::arrow_array::cast::AsArray;
use sluice_api::arrow_array::types::{Date32Type, Float64Type, Int32Type, Int64Type};
use sluice_api::arrow_array::{
    Array, ArrayRef, BinaryArray, BinaryViewArray, DictionaryArray, LargeStringArray, StringArray,
    StringViewArray,
};
use sluice_formats::dates::days_from_civil;

use super::is_date;

/// A column of strings (or bytes) with no null and no `|`.
pub(super) enum Strings<'a> {
    Utf8(&'a StringArray),
    Large(&'a LargeStringArray),
    View(&'a StringViewArray),
    Binary(&'a BinaryArray),
    BinaryView(&'a BinaryViewArray),
    /// Dictionary-encoded: keys into a column of values.
    Dict(&'a [i32], Box<Strings<'a>>),
}

/// Data buffers of string views already found free of `|`, each kept
/// alive (through its array) while it is remembered, so no other buffer
/// can take its address: a page's values, shared by the batches cut from
/// it, are searched once, not once a batch.
#[derive(Default)]
pub(super) struct Clean {
    seen: std::collections::VecDeque<(usize, usize, ArrayRef)>,
}

/// Buffers remembered at most: a few pages of one column.
const CLEAN_KEPT: usize = 8;

/// Unsearched buffer bytes a value of a batch above which its values are
/// searched one by one rather than its buffers whole.
const VALUE_SEARCH_BYTES: usize = 1024;

impl Clean {
    /// The column of `a`, when it is strings with no null and no `|`.
    pub(super) fn strings<'a>(&mut self, a: Option<&'a ArrayRef>) -> Option<Strings<'a>> {
        let s = Strings::of(a)?;
        let holds = match (&s, a) {
            (Strings::View(v), Some(a)) => self.view_holds(v, a),
            _ => s.holds(b'|'),
        };
        (!holds).then_some(s)
    }

    /// Whether a value of `v` (the array `a`) holds `|`: values of up to
    /// 12 bytes are in their views; longer ones in data buffers, searched
    /// whole unless remembered clean (a `|` anywhere in one, even between
    /// values, sends the search value by value).
    fn view_holds(&mut self, v: &StringViewArray, a: &ArrayRef) -> bool {
        if v.views().iter().any(|&w| inline_holds_bar(w)) {
            return true;
        }
        let unseen: usize = v
            .data_buffers()
            .iter()
            .filter(|b| !self.holds_seen(b.as_slice()))
            .map(|b| b.len())
            .sum();
        // A few rows taken from many pages (the rows a selective reader
        // kept): their values are searched, not the pages.
        if unseen > v.len().saturating_mul(VALUE_SEARCH_BYTES) {
            return Strings::View(v).holds(b'|');
        }
        for b in v.data_buffers() {
            let at = (b.as_ptr() as usize, b.len());
            if self.holds_seen(b.as_slice()) {
                continue;
            }
            if memchr::memchr(b'|', b.as_slice()).is_some() {
                return Strings::View(v).holds(b'|');
            }
            if self.seen.len() == CLEAN_KEPT {
                self.seen.pop_front();
            }
            self.seen.push_back((at.0, at.1, a.clone()));
        }
        false
    }

    /// Whether buffer `b` was searched and found clean.
    fn holds_seen(&self, b: &[u8]) -> bool {
        let at = (b.as_ptr() as usize, b.len());
        self.seen.iter().any(|(p, l, _)| (*p, *l) == at)
    }
}

/// Whether a view of a value of at most 12 bytes holds `|` among them
/// (its bytes after the length are the value, zero-padded; a longer
/// value's view holds a prefix, searched with its buffer instead).
fn inline_holds_bar(view: u128) -> bool {
    if view as u32 > 12 {
        return false;
    }
    const ONES: u128 = 0x0101_0101_0101_0101_0101_0101;
    const HIGHS: u128 = ONES << 7;
    let x = (view >> 32) ^ (ONES * u128::from(b'|'));
    // A zero byte among the 12: where the value had `|`. The padding is
    // zero, so it is `|` after the xor: never a false find.
    (x.wrapping_sub(ONES) & !x & HIGHS) != 0
}

impl<'a> Strings<'a> {
    /// The column of `a`, when it is strings with no null (a `|` not yet
    /// looked for: [`Clean::strings`]).
    fn of(a: Option<&'a ArrayRef>) -> Option<Strings<'a>> {
        let a = a.filter(|a| a.null_count() == 0)?;
        let any = a.as_any();
        let s = if let Some(a) = any.downcast_ref::<StringArray>() {
            Strings::Utf8(a)
        } else if let Some(a) = any.downcast_ref::<StringViewArray>() {
            Strings::View(a)
        } else if let Some(a) = any.downcast_ref::<LargeStringArray>() {
            Strings::Large(a)
        } else if let Some(a) = any.downcast_ref::<BinaryArray>() {
            Strings::Binary(a)
        } else if let Some(a) = any.downcast_ref::<BinaryViewArray>() {
            Strings::BinaryView(a)
        } else if let Some(d) = any.downcast_ref::<DictionaryArray<Int32Type>>() {
            let values = Strings::of(Some(d.values())).filter(|v| !v.holds(b'|'))?;
            let keys = d.keys().values();
            let n = d.values().len();
            if keys.iter().any(|&k| k < 0 || k as usize >= n) {
                return None;
            }
            return Some(Strings::Dict(keys, Box::new(values)));
        } else {
            return None;
        };
        Some(s)
    }

    /// Value `i`'s bytes.
    #[inline]
    pub(super) fn get(&self, i: usize) -> &'a [u8] {
        match self {
            Strings::Utf8(a) => a.value(i).as_bytes(),
            Strings::Large(a) => a.value(i).as_bytes(),
            Strings::View(a) => a.value(i).as_bytes(),
            Strings::Binary(a) => a.value(i),
            Strings::BinaryView(a) => a.value(i),
            Strings::Dict(keys, values) => values.get(keys[i] as usize),
        }
    }

    fn len(&self) -> usize {
        match self {
            Strings::Utf8(a) => a.len(),
            Strings::Large(a) => a.len(),
            Strings::View(a) => a.len(),
            Strings::Binary(a) => a.len(),
            Strings::BinaryView(a) => a.len(),
            Strings::Dict(keys, _) => keys.len(),
        }
    }

    /// Whether some value holds byte `b`.
    fn holds(&self, b: u8) -> bool {
        match self {
            // The offsets' whole data: a value outside a slice may be
            // looked at too, which only ever declines a batch.
            Strings::Utf8(a) => memchr::memchr(b, a.value_data()).is_some(),
            Strings::Large(a) => memchr::memchr(b, a.value_data()).is_some(),
            Strings::Binary(a) => memchr::memchr(b, a.value_data()).is_some(),
            _ => (0..self.len()).any(|i| memchr::memchr(b, self.get(i)).is_some()),
        }
    }
}

/// The values of a column of 64-bit floats with no null.
pub(super) fn floats(a: Option<&ArrayRef>) -> Option<&[f64]> {
    let a = a.filter(|a| a.null_count() == 0)?;
    Some(a.as_primitive_opt::<Float64Type>()?.values())
}

/// A column of integers with no null.
pub(super) enum Ints<'a> {
    I64(&'a [i64]),
    I32(&'a [i32]),
}

impl<'a> Ints<'a> {
    pub(super) fn of(a: Option<&'a ArrayRef>) -> Option<Ints<'a>> {
        let a = a.filter(|a| a.null_count() == 0)?;
        if let Some(v) = a.as_primitive_opt::<Int64Type>() {
            return Some(Ints::I64(v.values()));
        }
        Some(Ints::I32(a.as_primitive_opt::<Int32Type>()?.values()))
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> i64 {
        match self {
            Ints::I64(v) => v[i],
            Ints::I32(v) => i64::from(v[i]),
        }
    }
}

/// A column of dates with no null, each one a text record would write as
/// a valid `YYYY-MM-DD`.
pub(super) enum Dates<'a> {
    /// Days since 1970-01-01.
    Days(&'a [i32]),
    /// Text dates.
    Text(Strings<'a>),
}

/// The first and last days written with a four-digit year.
fn year_range() -> (i64, i64) {
    (days_from_civil(0, 1, 1), days_from_civil(9999, 12, 31))
}

impl<'a> Dates<'a> {
    pub(super) fn of(a: Option<&'a ArrayRef>, rows: usize) -> Option<Dates<'a>> {
        let arr = a.filter(|a| a.null_count() == 0)?;
        if let Some(v) = arr.as_primitive_opt::<Date32Type>() {
            let (lo, hi) = year_range();
            let ok = v
                .values()
                .iter()
                .all(|&d| (lo..=hi).contains(&i64::from(d)));
            return ok.then(|| Dates::Days(v.values()));
        }
        let s = Strings::of(a)?;
        (0..rows)
            .all(|i| is_date(s.get(i)))
            .then_some(Dates::Text(s))
    }

    /// Whether row `i`'s date is in `[from, to]` (days, and the same as
    /// `YYYY-MM-DD` text).
    #[inline]
    pub(super) fn within(&self, i: usize, days: (i32, i32), text: (&[u8], &[u8])) -> bool {
        match self {
            Dates::Days(v) => (days.0..=days.1).contains(&v[i]),
            Dates::Text(s) => (text.0..=text.1).contains(&s.get(i)),
        }
    }
}

/// A `YYYY-MM-DD` date's day number.
pub(super) fn day_of(d: &[u8]) -> i32 {
    let num = |r: std::ops::Range<usize>| {
        d[r].iter()
            .fold(0u32, |n, c| n * 10 + u32::from(c.wrapping_sub(b'0')))
    };
    days_from_civil(i64::from(num(0..4)), num(5..7), num(8..10)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use sluice_api::arrow_array::{Date32Array, Float64Array, Int64Array};

    fn col(a: impl Array + 'static) -> Option<ArrayRef> {
        Some(Arc::new(a))
    }

    #[test]
    fn strings_of_every_layout_read_the_same_values() {
        let plain = col(StringArray::from(vec!["a.b", "", "c"]));
        let view = col(StringViewArray::from(vec!["a.b", "", "c"]));
        let dict: DictionaryArray<Int32Type> = vec!["a.b", "", "c"].into_iter().collect();
        let dict = col(dict);
        for c in [&plain, &view, &dict] {
            let s = Strings::of(c.as_ref()).unwrap();
            assert_eq!([s.get(0), s.get(1), s.get(2)], [&b"a.b"[..], b"", b"c"]);
        }
    }

    #[test]
    fn a_null_a_bar_or_another_type_is_declined() {
        let null = col(StringArray::from(vec![Some("a"), None]));
        let bar = col(StringArray::from(vec!["a", "b|c"]));
        let view_bar = col(StringViewArray::from(vec![
            "a",
            "a long value with a | in it",
        ]));
        let ints = col(Int64Array::from(vec![1, 2]));
        for c in [&null, &bar, &view_bar, &ints] {
            assert!(Clean::default().strings(c.as_ref()).is_none());
        }
        assert!(floats(col(Float64Array::from(vec![Some(1.0), None])).as_ref()).is_none());
        assert!(Ints::of(col(Float64Array::from(vec![1.0])).as_ref()).is_none());
    }

    #[test]
    fn a_bar_in_a_view_is_found_inline_or_in_a_buffer_seen_before_or_not() {
        let long = "a value longer than twelve bytes";
        let mut clean = Clean::default();
        let ok = col(StringViewArray::from(vec!["1.2.3.4", long, ""]));
        assert!(clean.strings(ok.as_ref()).is_some());
        assert!(clean.strings(ok.as_ref()).is_some(), "remembered clean");
        for bad in [
            vec!["1.2|3", long],
            vec!["123456789ab|", long],
            vec!["1.2.3.4", "a value longer than | twelve bytes"],
            vec!["|", ""],
        ] {
            let bad = col(StringViewArray::from(bad));
            assert!(clean.strings(bad.as_ref()).is_none(), "{bad:?}");
        }
        let dict: DictionaryArray<Int32Type> = vec!["a", "b|c"].into_iter().collect();
        assert!(clean.strings(col(dict).as_ref()).is_none());
        // The first array, remembered, is still clean; twelve bytes with
        // no bar are not taken for one.
        assert!(clean.strings(ok.as_ref()).is_some());
        let twelve = col(StringViewArray::from(vec!["123456789abc"]));
        assert!(clean.strings(twelve.as_ref()).is_some());
    }

    #[test]
    fn dates_out_of_four_digit_years_or_malformed_are_declined() {
        let ok = col(Date32Array::from(vec![0, 10_971]));
        let d = Dates::of(ok.as_ref(), 2).unwrap();
        let week = (day_of(b"2000-01-15"), day_of(b"2000-01-22"));
        assert_eq!(week.0, 10_971);
        assert!(d.within(1, week, (b"", b"")) && !d.within(0, week, (b"", b"")));
        let far = col(Date32Array::from(
            vec![days_from_civil(10_000, 1, 1) as i32],
        ));
        assert!(Dates::of(far.as_ref(), 1).is_none());
        let text = col(StringArray::from(vec!["2000-01-15", "2000-13-01"]));
        assert!(Dates::of(text.as_ref(), 2).is_none());
    }
}
