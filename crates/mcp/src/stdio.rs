//! The stdio transport: one JSON-RPC message per line in, one per line out.
//!
//! jsonrpsee's `raw_json_request` routes the methods but takes only single requests with
//! string or non-negative integer ids, refuses notifications and batches, and never shows the
//! id to handlers. So this loop does the JSON-RPC envelope itself: it answers -32700 and
//! -32600, handles notifications (`notifications/cancelled`) and batches, gives every request
//! an internal string id and restores the client's exact id in the answer (strings, negative
//! and fractional numbers, kept verbatim through serde_json's `arbitrary_precision`), and runs
//! each request as its own task so a slow call never blocks `ping`, and a cancelled call is
//! aborted (which drops its futures and so kills its child process groups).

use crate::cx::{self, CallCx};
use crate::protocol::{INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR};
use jsonrpsee::Methods;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::{AbortHandle, JoinHandle, JoinSet};

/// How the stdio loop behaves.
#[derive(Debug, Clone)]
pub struct StdioConfig {
    /// A line longer than this is answered with -32600 and skipped, not buffered.
    pub max_line_bytes: usize,
    /// After stdin closes, how long in-flight calls may run on before they are aborted.
    pub eof_grace: Duration,
    /// The most requests one batch may hold; a larger batch is refused whole, nothing run.
    pub max_batch_len: usize,
    /// The most bytes one answer (or one batch's answer) may take; past it the answer is an
    /// error that says so, with the id.
    pub max_answer_bytes: usize,
    /// Lines being handled at once; past it the server stops reading until one is answered.
    pub max_in_flight: usize,
    /// Answer bytes waiting for a client that does not read; past it answers wait to be
    /// queued (and so, through `max_in_flight`, the server stops reading).
    pub max_queued_bytes: usize,
}

