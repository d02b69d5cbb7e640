//! The method catalog in words for people: the README's table of methods, written from each
//! method's `MethodSpec` so it cannot say other than what the planner and the runner use.

use crate::run::{Method, TargetMode};
use crate::wire_name;

/// The README's table of methods: one row per method, from its spec.
pub fn methods_markdown() -> String {
    let mut out = String::from(
        "| method | tool | reaches | needs | measures | options | artifacts | overhead |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for m in Method::ALL {
        let s = m.spec();
        let code = |items: Vec<String>| {
            items
                .iter()
                .map(|i| format!("`{i}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let reaches: Vec<&str> = s
            .modes
            .iter()
            .map(|mode| match mode {
                TargetMode::Launch => "command",
                TargetMode::Attach => "PID",
                TargetMode::Machine => "machine",
                TargetMode::Cluster => "cluster job",
            })
            .collect();
        let mut needs: Vec<String> = Vec::new();
        if s.python_only {
            needs.push("Python".into());
        }
        if s.needs_torch {
            needs.push("torch".into());
        }
        if s.needs_gpu {
            needs.push("NVIDIA GPU".into());
        }
        if s.needs_function {
            needs.push("`options.function`".into());
        }
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {} | {}: {} |\n",
            m.id(),
            s.tool.map_or("built in".to_string(), |t| format!("`{t}`")),
            reaches.join(", "),
            needs.join(", "),
            s.families
                .iter()
                .map(wire_name)
                .collect::<Vec<_>>()
                .join(", "),
            code(s.options.iter().map(wire_name).collect()),
            code(s.artifacts.iter().map(|a| a.file.to_string()).collect()),
            wire_name(&s.overhead),
            s.overhead_note.replace('|', "\\|"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    /// Where the README holds the table.
    const MARKERS: (&str, &str) = (
        "<!-- methods: generated from MethodSpec -->\n",
        "<!-- /methods -->",
    );

    /// The README's table is the catalog's; `SP_UPDATE_README=1` rewrites it.
    #[test]
    fn the_readme_table_of_methods_is_the_catalog() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
        let readme = std::fs::read_to_string(&path).unwrap();
        let start = readme
            .find(MARKERS.0)
            .expect("README.md marks its table of methods")
            + MARKERS.0.len();
        let end = start + readme[start..].find(MARKERS.1).unwrap();
        let table = super::methods_markdown();
        if std::env::var_os("SP_UPDATE_README").is_some() {
            let updated = format!("{}{table}{}", &readme[..start], &readme[end..]);
            std::fs::write(&path, updated).unwrap();
            return;
        }
        assert!(
            readme[start..end] == table,
            "README.md's table of methods drifted from the specs: review, then SP_UPDATE_README=1 cargo test -p system-profile-model"
        );
    }
}
