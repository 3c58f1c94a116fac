//! `bigram-count INPUT OUTPUT`: runs the example job on the local engine.

use std::path::PathBuf;

use sluice_engine::{run_job, EngineConfig, Progress};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        eprintln!("usage: bigram-count INPUT OUTPUT");
        std::process::exit(2);
    };
    let cfg = EngineConfig::default();
    match run_job(
        &bigram_count::bigram_job(),
        input,
        &PathBuf::from(output),
        &cfg,
        &Progress::default(),
    ) {
        Ok(r) => eprintln!(
            "{} bigrams from {} lines in {:.2}s",
            r.output_records, r.counters["MAP_INPUT_RECORDS"], r.phases.total_s
        ),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
