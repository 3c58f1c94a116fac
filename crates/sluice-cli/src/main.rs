//! `sluice`: the command line over Sluice's built-in jobs.

fn main() {
    sluice_cli::main_with(sluice_request::Registry::builtin())
}
