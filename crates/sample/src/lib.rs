//! Built-in samplers of system-profile. Today: the /proc process table (who is running, their
//! command lines, parents and children, CPU ticks and memory), which the target identification
//! reads and the process-tree sampler will sample. Readers never fail on a process that
//! vanishes between two reads: it is simply absent.

#[cfg(target_os = "linux")]
pub mod proc;
