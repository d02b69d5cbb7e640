//! Artifacts as MCP resources: `resources/list` and `resources/read` over the files under
//! `<root>/profile_output/` (and nothing outside it), and the `resource_link` blocks a tool
//! result carries for the files it produced, so a client can open a flame graph, a trace or
//! the report without a shell.

use crate::protocol::{error, invalid_params};
use base64::Engine as _;
use jsonrpsee::types::ErrorObjectOwned;
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// MCP's code for a resource that does not exist (or that we will not serve).
pub const RESOURCE_NOT_FOUND: i32 = -32002;

/// `resources/read` refuses files larger than this: a JSON-RPC line of hundreds of MB would
/// stall the connection. The error names the file so the client can open it directly.
pub const READ_CAP_BYTES: u64 = 32 * 1024 * 1024;

/// Entries per `resources/list` page.
const PAGE: usize = 200;

/// Most links one tool result carries (a run has a handful of artifacts; a report a few
/// charts and flame graphs).
const MAX_LINKS: usize = 64;

/// Fields of a tool result that hold an artifact's path relative to the root.
const PATH_FIELDS: [&str; 5] = ["path", "markdown_path", "json_path", "stored", "log"];

/// What percent-encoding leaves alone in a path: unreserved characters and `/`.
const PATH_SET: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'[')
    .add(b']')
    .add(b'\\')
    .add(b'^')
    .add(b'|');

fn output_dir(root: &Path) -> PathBuf {
    root.join("profile_output")
}

/// `file://` URI of an absolute path.
pub fn file_uri(path: &Path) -> String {
    format!(
        "file://{}",
        utf8_percent_encode(&path.to_string_lossy(), PATH_SET)
    )
}

/// The MIME type clients need to show an artifact, from its name.
pub fn mime_type(path: &Path) -> &'static str {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let ends = |suffix: &str| name.ends_with(suffix);
    if ends(".svg") {
        "image/svg+xml"
    } else if ends(".md") {
        "text/markdown"
    } else if ends(".jsonl") {
        "application/jsonl"
    } else if ends(".json") {
        "application/json"
    } else if ends(".html") {
        "text/html"
    } else if ends(".csv") {
        "text/csv"
    } else if ends(".gz") {
        "application/gzip"
    } else if ends(".py") {
        "text/x-python"
    } else if ends(".bin") || ends(".nsys-rep") || ends(".sqlite") || ends(".data") {
        "application/octet-stream"
    } else {
        "text/plain"
    }
}

/// The file a URI names, if it is an existing regular file under `<root>/profile_output/`
/// once symlinks are resolved; else an error that says what is served.
fn served_file(root: &Path, uri: &str) -> Result<PathBuf, ErrorObjectOwned> {
    let Some(rest) = uri.strip_prefix("file://") else {
        return Err(invalid_params(format!(
            "`uri` {uri:?} is not a file:// URI; resources/list gives the URIs served"
        )));
    };
    let decoded = percent_decode_str(rest)
        .decode_utf8()
        .map_err(|_| invalid_params(format!("`uri` {uri:?} is not valid UTF-8 once decoded")))?;
    let not_served = |why: &str| {
        error(
            RESOURCE_NOT_FOUND,
            format!(
                "resource {uri} {why}: only files under {} are served; resources/list names them",
                output_dir(root).display()
            ),
            Some(json!({ "uri": uri })),
        )
    };
    let path = PathBuf::from(decoded.as_ref());
    if !path.is_absolute() {
        return Err(not_served("is not an absolute path"));
    }
    let real = path
        .canonicalize()
        .map_err(|_| not_served("does not exist"))?;
    // The output folder itself may be a symlink the user made; compare real paths.
    let base = output_dir(root)
        .canonicalize()
        .map_err(|_| not_served("does not exist (nothing has been profiled yet)"))?;
    if !real.starts_with(&base) {
        return Err(not_served("is outside the profile output"));
    }
    // Hidden names are ours (the listener's token, the ledger's backups), never artifacts.
    if real.strip_prefix(&base).is_ok_and(|rel| {
        rel.components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
    }) {
        return Err(not_served(
            "is not an artifact (a hidden file of the server's)",
        ));
    }
    if !real.is_file() {
        return Err(not_served("is not a regular file"));
    }
    // A hard link can make any file the user can read look like an artifact.
    if !single_link(&real) {
        return Err(not_served("has other hard links"));
    }
    Ok(real)
}

