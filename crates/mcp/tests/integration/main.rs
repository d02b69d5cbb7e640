//! One integration-test binary: the real `system-profile` spawned and driven over stdio,
//! HTTP and WebSocket, from the CLI, and by the official MCP clients.

mod cli;
mod clients;
mod cluster;
mod ledger;
mod listen;
mod pipeline;
mod reliability;
mod report;
mod security;
mod stdio;
mod steps;
mod surface;
mod truth;
mod util;
mod vllm;
