//! What a transport tells the call it runs: where notifications for this request go. Handlers
//! registered in jsonrpsee's `RpcModule` do not see the request or its connection, so the
//! stdio transport sets this task-local around each call; a call with none (the WebSocket/HTTP
//! listener, `system-profile call`) simply sends no notifications.

use crate::protocol::RequestMeta;
use serde_json::{json, Value};
use system_profile_engine::Progress;
use tokio::sync::mpsc::UnboundedSender;

/// One outgoing protocol message, already serialised, with the share of the output budget it
/// holds until the writer has written it (answers hold one; notifications, small and paced by
/// the calls that send them, hold none).
pub struct Outgoing {
    pub text: String,
    pub held: Option<tokio::sync::OwnedSemaphorePermit>,
}

pub type Outbox = UnboundedSender<Outgoing>;

#[derive(Clone)]
pub struct CallCx {
    pub outbox: Outbox,
}

tokio::task_local! {
    static CALL: CallCx;
}

/// Run `fut` with `cx` as its call context.
pub async fn scope<F: std::future::Future>(cx: CallCx, fut: F) -> F::Output {
    CALL.scope(cx, fut).await
}

/// A `Progress` that sends `notifications/progress` with the request's token, when the request
/// asked for progress and the transport can deliver notifications.
pub fn progress_for(meta: &RequestMeta) -> Progress {
    let Some(token) = meta.progress_token.clone() else {
        return Progress::none();
    };
    let Ok(outbox) = CALL.try_with(|cx| cx.outbox.clone()) else {
        return Progress::none();
    };
    Progress::to(move |update| {
        let mut params = json!({
            "progressToken": token,
            "progress": update.progress,
            "message": update.message,
        });
        if let (Some(total), Value::Object(p)) = (update.total, &mut params) {
            p.insert("total".into(), json!(total));
        }
        let note = json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": params,
        });
        // A closed outbox means the client is gone; the call ends with the session anyway.
        let _ = outbox.send(Outgoing {
            text: note.to_string(),
            held: None,
        });
    })
}
