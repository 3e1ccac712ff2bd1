//! An OpenAI-compatible HTTP/1.1 server on loopback that replays a scenario file and
//! records every request it receives. Used by sysward's end-to-end tests and its demo.
//!
//! ```no_run
//! use sysward_scripted_model::{Scenario, ScriptedServer};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let scenario = Scenario::from_str(r#"{"steps": [{"content": "hello\nTASK_STATUS: DONE"}]}"#)?;
//! let server = ScriptedServer::start(scenario)?;
//! println!("API_URL={}", server.base_url());
//! // … run the client …
//! for r in server.requests() {
//!     assert!(!r.contains("hunter2"));
//! }
//! server.shutdown();
//! # Ok(()) }
//! ```
//!
//! The scenario format is documented in `scripted-model/README.md`.

mod http;
mod scenario;
mod server;
mod shapes;

pub use scenario::{
    ApiKeyRule, Expect, Flavor, HttpReply, OneOrMany, RejectTools, Scenario, ScenarioError, Step,
    ToolCall, Usage,
};
pub use server::{message_text, Handle, RecordedRequest, ScriptedServer, ServerOptions};
