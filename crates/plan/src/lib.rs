//! Steps 1 and 2 of `/system-profile`: `identify` turns the user's free text into a target
//! resolved against this machine's files, processes and Python; `planner` turns a target, a
//! focus and the detected tools into an ordered plan of `run_profiler` calls, following the
//! recipes in `recipes/*.toml` (one file per framework or kind of target).

pub mod identify;
pub mod planner;
mod procinfo;
mod pyhelper;
pub mod recipe;
pub mod words;

pub use recipe::Recipes;
