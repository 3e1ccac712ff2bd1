//! A fake broker on the other end of a real SEQPACKET pair, played by a thread.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use sysward_ipc::agent::*;
use sysward_ipc::model::{ModelEndpoint, ModelReply, ModelRequest};
use sysward_ipc::Channel;

pub type ModelFn = Box<dyn FnMut(&ModelRequest, &Value) -> ModelReply + Send>;
pub type ToolFn = Box<dyn FnMut(&ToolRequest) -> AgentAnswer + Send>;
/// Called for every request with its index; Some(answer) overrides.
pub type HookFn = Box<dyn FnMut(usize, &AgentRequest) -> Option<AgentAnswer> + Send>;

pub struct Fake {
    pub setup: SessionSetup,
    pub model: ModelFn,
    pub tool: ToolFn,
    pub inputs: VecDeque<OperatorInput>,
    pub state: HashMap<&'static str, Vec<u8>>,
    pub hook: Option<HookFn>,
}

#[derive(Debug, Default, Clone)]
pub struct Record {
    pub requests: Vec<AgentRequest>,
    /// JSON bodies of chat requests (the tools probe apart).
    pub chats: Vec<Value>,
    /// JSON bodies of the agent's probes for a server that drops `tools`.
    pub probes: Vec<Value>,
    pub state: HashMap<&'static str, Vec<u8>>,
    /// The agent process's peak resident memory (VmHWM, KiB), read at Shutdown.
    pub agent_peak_kib: Option<u64>,
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

impl Record {
    pub fn events(&self) -> Vec<AgentEvent> {
        self.requests
            .iter()
            .filter_map(|r| match r {
                AgentRequest::Event(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }
    pub fn warnings(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                AgentEvent::Warning(w) => Some(w),
                _ => None,
            })
            .collect()
    }
    pub fn infos(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                AgentEvent::Info(w) => Some(w),
                _ => None,
            })
            .collect()
    }
    pub fn tools(&self) -> Vec<ToolRequest> {
        self.requests
            .iter()
            .filter_map(|r| match r {
                AgentRequest::Tool(t) => Some(t.clone()),
                _ => None,
            })
            .collect()
    }
    pub fn outcomes(&self) -> Vec<TaskOutcome> {
        self.requests
            .iter()
            .filter_map(|r| match r {
                AgentRequest::TaskFinished(t) => Some(t.clone()),
                _ => None,
            })
            .collect()
    }
    pub fn context(&self) -> Value {
        serde_json::from_slice(
            self.state
                .get("contexto.mem")
                .map(|v| v.as_slice())
                .unwrap_or(b"{}"),
        )
        .unwrap()
    }
    pub fn memory(&self) -> String {
        String::from_utf8(self.state.get("memoria.md").cloned().unwrap_or_default()).unwrap()
    }
    pub fn kinds(&self) -> Vec<&'static str> {
        self.requests
            .iter()
            .map(|r| match r {
                AgentRequest::Hello { .. } => "Hello",
                AgentRequest::NextInput => "NextInput",
                AgentRequest::Model(_) => "Model",
                AgentRequest::Tool(_) => "Tool",
                AgentRequest::LoadState(_) => "LoadState",
                AgentRequest::SaveState { .. } => "SaveState",
                AgentRequest::Event(_) => "Event",
                AgentRequest::TaskFinished(_) => "TaskFinished",
                AgentRequest::Shutdown { .. } => "Shutdown",
            })
            .collect()
    }
    /// Everything the model server was sent, as one string.
    pub fn sent_to_model(&self) -> String {
        self.chats
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

pub fn setup(mode: SessionMode, tasks: Vec<TaskSpec>) -> SessionSetup {
    SessionSetup {
        session_id: "s1".into(),
        mode,
        instructions: "# Agent\nYou administer web01.\n".into(),
        policy_text: "EXECUTION_MODE=guarded".into(),
        execution_mode: "guarded".into(),
        max_steps: 40,
        dry_run: false,
        hostname: "web01".into(),
        project_display: "/srv/admin".into(),
        model: ModelSettings {
            model: "qwen3".into(),
            context_size: Some(32768),
            request_timeout_secs: 300,
            tool_calling: ToolCalling::Auto,
            max_reply_tokens: None,
            tool_schema: ToolSchema::Auto,
            api_display: "http://127.0.0.1:8080/v1".into(),
        },
        tasks,
        warnings: vec![],
        skills: vec![],
        // As the default policy (every ALLOW_* flag off) has it.
        withheld_tools: sysward_ipc::tools::withheld(|_| false),
        unapproved_tools: Vec::new(),
        tools_dir: "tools".into(),
    }
}

/// A task text that says no action is needed: its DONE is believed without a
/// successful action (tests of plumbing, not of evidence).
pub const NO_ACTION: &str = "Answer from memory; no action is needed.";

pub fn task(name: &str, content: &str) -> TaskSpec {
    TaskSpec {
        name: name.into(),
        content: content.into(),
        sha256: format!("sha-{}", content.len()),
    }
}

pub fn http(status: u16, body: Value) -> ModelReply {
    ModelReply::Http {
        status,
        retry_after: None,
        content_type: "application/json".into(),
        body: body.to_string().into_bytes(),
    }
}

pub fn text(content: &str) -> ModelReply {
    http(
        200,
        json!({"choices":[{"index":0,"message":{"role":"assistant","content":content},"finish_reason":"stop"}],
               "usage":{"prompt_tokens":1000,"completion_tokens":20}}),
    )
}

pub fn calls(list: &[(&str, &str, Value)]) -> ModelReply {
    let tc: Vec<Value> = list
        .iter()
        .map(|(id, name, args)| json!({"id":id,"type":"function","function":{"name":name,"arguments":args.to_string()}}))
        .collect();
    http(
        200,
        json!({"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":tc},"finish_reason":"tool_calls"}]}),
    )
}

