//! Sampling input records, for total-order range partitioning.

use sluice_formats::input::{RecordFormat, Split};
use sluice_formats::read::{read_split, ReadOptions};
use sluice_formats::FormatError;

/// Stops a read after its first record.
enum Stop {
    Got,
    Format(FormatError),
}

impl From<FormatError> for Stop {
    fn from(e: FormatError) -> Self {
        Stop::Format(e)
    }
}

/// Reads up to `per_split` records from each split, at evenly spaced
/// offsets (the first record starting at or after each offset). Gzip splits
/// give their first records.
pub fn sample_records(
    splits: &[Split],
    format: RecordFormat,
    max_record: usize,
    per_split: usize,
) -> Result<Vec<Vec<u8>>, FormatError> {
    let opts = ReadOptions {
        buffer_size: 64 << 10,
        max_record,
    };
    let mut out = Vec::new();
    for s in splits {
        for k in 0..per_split as u64 {
            let mut sub = s.clone();
            if s.file.codec != sluice_formats::input::Codec::None && k > 0 {
                break;
            }
            if s.file.codec == sluice_formats::input::Codec::None {
                sub.start = s.start + s.len() * k / per_split as u64;
                if let RecordFormat::Fixed(n) = format {
                    sub.start -= sub.start % n as u64;
                }
            }
            let mut got = None;
            let r = read_split::<Stop, _>(&sub, format, &opts, |_, rec| {
                got = Some(rec.to_vec());
                Err(Stop::Got)
            });
            if let Err(Stop::Format(e)) = r {
                return Err(e);
            }
            out.extend(got);
        }
    }
    Ok(out)
}
