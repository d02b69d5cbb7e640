//! The schemas `tools/list` serves, sized for a model's context. A model reads every tool's
//! description and input schema before its first call, so the input schemas keep only what
//! helps it choose arguments: the properties with the first sentence of their description,
//! nested types without descriptions, and an optional argument shown by its type alone
//! (leaving it out says "none"; `null` is still accepted), without `additionalProperties:
//! false` (the server still refuses an unknown argument, naming it), without `$schema` (MCP's
//! default dialect, 2020-12, is theirs). Output schemas stay complete in structure (every
//! property, type and `$defs` entry, so `structuredContent` is checked as before) without
//! descriptions or titles. The documented schemas are the files `system-profile schemas`
//! writes; nothing here changes what the server accepts or returns.

use serde_json::{Map, Value};

/// Longest description kept on an input property.
const PROPERTY_DESCRIPTION_CHARS: usize = 72;

/// An input schema as `tools/list` serves it. `opaque` names `$defs` entries passed through
/// whole from another tool's result (a `Target`): they become a plain object, described once.
pub fn input(schema: &Value, opaque: &[(&str, &str)]) -> Value {
    let mut s = schema.clone();
    if let Some(m) = s.as_object_mut() {
        m.remove("description");
        m.remove("title");
        // MCP's default dialect is 2020-12 (SEP-1613), which these are: the URL read by a
        // model before every session says nothing (13 tools × 13 tokens).
        m.remove("$schema");
        if let Some(Value::Object(props)) = m.get_mut("properties") {
            for p in props.values_mut() {
                shorten_description(p);
                strip_nested(p, &["title"]);
            }
        }
        if let Some(Value::Object(defs)) = m.get_mut("$defs") {
            for d in defs.values_mut() {
                strip_nested(d, &["title", "description"]);
            }
        }
    }
    for (name, description) in opaque {
        replace_ref(&mut s, &format!("#/$defs/{name}"), description);
    }
    drop_null_choices(&mut s);
    drop_closed_objects(&mut s);
    prune_defs(&mut s);
    merge_string_choices(&mut s);
    s
}

fn drop_closed_objects(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.get("additionalProperties") == Some(&Value::Bool(false)) {
                m.remove("additionalProperties");
            }
            m.values_mut().for_each(drop_closed_objects);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_closed_objects),
        _ => {}
    }
}

/// `"type": ["integer", "null"]` as `"integer"`, `anyOf: [X, {"type": "null"}]` as X.
fn drop_null_choices(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.values_mut().for_each(drop_null_choices);
            if let Some(Value::Array(types)) = m.get("type") {
                let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                if kept.len() == 1 && types.len() == 2 {
                    m.insert("type".into(), kept[0].clone());
                }
            }
            let only = m.get("anyOf").and_then(Value::as_array).and_then(|alts| {
                let kept: Vec<&Value> = alts
                    .iter()
                    .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
                    .collect();
                (kept.len() == 1 && alts.len() == 2).then(|| kept[0].clone())
            });
            if let (Some(Value::Object(inner)), true) = (only, m.contains_key("anyOf")) {
                m.remove("anyOf");
                for (k, x) in inner {
                    m.entry(k).or_insert(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(drop_null_choices),
        _ => {}
    }
}

/// An output schema as `tools/list` serves it: the same structure, no prose.
pub fn output(schema: &Value) -> Value {
    let mut s = schema.clone();
    strip_nested(&mut s, &["title", "description"]);
    merge_string_choices(&mut s);
    s
}

/// `oneOf` of string constants (what an enum with documented variants becomes) as one `enum`,
/// which says the same once the variants' descriptions are gone.
fn merge_string_choices(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.values_mut().for_each(merge_string_choices);
            let choices = m.get("oneOf").and_then(Value::as_array).and_then(|alts| {
                let mut all = Vec::new();
                for a in alts {
                    let o = a.as_object()?;
                    if o.get("type").and_then(Value::as_str) != Some("string") {
                        return None;
                    }
                    match (o.get("const"), o.get("enum"), o.len()) {
                        (Some(c), None, 2) => all.push(c.clone()),
                        (None, Some(Value::Array(e)), 2) => all.extend(e.iter().cloned()),
                        _ => return None,
                    }
                }
                Some(all)
            });
            if let Some(all) = choices {
                m.remove("oneOf");
                m.insert("type".into(), "string".into());
                m.insert("enum".into(), Value::Array(all));
            }
        }
        Value::Array(a) => a.iter_mut().for_each(merge_string_choices),
        _ => {}
    }
}

/// The first sentence of a property's description; when that is long, its main clause (up
/// to a parenthesis, `;` or `:`), else its words up to the limit.
fn shorten_description(p: &mut Value) {
    let Some(Value::String(d)) = p.get_mut("description") else {
        return;
    };
    let words = d.split_whitespace().collect::<Vec<_>>().join(" ");
    let first = match words.find(". ") {
        Some(i) => &words[..=i],
        None => words.as_str(),
    };
    if first.chars().count() <= PROPERTY_DESCRIPTION_CHARS {
        *d = first.to_string();
        return;
    }
    let clause = [" (", "; ", ": "]
        .iter()
        .filter_map(|sep| first.find(sep))
        .min()
        .filter(|i| *i > 0 && first[..*i].chars().count() <= PROPERTY_DESCRIPTION_CHARS);
    *d = match clause {
        Some(i) => first[..i].to_string(),
        None => {
            let mut kept = String::new();
            for w in first.split(' ') {
                if kept.chars().count() + w.chars().count() + 1 > PROPERTY_DESCRIPTION_CHARS {
                    break;
                }
                if !kept.is_empty() {
                    kept.push(' ');
                }
                kept.push_str(w);
            }
            format!("{kept}…")
        }
    };
}

