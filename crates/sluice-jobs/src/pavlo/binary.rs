//! Binary forms of Rankings and UserVisits rows (for the paged file), each
//! with a mutable decoder (a view of borrowed fields: no allocation) and an
//! allocating one (an owned record per row, as the immutable decoders of
//! seed 000 did), plus the text allocating decoder, for the decoder
//! benchmark.
//!
//! ```text
//! rankings   := url_len:u16 url rank:i32 duration:i32
//! uservisits := ip_len:u8 ip url_len:u16 url day:i32 revenue:f64
//!               agent_len:u8 agent country_len:u8 country lang_len:u8 lang
//!               word_len:u8 word duration:i32
//! ```
//!
//! Integers little-endian; `day` counts days since 1970-01-01.

use sluice_formats::delimited::{Decoder, FieldError};

use super::{is_date, RANKINGS_FIELDS, USERVISITS_FIELDS};

/// Why a row could not be encoded or decoded.
pub type CodecError = String;

fn field_err(e: FieldError) -> CodecError {
    e.to_string()
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8], wide: bool) -> Result<(), CodecError> {
    if wide {
        let n = u16::try_from(b.len()).map_err(|_| "field longer than 65535 bytes")?;
        out.extend_from_slice(&n.to_le_bytes());
    } else {
        out.push(u8::try_from(b.len()).map_err(|_| "field longer than 255 bytes")?);
    }
    out.extend_from_slice(b);
    Ok(())
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` date.
fn day_number(d: &[u8]) -> Result<i32, CodecError> {
    if !is_date(d) {
        return Err("not a date (YYYY-MM-DD)".into());
    }
    let n =
        |r: std::ops::Range<usize>| d[r].iter().fold(0u32, |a, &c| a * 10 + u32::from(c - b'0'));
    let days = sluice_formats::dates::days_from_civil(i64::from(n(0..4)), n(5..7), n(8..10));
    i32::try_from(days).map_err(|_| "date out of range".into())
}

/// Encodes a Rankings text row.
pub fn encode_rankings(
    dec: &mut Decoder,
    line: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let f = dec.decode(line);
    f.expect_len(RANKINGS_FIELDS).map_err(field_err)?;
    out.clear();
    put_bytes(out, f.get(0).map_err(field_err)?, true)?;
    for i in 1..3 {
        let v = i32::try_from(f.i64(i).map_err(field_err)?).map_err(|_| "number out of range")?;
        out.extend_from_slice(&v.to_le_bytes());
    }
    Ok(())
}

/// Encodes a UserVisits text row.
pub fn encode_uservisits(
    dec: &mut Decoder,
    line: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let f = dec.decode(line);
    f.expect_len(USERVISITS_FIELDS).map_err(field_err)?;
    out.clear();
    put_bytes(out, f.get(0).map_err(field_err)?, false)?;
    put_bytes(out, f.get(1).map_err(field_err)?, true)?;
    out.extend_from_slice(&day_number(f.get(2).map_err(field_err)?)?.to_le_bytes());
    out.extend_from_slice(&f.f64(3).map_err(field_err)?.to_le_bytes());
    for i in 4..8 {
        put_bytes(out, f.get(i).map_err(field_err)?, false)?;
    }
    let d = i32::try_from(f.i64(8).map_err(field_err)?).map_err(|_| "number out of range")?;
    out.extend_from_slice(&d.to_le_bytes());
    Ok(())
}

/// Reads fields off a binary record.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if n > self.b.len() {
            return Err("record ends early".into());
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }

    fn bytes(&mut self, wide: bool) -> Result<&'a [u8], CodecError> {
        let n = if wide {
            u16::from_le_bytes(self.take(2)?.try_into().expect("2 bytes")) as usize
        } else {
            self.take(1)?[0] as usize
        };
        self.take(n)
    }

    fn i32(&mut self) -> Result<i32, CodecError> {
        Ok(i32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn f64(&mut self) -> Result<f64, CodecError> {
        Ok(f64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

/// A Rankings row decoded in place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankingsView<'a> {
    /// pageURL.
    pub url: &'a [u8],
    /// pageRank.
    pub rank: i32,
    /// avgDuration.
    pub duration: i32,
}

/// Decodes a binary Rankings record without allocating.
pub fn rankings_view(rec: &[u8]) -> Result<RankingsView<'_>, CodecError> {
    let mut r = Reader { b: rec };
    Ok(RankingsView {
        url: r.bytes(true)?,
        rank: r.i32()?,
        duration: r.i32()?,
    })
}

/// A UserVisits row decoded in place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VisitView<'a> {
    /// sourceIP.
    pub ip: &'a [u8],
    /// destURL.
    pub url: &'a [u8],
    /// visitDate as days since 1970-01-01.
    pub day: i32,
    /// adRevenue.
    pub revenue: f64,
    /// userAgent.
    pub agent: &'a [u8],
    /// countryCode.
    pub country: &'a [u8],
    /// languageCode.
    pub language: &'a [u8],
    /// searchWord.
    pub word: &'a [u8],
    /// duration.
    pub duration: i32,
}

/// Decodes a binary UserVisits record without allocating.
pub fn visit_view(rec: &[u8]) -> Result<VisitView<'_>, CodecError> {
    let mut r = Reader { b: rec };
    Ok(VisitView {
        ip: r.bytes(false)?,
        url: r.bytes(true)?,
        day: r.i32()?,
        revenue: r.f64()?,
        agent: r.bytes(false)?,
        country: r.bytes(false)?,
        language: r.bytes(false)?,
        word: r.bytes(false)?,
        duration: r.i32()?,
    })
}

/// A Rankings row as an owned object (the allocating decoders' output).
#[derive(Debug, Clone, PartialEq)]
pub struct Rankings {
    /// pageURL.
    pub url: String,
    /// pageRank.
    pub rank: i32,
    /// avgDuration.
    pub duration: i32,
}

/// A UserVisits row as an owned object.
#[derive(Debug, Clone, PartialEq)]
pub struct Visit {
    /// sourceIP.
    pub ip: String,
    /// destURL.
    pub url: String,
    /// visitDate.
    pub date: String,
    /// adRevenue.
    pub revenue: f64,
    /// userAgent.
    pub agent: String,
    /// countryCode.
    pub country: String,
    /// languageCode.
    pub language: String,
    /// searchWord.
    pub word: String,
    /// duration.
    pub duration: i32,
}

fn owned(b: &[u8]) -> Result<String, CodecError> {
    String::from_utf8(b.to_vec()).map_err(|_| "field is not UTF-8".into())
}

/// Decodes a binary Rankings record into a new object.
pub fn rankings_owned(rec: &[u8]) -> Result<Rankings, CodecError> {
    let v = rankings_view(rec)?;
    Ok(Rankings {
        url: owned(v.url)?,
        rank: v.rank,
        duration: v.duration,
    })
}

/// Decodes a binary UserVisits record into a new object.
pub fn visit_owned(rec: &[u8]) -> Result<Visit, CodecError> {
    let v = visit_view(rec)?;
    let (y, m, d) = sluice_formats::dates::civil_from_days(i64::from(v.day));
    Ok(Visit {
        ip: owned(v.ip)?,
        url: owned(v.url)?,
        date: format!("{y:04}-{m:02}-{d:02}"),
        revenue: v.revenue,
        agent: owned(v.agent)?,
        country: owned(v.country)?,
        language: owned(v.language)?,
        word: owned(v.word)?,
        duration: v.duration,
    })
}

/// The allocating text decoder: a new `String` per field per row.
pub fn text_fields_owned(line: &[u8]) -> Result<Vec<String>, CodecError> {
    let s = std::str::from_utf8(line).map_err(|_| "row is not UTF-8")?;
    Ok(s.split('|').map(str::to_owned).collect())
}

/// Parses a Rankings row with the allocating text decoder.
pub fn rankings_from_text_owned(line: &[u8]) -> Result<Rankings, CodecError> {
    let f = text_fields_owned(line)?;
    let [url, rank, duration] = <[String; 3]>::try_from(f).map_err(|_| "expected 3 fields")?;
    Ok(Rankings {
        url,
        rank: rank.parse().map_err(|_| "bad pageRank")?,
        duration: duration.parse().map_err(|_| "bad avgDuration")?,
    })
}

/// Parses a UserVisits row with the allocating text decoder.
pub fn visit_from_text_owned(line: &[u8]) -> Result<Visit, CodecError> {
    let f = text_fields_owned(line)?;
    let [ip, url, date, revenue, agent, country, language, word, duration] =
        <[String; 9]>::try_from(f).map_err(|_| "expected 9 fields")?;
    Ok(Visit {
        ip,
        url,
        date,
        revenue: revenue.parse().map_err(|_| "bad adRevenue")?,
        agent,
        country,
        language,
        word,
        duration: duration.parse().map_err(|_| "bad duration")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_rows_round_trip_through_both_decoders() {
        let mut dec = Decoder::new(b'|');
        let mut out = Vec::new();
        let row = b"http://a.com/page1.html|7|33";
        encode_rankings(&mut dec, row, &mut out).unwrap();
        let v = rankings_view(&out).unwrap();
        assert_eq!(
            (v.url, v.rank, v.duration),
            (&b"http://a.com/page1.html"[..], 7, 33)
        );
        assert_eq!(
            rankings_owned(&out).unwrap(),
            rankings_from_text_owned(row).unwrap()
        );
        let row = b"1.2.3.4|http://a.com/p.html|2000-01-16|12.5|curl|USA|en-US|word|99";
        encode_uservisits(&mut dec, row, &mut out).unwrap();
        let v = visit_view(&out).unwrap();
        assert_eq!((v.ip, v.revenue, v.duration), (&b"1.2.3.4"[..], 12.5, 99));
        assert_eq!(
            visit_owned(&out).unwrap(),
            visit_from_text_owned(row).unwrap()
        );
        assert!(encode_uservisits(&mut dec, b"1|2|2000-99-01|1|a|b|c|d|5", &mut out).is_err());
        assert!(visit_view(&out[..5]).is_err());
    }
}