/// `resources/read`: the file as text when it is UTF-8, else base64.
pub fn read(root: &Path, uri: &str) -> Result<Value, ErrorObjectOwned> {
    let path = served_file(root, uri)?;
    let bytes_len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if bytes_len > READ_CAP_BYTES {
        return Err(error(
            RESOURCE_NOT_FOUND,
            format!(
                "resource {uri} is {bytes_len} bytes, over the {READ_CAP_BYTES}-byte cap of \
                 resources/read: open {} directly",
                path.display()
            ),
            Some(json!({ "uri": uri, "bytes": bytes_len })),
        ));
    }
    // Read beneath the output folder, not by name: a file swapped for a symlink since the
    // check above is refused rather than followed.
    let base = output_dir(root)
        .canonicalize()
        .unwrap_or_else(|_| output_dir(root));
    let rel = path.strip_prefix(&base).unwrap_or(&path).to_path_buf();
    let bytes = system_profile_confine::Confined::open(&base)
        .and_then(|fs| fs.read_capped(&rel, READ_CAP_BYTES).map(|(b, _)| b))
        .map_err(|e| {
            error(
                RESOURCE_NOT_FOUND,
                format!("resource {uri} could not be read: {e}"),
                Some(json!({ "uri": uri })),
            )
        })?;
    let mime = mime_type(&path);
    let content = match String::from_utf8(bytes) {
        Ok(text) => json!({ "uri": uri, "mimeType": mime, "text": text }),
        Err(e) => json!({
            "uri": uri,
            "mimeType": mime,
            "blob": base64::engine::general_purpose::STANDARD.encode(e.into_bytes()),
        }),
    };
    Ok(json!({ "contents": [content] }))
}

fn single_link(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.nlink() == 1)
}

/// Every artifact file under the output folder, sorted, without the ledger's `.backup/` of
/// the user's own sources.
fn artifacts(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![output_dir(root)];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            // file_type does not follow symlinks: a link out of the folder is never listed.
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() && single_link(&e.path()) => out.push(e.path()),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

fn entry(root: &Path, path: &Path, description: Option<&str>) -> Value {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let mut v = json!({
        "uri": file_uri(path),
        "name": rel.to_string_lossy(),
        "mimeType": mime_type(path),
    });
    if let Ok(m) = std::fs::metadata(path) {
        v["size"] = json!(m.len());
    }
    if let Some(d) = description {
        v["description"] = json!(d);
    }
    v
}

/// `resources/list`, a page at a time (`cursor` is the opaque string a page gave).
pub fn list(root: &Path, cursor: Option<&str>) -> Result<Value, ErrorObjectOwned> {
    let start = match cursor {
        None => 0,
        Some(c) => c.parse::<usize>().map_err(|_| {
            invalid_params(format!(
                "unknown `cursor` {c:?}: pass the nextCursor of the previous page"
            ))
        })?,
    };
    let all = artifacts(root);
    let page: Vec<Value> = all
        .iter()
        .skip(start)
        .take(PAGE)
        .map(|p| entry(root, p, None))
        .collect();
    let mut out = json!({ "resources": page });
    if start + PAGE < all.len() {
        out["nextCursor"] = json!((start + PAGE).to_string());
    }
    Ok(out)
}

/// `resource_link` blocks for the artifacts a tool result names (any `path`-like field whose
/// value is an existing file under the output folder), in the order they appear.
pub fn links(root: &Path, result: &Value) -> Vec<Value> {
    let Ok(base) = output_dir(root).canonicalize() else {
        return Vec::new();
    };
    let mut found: Vec<(PathBuf, String)> = Vec::new();
    collect(result, &mut found);
    let mut out: Vec<Value> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (rel, kind) in found {
        if out.len() == MAX_LINKS {
            break;
        }
        let Ok(real) = root.join(&rel).canonicalize() else {
            continue;
        };
        if !real.starts_with(&base) || !real.is_file() || !seen.insert(real.clone()) {
            continue;
        }
        let mut link = entry(root, &real, Some(&kind));
        link["type"] = json!("resource_link");
        out.push(link);
    }
    out
}

/// Walk a result for path fields, each described by its object's `kind` (an artifact's, a
/// chart's) or else the field's name.
fn collect(v: &Value, out: &mut Vec<(PathBuf, String)>) {
    match v {
        Value::Object(m) => {
            let kind = m.get("kind").and_then(Value::as_str);
            for (k, child) in m {
                if let (true, Some(s)) = (PATH_FIELDS.contains(&k.as_str()), child.as_str()) {
                    if !s.is_empty() && !Path::new(s).is_absolute() {
                        out.push((PathBuf::from(s), kind.unwrap_or(k).to_string()));
                    }
                } else {
                    collect(child, out);
                }
            }
        }
        Value::Array(items) => {
            for i in items {
                collect(i, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_with_odd_characters() {
        let p = Path::new("/tmp/a dir/100%#x/f.svg");
        let uri = file_uri(p);
        assert_eq!(uri, "file:///tmp/a%20dir/100%25%23x/f.svg");
        let back = percent_decode_str(uri.strip_prefix("file://").unwrap())
            .decode_utf8()
            .unwrap();
        assert_eq!(Path::new(back.as_ref()), p);
    }

    #[test]
    fn mime_types_by_name() {
        assert_eq!(mime_type(Path::new("a/flamegraph.svg")), "image/svg+xml");
        assert_eq!(mime_type(Path::new("report.md")), "text/markdown");
        assert_eq!(mime_type(Path::new("procfs.jsonl")), "application/jsonl");
        assert_eq!(mime_type(Path::new("t.json.gz")), "application/gzip");
        assert_eq!(mime_type(Path::new("time-v.txt")), "text/plain");
    }
}