/// Drop these keywords everywhere below (but never a property that happens to bear the name:
/// a `properties` map's keys are names, not keywords).
fn strip_nested(v: &mut Value, keys: &[&str]) {
    match v {
        Value::Object(m) => {
            for k in keys {
                // A property named `description` is data about the schema, kept.
                if m.get(*k).is_some_and(|x| x.is_string()) {
                    m.remove(*k);
                }
            }
            for (k, x) in m.iter_mut() {
                if k == "properties" {
                    if let Value::Object(props) = x {
                        props.values_mut().for_each(|p| strip_nested(p, keys));
                    }
                } else {
                    strip_nested(x, keys);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| strip_nested(x, keys)),
        _ => {}
    }
}

fn replace_ref(v: &mut Value, reference: &str, description: &str) {
    match v {
        Value::Object(m) => {
            if m.get("$ref").and_then(Value::as_str) == Some(reference) {
                let mut o = Map::new();
                o.insert("type".into(), "object".into());
                o.insert("description".into(), description.into());
                *m = o;
                return;
            }
            m.values_mut()
                .for_each(|x| replace_ref(x, reference, description));
        }
        Value::Array(a) => a
            .iter_mut()
            .for_each(|x| replace_ref(x, reference, description)),
        _ => {}
    }
}

/// Remove the `$defs` entries nothing refers to any more.
fn prune_defs(s: &mut Value) {
    let Some(defs) = s.get("$defs").and_then(Value::as_object).cloned() else {
        return;
    };
    let mut reachable: Vec<String> = Vec::new();
    let mut frontier: Vec<Value> = vec![{
        let mut root = s.clone();
        if let Some(m) = root.as_object_mut() {
            m.remove("$defs");
        }
        root
    }];
    while let Some(v) = frontier.pop() {
        for r in refs(&v) {
            if let Some(name) = r.strip_prefix("#/$defs/") {
                if !reachable.iter().any(|n| n == name) {
                    reachable.push(name.to_string());
                    if let Some(d) = defs.get(name) {
                        frontier.push(d.clone());
                    }
                }
            }
        }
    }
    let kept: Map<String, Value> = defs
        .into_iter()
        .filter(|(k, _)| reachable.contains(k))
        .collect();
    if let Some(m) = s.as_object_mut() {
        if kept.is_empty() {
            m.remove("$defs");
        } else {
            m.insert("$defs".into(), Value::Object(kept));
        }
    }
}

fn refs(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                    out.push(r.to_string());
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(v, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn inputs_keep_every_property_and_only_what_is_reachable() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "In", "description": "The input.",
            "type": "object",
            "properties": {
                "target": {"description": "What to plan. Long story follows here.", "anyOf": [{"type": "string"}, {"$ref": "#/$defs/Target"}]},
                "options": {"$ref": "#/$defs/Options"},
                "description": {"type": "string", "description": "A property named description."},
                "lines": {"anyOf": [{"$ref": "#/$defs/Lines"}, {"type": "null"}]},
                "cwd": {"type": ["string", "null"]}
            },
            "$defs": {
                "Lines": {"type": "object"},
                "Target": {"type": "object", "properties": {"process": {"$ref": "#/$defs/Process"}}},
                "Process": {"type": "object", "description": "A process."},
                "Options": {"type": "object", "title": "Options", "description": "Knobs.", "properties": {"rate_hz": {"type": "number", "description": "Rate."}}, "additionalProperties": false}
            }
        });
        let lean = input(&schema, &[("Target", "as identify_target returned it")]);
        assert_eq!(
            lean,
            json!({
                "type": "object",
                "properties": {
                    "target": {"description": "What to plan.", "anyOf": [{"type": "string"}, {"type": "object", "description": "as identify_target returned it"}]},
                    "options": {"$ref": "#/$defs/Options"},
                    "description": {"type": "string", "description": "A property named description."},
                    "lines": {"$ref": "#/$defs/Lines"},
                    "cwd": {"type": "string"}
                },
                "$defs": {
                    "Lines": {"type": "object"},
                    "Options": {"type": "object", "properties": {"rate_hz": {"type": "number"}}}
                }
            })
        );
    }

    #[test]
    fn outputs_keep_their_structure_without_prose() {
        let schema = json!({
            "title": "Out", "description": "x", "type": "object",
            "properties": {"title": {"type": "string", "description": "a property named title"}},
            "required": ["title"],
            "$defs": {
                "A": {"type": "integer", "description": "y", "minimum": 0},
                "Kind": {"oneOf": [
                    {"type": "string", "enum": ["a", "b"]},
                    {"type": "string", "const": "c", "description": "The third."}
                ]}
            }
        });
        assert_eq!(
            output(&schema),
            json!({
                "type": "object",
                "properties": {"title": {"type": "string"}},
                "required": ["title"],
                "$defs": {
                    "A": {"type": "integer", "minimum": 0},
                    "Kind": {"type": "string", "enum": ["a", "b", "c"]}
                }
            })
        );
    }
}
