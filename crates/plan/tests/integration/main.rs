//! Identification and planning against real files, real processes started here, the real
//! detection of this machine, and (for GPU paths) a GPU machine's detection shaped from real
//! fixtures.

mod distributed;
mod fixture;
mod identify;
mod plan;
