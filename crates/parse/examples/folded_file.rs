//! Stream a folded-stacks file through the parser and print what it found; run it under
//! `/usr/bin/time -v` to see that memory does not grow with the file.
//!
//! `cargo run --release -p system-profile-parse --example folded_file -- FILE`
#![allow(clippy::print_stdout)]

fn main() {
    let path = std::env::args().nth(1).expect("a folded-stacks file");
    let file = std::fs::File::open(&path).expect("readable");
    let started = std::time::Instant::now();
    let parsed = system_profile_parse::folded::parse_reader(std::io::BufReader::new(file));
    let secs = started.elapsed().as_secs_f64();
    let mb = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;
    println!(
        "{mb:.0} MB, {} samples, {} stacks, {} diagnostics, {secs:.2} s = {:.0} MB/s",
        parsed.value.total_samples,
        parsed.value.stacks,
        parsed.diagnostics.len(),
        mb / secs
    );
}
