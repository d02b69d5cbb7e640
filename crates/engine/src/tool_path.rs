//! Where a run finds its profiler: the folder detection found it in, when the run's `PATH`
//! would not find it there.

use crate::Engine;
use system_profile_model::run::RunProfilerInput;

impl Engine {
    /// The run's `PATH` with the folder where detection found the method's program put first,
    /// when that `PATH` would not find it (`.venv/bin/py-spy` with the venv not activated): a
    /// tool detection calls usable is run from where it was found. `None` when nothing needs
    /// adding. The change is in the run's recorded `env`.
    pub(crate) async fn path_with_tool(&self, input: &RunProfilerInput) -> Option<String> {
        // The method's own tool, and those of the methods observing its run.
        let tools: Vec<&str> = input.methods().filter_map(|m| m.spec().tool).collect();
        let found: Vec<String> = {
            let cache = self.detect_cache.lock().await;
            cache
                .values()
                .flat_map(|r| r.tools.iter())
                .filter(|t| tools.contains(&t.id.as_str()) && t.usable)
                .filter_map(|t| t.path.clone())
                .collect()
        };
        let given = input
            .env
            .get("PATH")
            .cloned()
            .or_else(|| std::env::var("PATH").ok())
            .unwrap_or_default();
        let mut run_path = given.clone();
        for found in found {
            let found = std::path::Path::new(&found);
            let (Some(dir), Some(program)) = (found.parent(), found.file_name()) else {
                continue;
            };
            // Python modules (`memray/__init__.py`) run through the interpreter, not PATH.
            if found.extension().is_some_and(|e| e == "py") {
                continue;
            }
            let on_path = std::env::split_paths(&run_path).any(|d| d.join(program).is_file());
            if !on_path {
                let mut dirs = vec![dir.to_path_buf()];
                dirs.extend(std::env::split_paths(&run_path));
                if let Ok(p) = std::env::join_paths(dirs) {
                    run_path = p.to_string_lossy().into_owned();
                }
            }
        }
        (run_path != given).then_some(run_path)
    }
}
