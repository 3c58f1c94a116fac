//! `bigram-count`: Sluice's command line with one more job, `bigram-count`.
//!
//! Everything `sluice` does, this binary does; `bigram-count run
//! bigram-count ...` runs the job locally, and a cluster started with
//! `bigram-count cluster up` runs it through `bigram-count submit
//! bigram-count ...`, because its coordinator and workers are this binary.

fn main() {
    let mut jobs = sluice_request::Registry::builtin();
    jobs.register_fn(
        "bigram-count",
        "count adjacent word pairs",
        bigram_count::from_request,
    );
    sluice_cli::main_with(jobs)
}
