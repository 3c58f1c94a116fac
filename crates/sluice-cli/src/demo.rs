//! `sluice demo`: the embedded default, end to end.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use crate::args::RunArgs;
use sluice_tools::units::parse_size;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Size of the generated text.
    #[arg(long, default_value = "64MB", value_parser = parse_size)]
    size: u64,
    /// Working directory for the data and the output.
    #[arg(long, default_value = "sluice-demo")]
    dir: PathBuf,
}

pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let data = args.dir.join("text");
    let out = args.dir.join("wordcount");
    if !data.join("part-00000").exists() {
        sluice_tools::datagen::text(args.size, 7, data.clone(), 100_000, 1.0, None, true)?;
    }
    let report = args.dir.join("wordcount-report.json");
    let run = RunArgs::parse(&[
        "wordcount".into(),
        "--input".into(),
        data.display().to_string(),
        "--output".into(),
        out.display().to_string(),
        "--memory".into(),
        "512MiB".into(),
        "--report".into(),
        report.display().to_string(),
        "--overwrite".into(),
    ])?;
    crate::run::run(&run)?;
    print_top(&out, 10)?;
    println!(
        "output: {}  report: {}",
        out.display(),
        args.dir.join("wordcount-report.json").display()
    );
    Ok(())
}

/// Prints the `n` most frequent words of a word count output.
fn print_top(out: &Path, n: usize) -> anyhow::Result<()> {
    let mut rows: Vec<(u64, String)> = Vec::new();
    for ent in std::fs::read_dir(out)? {
        let path = ent?.path();
        if !path
            .file_name()
            .is_some_and(|f| f.to_string_lossy().starts_with("part-"))
        {
            continue;
        }
        let f =
            std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        for line in std::io::BufReader::new(f).lines() {
            let line = line?;
            if let Some((w, c)) = line.rsplit_once('\t') {
                rows.push((c.parse()?, w.to_owned()));
            }
        }
    }
    rows.sort_unstable_by(|a, b| b.cmp(a));
    println!("top {n} words:");
    for (c, w) in rows.iter().take(n) {
        println!("  {w:<16} {c:>12}");
    }
    Ok(())
}
