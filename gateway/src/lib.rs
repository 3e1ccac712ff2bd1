//! The model gateway: the only sysward process that holds the model API key and
//! has a route to `API_URL`.
//!
//! The binary (`src/main.rs`) parses its argv, confines itself and then hands the
//! broker channel to [`serve`]. Everything here runs unconfined in tests; the
//! binary never does.
//!
//! - [`args`]: strict argv parsing (`--uid U --gid G --port P`).
//! - [`forward`]: a validated [`forward::Gateway`] built from a
//!   [`sysward_ipc::gateway::GatewaySetup`] that turns a
//!   [`sysward_ipc::model::ModelRequest`] into one HTTP(S) exchange with the
//!   configured server and a [`sysward_ipc::model::ModelReply`].
//! - [`serve`]: the broker-facing protocol loop.
//! - [`secret`]: masking and scrubbing of the key in anything shown.

pub mod args;
pub mod forward;
pub mod retry_after;
pub mod secret;
pub mod serve;

pub use forward::{Gateway, SetupError};
pub use serve::{serve, ServeConfig, ServeError};
