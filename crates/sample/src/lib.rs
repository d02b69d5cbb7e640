//! Built-in samplers of system-profile: the /proc process table (who is running, their command
//! lines, parents and children, CPU ticks and memory), which target identification reads, and
//! the process-tree sampler (`sampler`), which follows a tree at a fixed rate. Readers never fail on a process that
//! vanishes between two reads: it is simply absent.

#[cfg(target_os = "linux")]
pub mod proc;
#[cfg(target_os = "linux")]
pub mod sampler;