pub fn ok(req: &ToolRequest, stdout: &str) -> AgentAnswer {
    AgentAnswer::Tool(ToolResult {
        stdout: stdout.into(),
        exit_code: Some(0),
        duration_ms: 5,
        ..ToolResult::refused(&req.call_id, ToolStatus::Ok, "")
    })
}

/// Whether `body` is the agent's check for a server that drops `tools`: the
/// same request without tools and with one token of reply.
pub fn is_tools_probe(body: &Value) -> bool {
    body.get("tools").is_none() && body["max_tokens"] == 1
}

/// The answer of a server that renders tools: the prompt without them is
/// 1,000 tokens shorter than the fixtures' `prompt_tokens`.
pub fn probe_answer() -> ModelReply {
    http(
        200,
        json!({"choices":[{"index":0,"message":{"role":"assistant","content":"."},"finish_reason":"length"}],
               "usage":{"prompt_tokens":0,"completion_tokens":1}}),
    )
}

/// A model that plays `script` in order (chat requests only; `models`/`/props`
/// get 404). The tools probe is answered as a server that renders tools
/// would, without using the script.
pub fn scripted(script: Vec<ModelReply>) -> ModelFn {
    let mut q: VecDeque<ModelReply> = script.into();
    Box::new(move |req, body| {
        if req.endpoint != ModelEndpoint::ChatCompletions {
            return http(404, json!({"error":"not found"}));
        }
        if is_tools_probe(body) {
            return probe_answer();
        }
        q.pop_front()
            .unwrap_or_else(|| http(500, json!({"error":{"message":"script exhausted"}})))
    })
}

impl Fake {
    pub fn new(setup: SessionSetup, model: ModelFn) -> Self {
        Fake {
            setup,
            model,
            tool: Box::new(|r| ok(r, "ok\n")),
            inputs: VecDeque::new(),
            state: HashMap::new(),
            hook: None,
        }
    }

    fn serve(self, chan: Channel, rec: Arc<Mutex<Record>>) {
        self.serve_pid(chan, rec, None)
    }