impl Default for StdioConfig {
    fn default() -> Self {
        StdioConfig {
            max_line_bytes: 16 * 1024 * 1024,
            eof_grace: Duration::from_secs(30),
            max_batch_len: 64,
            max_answer_bytes: 32 << 20,
            max_in_flight: 64,
            max_queued_bytes: 64 << 20,
        }
    }
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdioEnd {
    /// stdin closed; in-flight calls finished (or ran out of grace).
    Eof,
    /// The shutdown future fired (SIGTERM, SIGINT); in-flight calls were aborted.
    Shutdown,
    /// stdout closed: nobody is listening any more.
    OutputClosed,
}

/// One line of input: a message or a batch of them, each still as its text.
enum Line<'a> {
    Single(&'a RawValue),
    Batch(Vec<&'a RawValue>),
}

/// Requests in flight, by the client's id as JSON text, so `notifications/cancelled` can abort
/// them; each with the internal sequence number of its request, so a finished call removes its
/// own entry and never that of a later request that reused its id.
type InFlight = Arc<Mutex<HashMap<String, (u64, AbortHandle)>>>;

struct Dispatcher {
    methods: Methods,
    outbox: cx::Outbox,
    in_flight: InFlight,
    next_id: AtomicU64,
    limits: Limits,
    /// KiB of answers queued and not yet written, out of `queued_kib_capacity`.
    queued_kib: Arc<Semaphore>,
    queued_kib_capacity: usize,
}

/// What one line may cost (from `StdioConfig`).
#[derive(Debug, Clone, Copy)]
struct Limits {
    max_batch_len: usize,
    max_answer_bytes: usize,
}

/// One answer: the client's id exactly as it was written, and `result` or `error`. The result
/// stays the text the router wrote: only the id is swapped, never the whole answer re-encoded.
#[derive(Debug, Serialize)]
struct Answer {
    jsonrpc: &'static str,
    id: Box<RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
}

/// The router's answer to an internal request, taken apart.
#[derive(Deserialize)]
struct RouterAnswer {
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<Value>,
}

fn null_id() -> Box<RawValue> {
    RawValue::from_string("null".into()).expect("null is JSON")
}

fn error_response(id: Box<RawValue>, code: i32, message: impl Into<String>) -> Answer {
    Answer {
        jsonrpc: "2.0",
        id,
        result: None,
        error: Some(json!({ "code": code, "message": message.into() })),
    }
}

/// The `id` of a message as written, for echoing it byte for byte.
#[derive(Deserialize)]
struct RawId {
    #[serde(default)]
    id: Option<Box<RawValue>>,
}

/// What one message of a line is, once its envelope is checked.
enum Message {
    Request {
        id: Value,
        raw_id: Box<RawValue>,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A response to a request of ours (we send none), or something to drop silently.
    Ignored,
    /// Not a valid request: answer this error (with the id when it could be read).
    Invalid(Answer),
}

/// The `id` of a message that may not be valid as a whole (a lone surrogate in its params,
/// a duplicate `id` key, bytes that were not UTF-8): answering with it ends the client's wait.
fn readable_id(text: &str) -> Option<Box<RawValue>> {
    let usable = |raw: &RawValue| {
        let t = raw.get();
        t.starts_with('"') || t.starts_with('-') || t.starts_with(|c: char| c.is_ascii_digit())
    };
    if let Ok(RawId { id: Some(id) }) = serde_json::from_str::<RawId>(text) {
        return usable(&id).then_some(id);
    }
    // A duplicate key fails the struct; a map keeps the last, as the router's parse does.
    let map: serde_json::Map<String, Value> = serde_json::from_str(text).ok()?;
    match map.get("id")? {
        v @ (Value::String(_) | Value::Number(_)) => serde_json::value::to_raw_value(v).ok(),
        _ => None,
    }
}

fn classify(raw: &RawValue) -> Message {
    let msg: Value = match serde_json::from_str(raw.get()) {
        Ok(v) => v,
        Err(e) => {
            let id = readable_id(raw.get()).unwrap_or_else(null_id);
            return Message::Invalid(error_response(id, PARSE_ERROR, e.to_string()));
        }
    };
    let Value::Object(mut obj) = msg else {
        return Message::Invalid(error_response(
            null_id(),
            INVALID_REQUEST,
            "invalid request: a JSON-RPC message must be an object",
        ));
    };
    // A usable id, or null when it is absent or of a type JSON-RPC does not allow.
    let id = match obj.get("id") {
        Some(v @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(v.clone()),
        Some(_) => {
            return Message::Invalid(error_response(
                null_id(),
                INVALID_REQUEST,
                "invalid request: `id` must be a string, a number or null",
            ))
        }
        None => None,
    };
    let raw_id = match &id {
        Some(Value::Null) | None => null_id(),
        Some(v) => serde_json::from_str::<RawId>(raw.get())
            .ok()
            .and_then(|r| r.id)
            // A duplicate `id` key: the value the request runs under, re-encoded.
            .or_else(|| serde_json::value::to_raw_value(v).ok())
            .unwrap_or_else(null_id),
    };
    if obj.get("jsonrpc") != Some(&json!("2.0")) {
        return Message::Invalid(error_response(
            raw_id,
            INVALID_REQUEST,
            "invalid request: `jsonrpc` must be \"2.0\"",
        ));
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        Some(_) => {
            return Message::Invalid(error_response(
                raw_id,
                INVALID_REQUEST,
                "invalid request: `method` must be a string",
            ))
        }
        None if obj.contains_key("result") || obj.contains_key("error") => return Message::Ignored,
        None => {
            return Message::Invalid(error_response(
                raw_id,
                INVALID_REQUEST,
                "invalid request: missing `method`",
            ))
        }
    };
    let params = match obj.remove("params") {
        None => None,
        Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p),
        Some(_) => {
            return Message::Invalid(error_response(
                raw_id,
                INVALID_REQUEST,
                "invalid request: `params` must be an object or an array",
            ))
        }
    };
    match id {
        Some(id) => Message::Request {
            id,
            raw_id,
            method,
            params,
        },
        None => Message::Notification { method, params },
    }
}

/// jsonrpsee's -32601 says only "Method not found"; name the method and what exists.
fn explain_unknown_method(error: &mut Value, method: &str) {
    let Value::Object(err) = error else {
        return;
    };
    if err.get("code") == Some(&json!(METHOD_NOT_FOUND)) {
        err.insert(
            "message".into(),
            json!(format!(
                "unknown method `{method}`: MCP clients use initialize or server/discover, \
                 tools/list and tools/call; scripts may call a tool by its name (detect_tools)"
            )),
        );
    }
}

impl Dispatcher {
    fn new(methods: Methods, outbox: cx::Outbox, config: &StdioConfig) -> Self {
        let queued_kib_capacity = (config.max_queued_bytes / 1024).clamp(1, Semaphore::MAX_PERMITS);
        Dispatcher {
            methods,
            outbox,
            in_flight: Arc::new(Mutex::new(HashMap::new())),
            next_id: AtomicU64::new(1),
            limits: Limits {
                max_batch_len: config.max_batch_len,
                max_answer_bytes: config.max_answer_bytes,
            },
            queued_kib: Arc::new(Semaphore::new(queued_kib_capacity)),
            queued_kib_capacity,
        }
    }

    /// Handle one message; the returned task yields its answer (None for notifications).
    fn dispatch(self: &Arc<Self>, msg: &RawValue) -> Option<JoinHandle<Option<Answer>>> {
        match classify(msg) {
            Message::Invalid(answer) => Some(tokio::spawn(async move { Some(answer) })),
            Message::Ignored => None,
            Message::Notification { method, params } => {
                self.notification(&method, params.as_ref());
                None
            }
            Message::Request {
                id,
                raw_id,
                method,
                params,
            } => Some(self.request(&id, raw_id, method, params)),
        }
    }

    fn notification(&self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/cancelled" => {
                let Some(request_id) = params.and_then(|p| p.get("requestId")) else {
                    tracing::warn!("notifications/cancelled without requestId: ignored");
                    return;
                };
                let key = request_id.to_string();
                let handle = self.in_flight.lock().ok().and_then(|mut m| m.remove(&key));
                match handle {
                    Some((_, h)) => {
                        tracing::info!(request = %key, "cancelled by the client");
                        h.abort();
                    }
                    // Already answered, or never seen: the spec says to ignore it.
                    None => tracing::debug!(request = %key, "cancel for no call in flight"),
                }
            }
            "notifications/initialized" => tracing::debug!("client initialized"),
            other => tracing::debug!(method = other, "notification ignored"),
        }
    }

    fn request(
        self: &Arc<Self>,
        id: &Value,
        raw_id: Box<RawValue>,
        method: String,
        params: Option<Value>,
    ) -> JoinHandle<Option<Answer>> {
        // Keyed by the parsed id, as `notifications/cancelled` will name it.
        let key = id.to_string();
        let this = Arc::clone(self);
        let seq = self.next_id.fetch_add(1, Ordering::Relaxed);
        let internal = format!("sp-{seq}");
        let mut request = json!({ "jsonrpc": "2.0", "id": internal, "method": &method });
        if let Some(p) = params {
            request["params"] = p;
        }
        let key_done = key.clone();
        // Spawn and register under the lock: the task's own removal takes the same lock, so a
        // call that finishes at once cannot leave its entry behind.
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        let handle = tokio::spawn(async move {
            let cx = CallCx {
                outbox: this.outbox.clone(),
            };
            let answer =
                cx::scope(cx, this.methods.raw_json_request(&request.to_string(), 1)).await;
            if let Ok(mut m) = this.in_flight.lock() {
                if m.get(&key_done).is_some_and(|(s, _)| *s == seq) {
                    m.remove(&key_done);
                }
            }
            let parsed = answer.map_err(|e| e.to_string()).and_then(|(raw, _)| {
                serde_json::from_str::<RouterAnswer>(raw.get()).map_err(|e| e.to_string())
            });
            let RouterAnswer { result, mut error } = match parsed {
                Ok(a) => a,
                Err(e) => return Some(error_response(raw_id, INTERNAL_ERROR, e)),
            };
            if let Some(error) = &mut error {
                explain_unknown_method(error, &method);
            }
            // `"result": null` reads back as None; an answer must still carry one of the two.
            let result = match (&error, result) {
                (None, None) => Some(RawValue::from_string("null".into()).expect("null is JSON")),
                (_, result) => result,
            };
            Some(Answer {
                jsonrpc: "2.0",
                id: raw_id,
                result,
                error,
            })
        });
        // A client reusing the id of a call still running can cancel only the later one by
        // that id; both still get their answers.
        in_flight.insert(key, (seq, handle.abort_handle()));
        drop(in_flight);
        handle
    }

    /// Queue one answer (or a batch's), once the output budget has room for it: a client
    /// that stops reading stops the server from piling answers up.
    async fn send<T: Serialize>(&self, answer: &T) {
        let text = match serde_json::to_string(answer) {
            Ok(text) => text,
            Err(e) => {
                tracing::error!("cannot encode an answer: {e}");
                return;
            }
        };
        self.queue(text).await;
    }

    async fn queue(&self, text: String) {
        let total = self.queued_kib_capacity;
        let kib = (text.len() / 1024 + 1).min(total) as u32;
        let held = Arc::clone(&self.queued_kib)
            .acquire_many_owned(kib)
            .await
            .ok();
        let _ = self.outbox.send(cx::Outgoing { text, held });
    }

    /// An answer over the size limit becomes an error with its id that says how to page.
    fn bounded(&self, answer: Answer) -> Answer {
        let size = answer.result.as_ref().map_or(0, |r| r.get().len())
            + answer.error.as_ref().map_or(0, |e| e.to_string().len());
        if size <= self.limits.max_answer_bytes {
            return answer;
        }
        error_response(
            answer.id,
            INTERNAL_ERROR,
            format!(
                "the answer is {size} bytes, over the limit of {} bytes for one answer; ask \
                 for less (list_runs and resources/list page with `cursor`, get_run names one \
                 run, summarize writes its report to a file)",
                self.limits.max_answer_bytes
            ),
        )
    }

    /// Handle one line of input. `slot` is the line's share of `max_in_flight`, held until
    /// its answer is queued.
    async fn line(
        self: &Arc<Self>,
        line: &[u8],
        tasks: &mut JoinSet<()>,
        slot: OwnedSemaphorePermit,
    ) {
        let text = match std::str::from_utf8(line) {
            Ok(t) => t.trim(),
            Err(_) => {
                // The id, when the line's envelope can still be read, so the client's wait ends.
                let lossy = String::from_utf8_lossy(line);
                let id = readable_id(lossy.trim()).unwrap_or_else(null_id);
                self.send(&error_response(
                    id,
                    PARSE_ERROR,
                    "parse error: the line is not UTF-8",
                ))
                .await;
                return;
            }
        };
        if text.is_empty() {
            return;
        }
        // Parse once for validity and shape, keeping every member's text for exact ids.
        let parsed = if text.starts_with('[') {
            serde_json::from_str::<Vec<&RawValue>>(text).map(Line::Batch)
        } else {
            serde_json::from_str::<&RawValue>(text).map(Line::Single)
        };
        let line = match parsed {
            Ok(l) => l,
            Err(e) => {
                let id = readable_id(text).unwrap_or_else(null_id);
                self.send(&error_response(
                    id,
                    PARSE_ERROR,
                    format!("parse error: {e}"),
                ))
                .await;
                return;
            }
        };
        match line {
            Line::Batch(batch) if batch.is_empty() => {
                self.send(&error_response(
                    null_id(),
                    INVALID_REQUEST,
                    "invalid request: an empty batch",
                ))
                .await
            }
            Line::Batch(batch) if batch.len() > self.limits.max_batch_len => {
                self.send(&error_response(
                    null_id(),
                    INVALID_REQUEST,
                    format!(
                        "invalid request: a batch of {} messages is over the limit of {}; \
                         nothing in it was run: send them in batches of at most {}",
                        batch.len(),
                        self.limits.max_batch_len,
                        self.limits.max_batch_len
                    ),
                ))
                .await
            }
            Line::Batch(batch) => {
                let handles: Vec<_> = batch.into_iter().filter_map(|m| self.dispatch(m)).collect();
                let this = Arc::clone(self);
                tasks.spawn(async move {
                    let mut answers = Vec::new();
                    let mut bytes = 0usize;
                    for h in handles {
                        // A cancelled member is left out of the batch's answer.
                        if let Ok(Some(a)) = h.await {
                            let mut a = this.bounded(a);
                            let size = a.result.as_ref().map_or(0, |r| r.get().len());
                            // The batch's answer as a whole keeps to the limit too: members
                            // past it are errors with their ids.
                            if bytes + size > this.limits.max_answer_bytes {
                                a = error_response(
                                    a.id,
                                    INTERNAL_ERROR,
                                    format!(
                                        "left out: the batch's answer passed {} bytes; send \
                                         fewer requests per batch",
                                        this.limits.max_answer_bytes
                                    ),
                                );
                            } else {
                                bytes += size;
                            }
                            answers.push(a);
                        }
                    }
                    // A batch of notifications only is not answered at all.
                    if !answers.is_empty() {
                        this.send(&answers).await;
                    }
                    drop(slot);
                });
            }
            Line::Single(single) => {
                if let Some(h) = self.dispatch(single) {
                    let this = Arc::clone(self);
                    tasks.spawn(async move {
                        if let Ok(Some(a)) = h.await {
                            this.send(&this.bounded(a)).await;
                        }
                        drop(slot);
                    });
                }
            }
        }
    }

    fn abort_all(&self) {
        if let Ok(mut m) = self.in_flight.lock() {
            for (_, (_, h)) in m.drain() {
                h.abort();
            }
        }
    }
}

/// Read one line of at most `max` bytes (the newline excluded). `Ok(None)` at EOF;
/// `Ok(Some(Err(n)))` when the line was longer and `n` bytes of it were skipped.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<Result<(), usize>>> {
    buf.clear();
    let mut skipped = 0usize;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(match (buf.is_empty(), skipped) {
                (true, 0) => None,
                (_, 0) => Some(Ok(())),
                (_, n) => Some(Err(n)),
            });
        }
        let (part, found) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if skipped == 0 && buf.len() + part.len() <= max {
            buf.extend_from_slice(part);
        } else {
            skipped += buf.len() + part.len();
            buf.clear();
        }
        let consumed = found.unwrap_or(chunk.len());
        reader.consume(consumed);
        if found.is_some() {
            return Ok(Some(if skipped == 0 { Ok(()) } else { Err(skipped) }));
        }
    }
}

