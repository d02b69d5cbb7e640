//! The stdio message loop as a client drives it: the input is what the client writes (lines
//! of anything), served by the real router and engine on a scratch root. libFuzzer reports a
//! panic, a hang (-timeout) or runaway memory (-rss_limit_mb).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use system_profile_engine::{Engine, EngineConfig};
use system_profile_mcp::{router, stdio};

struct World {
    runtime: tokio::runtime::Runtime,
    engine: Arc<Engine>,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("sp-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        World {
            runtime: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
            engine: Arc::new(Engine::new(EngineConfig {
                root,
                default_python: "python3".into(),
            })),
        }
    })
}

/// Tools that start programs or edit files: a mutated message must never reach them (the
/// fuzzer would otherwise run whatever argv it stumbles on). Everything else is fair game.
const NEVER: [&[u8]; 6] = [
    b"run_profiler",
    b"instrument_file",
    b"revert_changes",
    b"cancel_run",
    b"analyze_trace",
    b"detect_tools",
];

fuzz_target!(|data: &[u8]| {
    if NEVER
        .iter()
        .any(|n| data.windows(n.len()).any(|w| w == *n))
    {
        return;
    }
    let w = world();
    let module = router::build(w.engine.clone());
    let config = stdio::StdioConfig {
        max_line_bytes: 64 * 1024,
        eof_grace: Duration::from_millis(500),
    };
    let input = data.to_vec();
    let served = w.runtime.block_on(async move {
        tokio::time::timeout(
            Duration::from_secs(5),
            stdio::serve(
                module.into(),
                &input[..],
                tokio::io::sink(),
                config,
                std::future::pending(),
            ),
        )
        .await
    });
    assert!(served.is_ok(), "the loop did not end within 5 s of its input's end");
});
