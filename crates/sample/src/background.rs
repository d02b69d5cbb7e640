//! A sampler's thread: started with a stop flag it polls, stopped (or dropped: a cancelled run)
//! by raising the flag, its result handed back by `stop`; and the pacing both samplers share.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(crate) struct Background<T> {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<T>>,
}

impl<T: Default + Send + 'static> Background<T> {
    /// Run `work` on a thread named `name`; it should return soon after the flag it gets is set.
    pub(crate) fn spawn(
        name: String,
        work: impl FnOnce(&AtomicBool) -> T + Send + 'static,
    ) -> std::io::Result<Background<T>> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name)
            .spawn(move || work(&flag))?;
        Ok(Background {
            stop,
            handle: Some(handle),
        })
    }

    /// Raise the flag and wait for the result (the default if the thread panicked).
    pub(crate) fn stop(mut self) -> T {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }

    /// Whether the thread has ended by itself.
    pub(crate) fn finished(&self) -> bool {
        self.handle.as_ref().is_none_or(|h| h.is_finished())
    }
}

impl<T> Drop for Background<T> {
    /// Dropped without `stop` (its run was cancelled): the thread ends too.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Sleep until the next tick, `interval` after the last one; a tick missed (a slow read) is
/// skipped rather than caught up in a burst.
pub(crate) fn pace(next: &mut Instant, interval: Duration) {
    *next += interval;
    let now = Instant::now();
    if *next > now {
        std::thread::sleep(*next - now);
    } else {
        *next = now;
    }
}
