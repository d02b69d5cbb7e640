//! Recipes: `recipes/*.toml`, embedded at build time, parsed and checked once. A recipe that
//! does not parse or does not hold together is left out with a diagnostic, never a panic.

use std::collections::HashSet;
use std::sync::OnceLock;
use system_profile_model::recipe::{Per, Recipe, RecipeRole};
use system_profile_model::target::TargetKind;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/recipes.rs"));
}

/// Every recipe that loaded, and what was wrong with the others.
#[derive(Debug, Clone, Default)]
pub struct Recipes {
    pub recipes: Vec<Recipe>,
    pub diagnostics: Vec<String>,
}

impl Recipes {
    /// The recipes built into this binary, parsed once.
    pub fn builtin() -> &'static Recipes {
        static BUILTIN: OnceLock<Recipes> = OnceLock::new();
        BUILTIN.get_or_init(|| Recipes::from_texts(embedded::EMBEDDED.iter().copied()))
    }

    /// Parse and check recipes from `(file name, text)` pairs.
    pub fn from_texts<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Recipes {
        let mut out = Recipes::default();
        for (file, text) in files {
            match toml::from_str::<Recipe>(text) {
                Ok(recipe) => {
                    let problems = check(file, &recipe);
                    if problems.is_empty() {
                        out.recipes.push(recipe);
                    } else {
                        out.diagnostics
                            .extend(problems.into_iter().map(|p| format!("{file}: {p}")));
                    }
                }
                Err(e) => out.diagnostics.push(format!("{file}: {e}")),
            }
        }
        // Frameworks first (they are what words name), then generic ones; file order within.
        out.recipes
            .sort_by_key(|r| matches!(r.role, RecipeRole::Generic));
        out
    }

    pub fn get(&self, id: &str) -> Option<&Recipe> {
        self.recipes.iter().find(|r| r.id == id)
    }

    pub fn frameworks(&self) -> impl Iterator<Item = &Recipe> {
        self.recipes
            .iter()
            .filter(|r| r.role == RecipeRole::Framework)
    }

    /// The generic recipe for a target kind, Python or not.
    pub fn generic_for(&self, kind: TargetKind, python: bool) -> Option<&Recipe> {
        self.recipes.iter().find(|r| {
            r.role == RecipeRole::Generic
                && r.applies_to.contains(&kind)
                && r.python.is_none_or(|p| p == python)
        })
    }

    /// Every phrase that names a framework, with its recipe id, longest first.
    pub fn phrases(&self) -> Vec<(&str, &str)> {
        let mut all: Vec<(&str, &str)> = self
            .frameworks()
            .flat_map(|r| r.words.iter().map(move |w| (w.as_str(), r.id.as_str())))
            .collect();
        all.sort_by_key(|(w, _)| std::cmp::Reverse(w.chars().count()));
        all
    }
}

/// What makes a recipe unusable: an id that is not its file name, a reference to a component,
/// step or fact that does not exist, a step without methods.
fn check(file: &str, r: &Recipe) -> Vec<String> {
    let mut problems = Vec::new();
    let stem = file.strip_suffix(".toml").unwrap_or(file);
    if r.id != stem {
        problems.push(format!("id `{}` differs from the file name `{stem}`", r.id));
    }
    match r.role {
        RecipeRole::Framework if r.words.is_empty() => {
            problems.push("a framework recipe needs `words` that name it".into())
        }
        RecipeRole::Generic if r.applies_to.is_empty() => {
            problems.push("a generic recipe needs `applies_to`".into())
        }
        _ => {}
    }
    if let Some(w) = r.words.iter().find(|w| w.to_lowercase() != **w) {
        problems.push(format!("word `{w}` must be lower case"));
    }
    let components: HashSet<&str> = r.components.iter().map(|c| c.name.as_str()).collect();
    let facts: HashSet<&str> = r.facts.iter().map(|f| f.name.as_str()).collect();
    let steps: HashSet<&str> = r.steps.iter().map(|s| s.name.as_str()).collect();
    for c in &r.components {
        if c.cmdline.is_empty() && c.children_of.is_none() {
            problems.push(format!(
                "component `{}` has no way to be recognised",
                c.name
            ));
        }
        if let Some(parent) = &c.children_of {
            if !components.contains(parent.as_str()) {
                problems.push(format!("component `{}`: no component `{parent}`", c.name));
            }
        }
    }
    for s in &r.steps {
        if s.methods.is_empty() {
            problems.push(format!("step `{}` has no methods", s.name));
        }
        for c in &s.components {
            if !components.contains(c.as_str()) {
                problems.push(format!("step `{}`: no component `{c}`", s.name));
            }
        }
        if let Some(a) = &s.alongside {
            if !steps.contains(a.as_str()) || a == &s.name {
                problems.push(format!(
                    "step `{}`: alongside an unknown step `{a}`",
                    s.name
                ));
            }
        }
        if s.per == Per::Command && s.command.is_empty() {
            problems.push(format!(
                "step `{}`: per = \"command\" needs `command`",
                s.name
            ));
        }
        for f in s.when.fact_above.keys() {
            if !facts.contains(f.as_str()) {
                problems.push(format!("step `{}`: no fact `{f}`", s.name));
            }
        }
        for arg in s.command.iter().chain(s.env.values()) {
            for name in placeholders(arg) {
                let known = name == "profile_output"
                    || facts.contains(name)
                    || name
                        .strip_prefix("argv:")
                        .is_some_and(|c| components.contains(c));
                if !known {
                    problems.push(format!(
                        "step `{}`: unknown placeholder `{{{name}}}`",
                        s.name
                    ));
                }
            }
        }
    }
    problems
}

