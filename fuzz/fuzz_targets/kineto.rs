//! The Kineto trace scanner on arbitrary bytes: it must end, without panicking, on anything.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = system_profile_parse::kineto::analyze_reader(data);
});
