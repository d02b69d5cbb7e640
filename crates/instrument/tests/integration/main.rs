//! One integration-test binary: strategies and revert on real Python files, the runtime
//! helper run inside real programs (torch on the gloo backend when torch is installed), and
//! the standard-library round trip.

mod roundtrip;
mod runtime;
mod strategies;
mod support;