/// Is `name` a placeholder name (`model`, `argv:api server`), not JSON text?
fn is_placeholder_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | ' ' | '-'))
}

/// Each `{name}` of a recipe string with its byte range; JSON braces such as `{"a": 1}` are
/// not names.
fn placeholder_spans(s: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let mut out = Vec::new();
    for (i, _) in s.match_indices('{') {
        let after = &s[i + 1..];
        let Some(end) = after.find(['{', '}']) else {
            continue;
        };
        if after[end..].starts_with('}') && is_placeholder_name(&after[..end]) {
            out.push((i..i + end + 2, &after[..end]));
        }
    }
    out
}

/// The `{name}` placeholders of a recipe string.
pub fn placeholders(s: &str) -> Vec<&str> {
    placeholder_spans(s).into_iter().map(|(_, n)| n).collect()
}

/// Fill the placeholders `lookup` knows; the names it does not know are returned.
pub fn fill(s: &str, lookup: impl Fn(&str) -> Option<String>) -> (String, Vec<String>) {
    let mut out = String::with_capacity(s.len());
    let mut missing = Vec::new();
    let mut last = 0;
    for (range, name) in placeholder_spans(s) {
        out.push_str(&s[last..range.start]);
        match lookup(name) {
            Some(v) => out.push_str(&v),
            None => {
                out.push_str(&s[range.clone()]);
                missing.push(name.to_string());
            }
        }
        last = range.end;
    }
    out.push_str(&s[last..]);
    (out, missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_recipe_loads() {
        let r = Recipes::builtin();
        assert!(r.diagnostics.is_empty(), "{:#?}", r.diagnostics);
        for id in [
            "vllm_serving",
            "autogen",
            "torch_training",
            "torch_ddp",
            "python_service",
            "python_program",
            "native_command",
            "whole_system",
            "sglang_serving",
            "ray",
            "triton_server",
        ] {
            assert!(r.get(id).is_some(), "{id}");
        }
        assert_eq!(r.recipes.len(), embedded::EMBEDDED.len());
    }

    #[test]
    fn a_broken_recipe_is_left_out_with_the_reason() {
        let good = embedded::EMBEDDED
            .iter()
            .find(|(f, _)| *f == "ray.toml")
            .unwrap()
            .1;
        let r = Recipes::from_texts([
            ("ray.toml", good),
            ("bad.toml", "id = \"bad\"\nname = 3"),
            ("renamed.toml", good),
            (
                "dangling.toml",
                &good.replace("components = [\"worker\"]", "components = [\"nobody\"]"),
            ),
        ]);
        assert_eq!(r.recipes.len(), 1);
        let d = r.diagnostics.join("\n");
        assert!(d.contains("bad.toml"), "{d}");
        assert!(d.contains("renamed.toml: id `ray` differs"), "{d}");
        assert!(d.contains("no component `nobody`"), "{d}");
    }

    #[test]
    fn placeholders_skip_json() {
        assert_eq!(
            placeholders("{\"profiler\": \"torch\", \"dir\": \"{profile_output}/x\"}"),
            vec!["profile_output"]
        );
        assert_eq!(placeholders("{argv:api server}"), vec!["argv:api server"]);
        let (s, missing) = fill("http://{host}:{port}/{x}", |n| {
            (n != "x").then(|| n.to_uppercase())
        });
        assert_eq!(s, "http://HOST:PORT/{x}");
        assert_eq!(missing, vec!["x"]);
    }
}
