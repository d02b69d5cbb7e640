//! Bounds on inputs, stated once: in the schema (`#[schemars(range(...))]`), which the model
//! reads, and checked here against the value, so a caller that skips the schema (the CLI, a
//! plan's pipeline, a client that does not validate) is held to the same bounds.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// A number outside the bounds its schema states.
#[derive(Debug, Clone, PartialEq)]
pub struct OutOfRange {
    /// Its path in the input (`duration_s`, `options.rate_hz`).
    pub field: String,
    pub message: String,
}

/// Check every number in `value` against the `minimum`/`maximum` its type's schema gives it,
/// nested objects and options included.
pub fn check_ranges<T: JsonSchema + Serialize>(value: &T) -> Result<(), OutOfRange> {
    let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    let value = serde_json::to_value(value).unwrap_or_default();
    walk(&schema, &schema, &value, "")
}

fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix("#/$defs/")
            .and_then(|name| root.get("$defs")?.get(name))
            .unwrap_or(schema),
        None => schema,
    }
}

fn walk(root: &Value, schema: &Value, value: &Value, path: &str) -> Result<(), OutOfRange> {
    let schema = resolve(root, schema);
    if let Some(x) = value.as_f64() {
        let min = schema.get("minimum").and_then(Value::as_f64);
        let max = schema.get("maximum").and_then(Value::as_f64);
        let below = min.is_some_and(|m| x < m);
        let above = max.is_some_and(|m| x > m);
        if below || above || !x.is_finite() {
            let bounds = match (min, max) {
                (Some(a), Some(b)) => format!("between {a} and {b}"),
                (Some(a), None) => format!("of at least {a}"),
                (None, Some(b)) => format!("of at most {b}"),
                (None, None) => "that is finite".into(),
            };
            // The unit the field's name carries (`duration_s`, `output_cap_bytes`).
            let unit = match path.rsplit('_').next() {
                Some("s") => "seconds",
                Some("bytes") => "bytes",
                Some("hz") => "hertz",
                _ => "a value",
            };
            return Err(OutOfRange {
                field: path.to_string(),
                message: format!("{x} is out of range: give {unit} {bounds}"),
            });
        }
    }
    if let (Some(props), Some(fields)) = (
        schema.get("properties").and_then(Value::as_object),
        value.as_object(),
    ) {
        for (name, sub) in props {
            if let Some(v) = fields.get(name) {
                let at = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                walk(root, sub, v, &at)?;
            }
        }
    }
    if !value.is_null() {
        // `Option<Struct>` and untagged unions: each alternative that is not `null`.
        for key in ["anyOf", "oneOf", "allOf"] {
            for alt in schema
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if alt.get("type").and_then(Value::as_str) != Some("null") {
                    walk(root, alt, value, path)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{Method, RunProfilerInput, RunTarget};

    fn run_input() -> RunProfilerInput {
        RunProfilerInput {
            profiler: Method::PySpyRecord,
            target: RunTarget::Pid { pid: 1 },
            cwd: None,
            env: Default::default(),
            duration_s: Some(5.0),
            timeout_s: None,
            options: Default::default(),
            label: None,
            background: false,
        }
    }

    #[test]
    fn numbers_inside_their_bounds_pass_and_outside_name_their_field() {
        assert_eq!(check_ranges(&run_input()), Ok(()));
        let mut i = run_input();
        i.duration_s = Some(0.0);
        let e = check_ranges(&i).unwrap_err();
        assert_eq!(e.field, "duration_s");
        assert!(e.message.contains("between 0.1 and 86400"), "{}", e.message);
        let mut i = run_input();
        i.options.rate_hz = Some(50_000.0);
        let e = check_ranges(&i).unwrap_err();
        assert_eq!(e.field, "options.rate_hz");
        let mut i = run_input();
        i.options.traceback_depth = Some(0);
        assert_eq!(
            check_ranges(&i).unwrap_err().field,
            "options.traceback_depth"
        );
    }
}
