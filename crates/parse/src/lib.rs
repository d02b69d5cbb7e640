//! Pure parsers of the outputs of profilers and GPU tools (and of the command lines of
//! distributed launchers), one module per format. Each takes
//! text and returns the value it could build plus diagnostics: no parser panics or fails on
//! messy input, and none does IO.

pub mod alloc_samples;
pub mod cprofile_json;
pub mod folded;
pub mod instrument_log;
pub mod kineto;
pub mod launcher;
pub mod line_profile;
pub mod memory_profile;
pub mod memray_peak;
pub mod memray_stats;
pub mod nccl_debug;
pub mod nccl_tests;
pub mod nsys_stats;
pub mod nvidia_smi_dmon;
pub mod nvidia_smi_nvlink;
pub mod nvidia_smi_query;
pub mod nvidia_smi_topo;
pub mod perf_stat;
pub mod prometheus;
pub mod py_spy_dump;
pub mod pyinstrument_session;
pub mod ray;
pub mod scalene_json;
pub mod serving;
pub mod slurm;
pub mod strace_c;
pub mod sysstat;
pub mod time_v;
pub mod torch_table;
pub mod tracemalloc_json;

use system_profile_model::Parsed;

/// One input format. `parse` never fails: what it could not read goes to the diagnostics.
pub trait Format {
    /// The format's name as tools and fixtures call it (`nvidia_smi_topo`).
    const NAME: &'static str;
    type Output;
    fn parse(input: &str) -> Parsed<Self::Output>;
}

/// Remove ANSI escape sequences (`ESC [ ... letter`), which nvidia-smi prints on a tty.
pub fn strip_ansi(input: &str) -> std::borrow::Cow<'_, str> {
    if !input.contains('\u{1b}') {
        return std::borrow::Cow::Borrowed(input);
    }
    let mut out = String::with_capacity(input.len());
    let mut chars = input.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters and intermediates up to the final byte (0x40..=0x7e).
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn strip_ansi_removes_sgr_sequences() {
        assert_eq!(super::strip_ansi("\u{1b}[4mGPU0\u{1b}[0m x"), "GPU0 x");
        assert_eq!(super::strip_ansi("plain"), "plain");
        assert_eq!(super::strip_ansi("dangling \u{1b}["), "dangling ");
    }
}
