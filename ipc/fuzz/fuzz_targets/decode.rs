//! Every decoder of every channel direction on arbitrary bytes: errors only,
//! never a panic or an abort (bincode is bounded by each direction's limit).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sysward_ipc::agent::{AgentAnswer, AgentRequest};
use sysward_ipc::codec::decode;
use sysward_ipc::exec::{ExecReport, ExecSpec};
use sysward_ipc::gateway::{GatewayAnswer, GatewayRequest};
use sysward_ipc::operator::{OperatorAnswer, OperatorRequest};

fuzz_target!(|data: &[u8]| {
    let _ = decode::<AgentRequest>(data);
    let _ = decode::<AgentAnswer>(data);
    let _ = decode::<OperatorRequest>(data);
    let _ = decode::<OperatorAnswer>(data);
    let _ = decode::<GatewayRequest>(data);
    let _ = decode::<GatewayAnswer>(data);
    let _ = decode::<ExecSpec>(data);
    let _ = decode::<ExecReport>(data);
});