/// Serve `methods` over a line-delimited reader and writer until EOF, `shutdown`, or the
/// writer closes.
pub async fn serve<R, W>(
    methods: Methods,
    input: R,
    mut output: W,
    config: StdioConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<StdioEnd>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (outbox, mut outgoing) = mpsc::unbounded_channel::<cx::Outgoing>();
    let writer = tokio::spawn(async move {
        while let Some(out) = outgoing.recv().await {
            let mut bytes = out.text.into_bytes();
            bytes.push(b'\n');
            if output.write_all(&bytes).await.is_err() || output.flush().await.is_err() {
                return false;
            }
            // Written: its share of the output budget is free again.
            drop(out.held);
        }
        true
    });
    let dispatcher = Arc::new(Dispatcher::new(methods, outbox, &config));
    let slots = Arc::new(Semaphore::new(config.max_in_flight.max(1)));
    let mut tasks = JoinSet::new();
    let mut reader = BufReader::new(input);
    let mut buf = Vec::new();
    tokio::pin!(shutdown);

    let end = loop {
        // Only shutdown may interrupt a read: `read_line` is not cancel-safe (a line half read
        // would be lost), and on shutdown nothing more is read anyway.
        tokio::select! {
            () = &mut shutdown => break StdioEnd::Shutdown,
            read = read_line(&mut reader, &mut buf, config.max_line_bytes) => match read {
                Ok(None) => break StdioEnd::Eof,
                Ok(Some(Ok(()))) => {
                    // At most `max_in_flight` lines are being handled; past it, reading waits.
                    let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                        break StdioEnd::Eof;
                    };
                    dispatcher.line(&buf, &mut tasks, slot).await;
                }
                Ok(Some(Err(skipped))) => dispatcher.send(&error_response(
                    null_id(),
                    INVALID_REQUEST,
                    format!(
                        "invalid request: a line of {skipped} bytes is over the limit of {} bytes",
                        config.max_line_bytes
                    ),
                )).await,
                Err(e) => {
                    tracing::warn!("reading stdin failed: {e}");
                    break StdioEnd::Eof;
                }
            },
        }
        // Reap finished answer tasks so the set does not grow without bound.
        while tasks.try_join_next().is_some() {}
        if writer.is_finished() {
            break StdioEnd::OutputClosed;
        }
    };

    match end {
        StdioEnd::Eof => {
            let drain = async { while tasks.join_next().await.is_some() {} };
            tokio::select! {
                () = drain => {}
                () = tokio::time::sleep(config.eof_grace) => {
                    tracing::warn!("stdin closed; aborting calls still running after {:?}", config.eof_grace);
                }
                () = &mut shutdown => {}
            }
        }
        StdioEnd::Shutdown | StdioEnd::OutputClosed => {}
    }
    dispatcher.abort_all();
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    // Dropping the last sender lets the writer flush what is queued and stop.
    drop(dispatcher);
    // Aborted calls drop their copies of the outbox as the runtime reaps them; do not wait long.
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn finished_calls_leave_no_entry_to_cancel() {
        let mut module = jsonrpsee::RpcModule::new(());
        module
            .register_method("ping", |_, _, _| serde_json::json!({}))
            .unwrap();
        let (outbox, mut answers) = mpsc::unbounded_channel();
        let dispatcher = Arc::new(Dispatcher::new(
            module.into(),
            outbox,
            &StdioConfig::default(),
        ));
        let mut tasks = JoinSet::new();
        let slots = Arc::new(Semaphore::new(1000));
        for i in 0..500 {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{},"method":"ping"}}"#, i % 7);
            let slot = Arc::clone(&slots).acquire_owned().await.unwrap();
            dispatcher.line(line.as_bytes(), &mut tasks, slot).await;
        }
        while tasks.join_next().await.is_some() {}
        let mut n = 0;
        while answers.try_recv().is_ok() {
            n += 1;
        }
        assert_eq!(n, 500);
        assert!(dispatcher.in_flight.lock().unwrap().is_empty());
    }
}