    fn serve_pid(mut self, mut chan: Channel, rec: Arc<Mutex<Record>>, pid: Option<u32>) {
        let mut i = 0;
        loop {
            let req: AgentRequest = match chan.recv() {
                Ok(r) => r,
                Err(_) => return,
            };
            let mut shutdown = false;
            if let AgentRequest::Model(m) = &req {
                if m.endpoint == ModelEndpoint::ChatCompletions {
                    let body: Value = serde_json::from_slice(&m.body).unwrap();
                    let mut r = rec.lock().unwrap();
                    if is_tools_probe(&body) {
                        r.probes.push(body);
                    } else {
                        r.chats.push(body);
                    }
                }
            }
            rec.lock().unwrap().requests.push(req.clone());
            let hooked = self.hook.as_mut().and_then(|h| h(i, &req));
            i += 1;
            let answer = match hooked {
                Some(a) => a,
                None => match &req {
                    AgentRequest::Hello { .. } => {
                        AgentAnswer::Welcome(Box::new(self.setup.clone()))
                    }
                    AgentRequest::NextInput => {
                        AgentAnswer::Input(self.inputs.pop_front().unwrap_or(OperatorInput::End))
                    }
                    AgentRequest::Model(m) => {
                        assert!(m.check().is_ok());
                        let body: Value = if m.body.is_empty() {
                            Value::Null
                        } else {
                            serde_json::from_slice(&m.body).unwrap()
                        };
                        AgentAnswer::Model((self.model)(m, &body))
                    }
                    AgentRequest::Tool(t) => (self.tool)(t),
                    AgentRequest::LoadState(f) => {
                        AgentAnswer::State(self.state.get(f.file_name()).cloned())
                    }
                    AgentRequest::SaveState { file, content } => {
                        self.state.insert(file.file_name(), content.clone());
                        rec.lock()
                            .unwrap()
                            .state
                            .insert(file.file_name(), content.clone());
                        AgentAnswer::Ack
                    }
                    AgentRequest::Event(_) | AgentRequest::TaskFinished(_) => AgentAnswer::Ack,
                    AgentRequest::Shutdown { .. } => {
                        shutdown = true;
                        if let Some(p) = pid {
                            rec.lock().unwrap().agent_peak_kib = vm_hwm_kib(p);
                        }
                        AgentAnswer::Ack
                    }
                },
            };
            if let AgentRequest::SaveState { file, content } = &req {
                rec.lock()
                    .unwrap()
                    .state
                    .insert(file.file_name(), content.clone());
            }
            if chan.send(&answer).is_err() || shutdown {
                return;
            }
        }
    }

    /// Runs the real `sysward-agent` binary (confined, as `uid`/`gid`) against
    /// this fake broker; returns its exit status and what the broker saw.
    pub fn run_process(self, uid: u32, gid: u32) -> (std::process::ExitStatus, Record) {
        use std::process::{Command, Stdio};
        let (a, b) = Channel::pair().unwrap();
        let _ = a.force_send_buffer(8 << 20);
        let _ = b.force_send_buffer(8 << 20);
        // The socket goes in as stdin; the shell moves it to fd 3 (no unsafe
        // pre_exec needed) and execs the agent with an empty environment.
        let child = Command::new("/bin/bash")
            .arg("-c")
            .arg("exec 3<&0 0</dev/null; exec \"$0\" --uid \"$1\" --gid \"$2\"")
            .arg(env!("CARGO_BIN_EXE_sysward-agent"))
            .arg(uid.to_string())
            .arg(gid.to_string())
            .env_clear()
            .stdin(Stdio::from(a.into_fd()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let rec = Arc::new(Mutex::new(Record::default()));
        let r2 = rec.clone();
        let pid = child.id();
        let h: JoinHandle<()> = std::thread::spawn(move || self.serve_pid(b, r2, Some(pid)));
        let out = child.wait_with_output().unwrap();
        h.join().unwrap();
        if !out.stderr.is_empty() {
            eprintln!("agent stderr: {}", String::from_utf8_lossy(&out.stderr));
        }
        let r = rec.lock().unwrap().clone();
        (out.status, r)
    }

    /// Runs the agent harness against this fake broker; returns what the broker saw.
    pub fn run(self) -> (sysward_agent::SessionEnd, Record) {
        self.run_with(sysward_agent::Options {
            sleep: Box::new(|_| {}),
            ..sysward_agent::Options::default()
        })
    }

    pub fn run_with(self, opts: sysward_agent::Options) -> (sysward_agent::SessionEnd, Record) {
        let (a, b) = Channel::pair().unwrap();
        let _ = a.force_send_buffer(8 << 20);
        let _ = b.force_send_buffer(8 << 20);
        let rec = Arc::new(Mutex::new(Record::default()));
        let r2 = rec.clone();
        let h: JoinHandle<()> = std::thread::spawn(move || self.serve(b, r2));
        let end = sysward_agent::run(a, opts);
        h.join().unwrap();
        let r = rec.lock().unwrap().clone();
        (end, r)
    }
}
