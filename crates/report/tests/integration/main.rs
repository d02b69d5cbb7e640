//! The report on sessions from real runs (captured by `tests/tools/capture_sessions.py`) and on
//! a GPU session assembled from real GPU tools' outputs: snapshots in both languages, the
//! rules that must and must not fire, the order of the recommendations, omitted tables,
//! errors, charts, and `compare`.

mod compare;
mod errors;
mod in_process;
mod memory;
mod rules;
mod snapshots;
mod support;
