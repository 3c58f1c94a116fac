//! `sluice teravalidate`: the independent check of a TeraSort output.
//! Reads the part files in number order and checks that every record's
//! 10-byte key is at least the previous one's; counts the records and sums
//! their CRC32Cs (an order-independent checksum), and with `--against`
//! compares both with the input's.

use clap::Args;
use sluice_formats::input::{plan_splits, resolve, RecordFormat};
use sluice_formats::read::{read_split, ReadOptions};
use sluice_gen::{TERA_KEY, TERA_RECORD};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The sorted output (its part files, in number order).
    #[arg(long)]
    input: String,
    /// The unsorted input, to compare record count and checksum with.
    #[arg(long)]
    against: Option<String>,
}

/// Records, checksum, and the first out-of-order position if any.
struct Summary {
    records: u64,
    checksum: u64,
    disorder: Option<String>,
}

fn scan(input: &str) -> anyhow::Result<Summary> {
    let files = resolve(input)?;
    let mut s = Summary {
        records: 0,
        checksum: 0,
        disorder: None,
    };
    let mut prev = [0u8; TERA_KEY];
    for split in plan_splits(&files, u64::MAX, RecordFormat::Fixed(TERA_RECORD)) {
        let path = split.file.path.clone();
        read_split::<anyhow::Error, _>(
            &split,
            RecordFormat::Fixed(TERA_RECORD),
            &ReadOptions::default(),
            |off, rec| {
                let key = &rec[..TERA_KEY];
                if s.records > 0 && key < &prev[..] && s.disorder.is_none() {
                    s.disorder = Some(format!("{} at offset {off}", path.display()));
                }
                prev.copy_from_slice(key);
                s.records += 1;
                s.checksum = s.checksum.wrapping_add(u64::from(crc32c::crc32c(rec)));
                Ok(())
            },
        )?;
    }
    Ok(s)
}

pub fn validate(a: &ValidateArgs) -> anyhow::Result<()> {
    let out = scan(&a.input)?;
    println!("records {}  checksum {:016x}", out.records, out.checksum);
    if let Some(at) = &out.disorder {
        anyhow::bail!("records out of order: {at}");
    }
    if let Some(input) = &a.against {
        let want = scan(input)?;
        anyhow::ensure!(
            (want.records, want.checksum) == (out.records, out.checksum),
            "output has {} records (checksum {:016x}), input {} ({:016x})",
            out.records,
            out.checksum,
            want.records,
            want.checksum
        );
        println!("same records as {input}");
    }
    println!("sorted: ok");
    Ok(())
}
