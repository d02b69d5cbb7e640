//! Built-in samplers of system-profile: the /proc process table (who is running, their command
//! lines, parents and children, CPU ticks and memory), which target identification reads; the
//! process-tree sampler (`sampler`), which follows a tree at a fixed rate; NVML, loaded once,
//! and the GPU sampler on it (`nvml`); and the GPU summary shared with the nvidia-smi parsers
//! (`gpu`); per-thread scheduler counters (`threads`). Readers never fail on a process or a device that vanishes between two reads: it is
//! simply absent.

mod background;
pub mod gpu;
#[cfg(target_os = "linux")]
pub mod nvml;
#[cfg(target_os = "linux")]
pub mod proc;
#[cfg(target_os = "linux")]
pub mod sampler;
#[cfg(target_os = "linux")]
pub mod threads;
