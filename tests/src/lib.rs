//! Helpers for sysward's end-to-end tests: they run the real process tree as
//! root (broker, agent, gateway, executor) against the scripted OpenAI server.
//! Tests that need root say so loudly and skip when not root; CI runs as root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

pub mod daemon;
pub mod hardening;
pub mod http_fixture;
pub use sysward_hostbed as hosts;
pub mod packaged;
pub mod tmux;
pub use tmux::Tmux;

pub use sysward_scripted_model::{Handle, Scenario, ScriptedServer};

/// True when running as root. Otherwise prints a loud skip notice.
pub fn require_root(test: &str) -> bool {
    if nix_geteuid() == 0 {
        return true;
    }
    eprintln!("\n*** SKIPPED {test}: needs root (it runs the real broker, users and kernel confinement). CI runs it as root. ***\n");
    false
}

fn nix_geteuid() -> u32 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|v| v.parse().unwrap_or(1)))
        })
        .unwrap_or(1)
}

static ACCOUNTS: Once = Once::new();

/// Creates the `sysward` group and the agent and gateway users if missing.
pub fn ensure_accounts() {
    ACCOUNTS.call_once(|| {
        let run = |args: &[&str]| {
            let _ = Command::new(args[0])
                .args(&args[1..])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        };
        run(&["groupadd", "--system", "sysward"]);
        for user in ["sysward-agent", "sysward-model"] {
            run(&[
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                user,
            ]);
        }
    });
    for user in ["sysward-agent", "sysward-model"] {
        let ok = Command::new("id")
            .arg(user)
            .stdout(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "user {user} is missing and could not be created");
    }
}

/// The directory with the built binaries (target/debug or target/release).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let mut dir = exe.parent().unwrap().to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    for b in [
        "sysward",
        "sysward-broker",
        "sysward-agent",
        "sysward-exec",
        "sysward-gateway",
        "sysward-classify",
        "sysward-net",
    ] {
        assert!(
            dir.join(b).exists(),
            "{} is missing: run `cargo build --workspace --bins` before the tests (the CI command does)",
            dir.join(b).display()
        );
    }
    dir
}

pub fn sysward() -> PathBuf {
    bin_dir().join("sysward")
}

/// A project directory (0700) with init.conf, agent.md and task files.
pub struct TestProject {
    pub dir: PathBuf,
}

impl TestProject {
    pub fn new(name: &str) -> TestProject {
        let base = Path::new("/var/tmp/sysward-tests");
        fs::create_dir_all(base).unwrap();
        fs::set_permissions(base, fs::Permissions::from_mode(0o700)).unwrap();
        let dir = base.join(format!("{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        TestProject { dir }
    }

    pub fn write(&self, name: &str, content: &str) -> &Self {
        let p = self.dir.join(name);
        fs::write(&p, content).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        self
    }

    /// init.conf pointing at `server`, plus extra lines.
    pub fn init_conf(&self, server: &Handle, extra: &str) -> &Self {
        self.write(
            "init.conf",
            &format!("API_URL={}\nAPI_KEY=sk-test-0123456789abcdef\nMODEL=scripted\nREQUEST_TIMEOUT=20\n{extra}\n", server.base_url()),
        )
    }

    /// init.conf with a short REQUEST_TIMEOUT (seconds).
    pub fn init_conf_with_timeout(&self, server: &Handle, timeout: u32) -> &Self {
        self.write(
            "init.conf",
            &format!("API_URL={}\nAPI_KEY=sk-test-0123456789abcdef\nMODEL=scripted\nREQUEST_TIMEOUT={timeout}\n", server.base_url()),
        )
    }

    /// agent.md with the given policy block body.
    pub fn agent_md(&self, policy: &str) -> &Self {
        self.write(
            "agent.md",
            &format!("# Test agent\nYou administer a test host.\n\n```policy\n{policy}\n```\n"),
        )
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for TestProject {
    fn drop(&mut self) {
        if std::env::var_os("SYSWARD_KEEP_TEST_DIRS").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// What the model got back for its `i`-th scripted step (the last message
/// of the request that followed it).
pub fn result_of(server: &Handle, i: usize) -> String {
    server
        .chat_requests()
        .get(i + 1)
        .and_then(|c| c.messages().last().cloned())
        .map(|m| sysward_scripted_model::message_text(&m))
        .unwrap_or_else(|| format!("no result for step {i}"))
}

/// The first chat request's body as sent (JSON text): the prompt and the
/// tools the model was offered; empty when no request came.
pub fn first_chat_body(server: &Handle) -> String {
    server
        .chat_requests()
        .first()
        .and_then(|c| c.body.as_ref().map(|b| b.to_string()))
        .unwrap_or_default()
}

/// A scripted model step: one call of tool `name` with `args`.
pub fn tool_call(name: &str, args: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"tool_calls":[{"name":name,"arguments":args}]})
}

fn scripted(steps: Vec<serde_json::Value>) -> Handle {
    let mut script = steps;
    script.push(serde_json::json!({"content":"done\nTASK_STATUS: DONE"}));
    scenario(&serde_json::json!({ "steps": script }).to_string())
}

/// A `sysward run --root` of `project` whose model makes `steps`, then ends
/// DONE: the model server (what the model was sent), what the model got back
/// for each step, and the run's output.
pub struct ScriptedRun {
    pub server: Handle,
    pub results: Vec<String>,
    pub output: Output,
}

/// Runs `project` (with `policy` as its policy block and `task` as its one
/// task) through the real tree; panics, with the run's output, when a step
/// got no result.
pub fn run_scripted(
    project: &TestProject,
    steps: Vec<serde_json::Value>,
    policy: &str,
    task: &str,
) -> ScriptedRun {
    run_scripted_with(project, steps, policy, task, 60, "")
}

/// [`run_scripted`] with init.conf's REQUEST_TIMEOUT and extra lines.
pub fn run_scripted_with(
    project: &TestProject,
    steps: Vec<serde_json::Value>,
    policy: &str,
    task: &str,
    request_timeout: u32,
    init_extra: &str,
) -> ScriptedRun {
    let n = steps.len();
    let server = scripted(steps);
    project
        .write(
            "init.conf",
            &format!(
                "API_URL={}\nAPI_KEY=sk-test-0123456789abcdef\nMODEL=scripted\nREQUEST_TIMEOUT={request_timeout}\n{init_extra}\n",
                server.base_url()
            ),
        )
        .agent_md(policy)
        .write("01-t.md", &format!("# T\n{task}\n"));
    let output = run_sysward(
        &["run", "--root", project.dir.to_str().unwrap(), "--json"],
        Duration::from_secs(240),
    );
    let results: Vec<String> = (0..n).map(|i| result_of(&server, i)).collect();
    if results.iter().any(|r| r.starts_with("no result")) {
        panic!("a step got no result:\n{}", describe(&output));
    }
    ScriptedRun {
        server,
        results,
        output,
    }
}

/// The same session in this process (the broker library, a recording
/// operator), for a test that runs it in namespaces of its own thread: `dir`
/// is made afresh (0700). Returns the model server and what the model got
/// back for each step.
pub fn run_scripted_in_process(
    dir: &Path,
    steps: Vec<serde_json::Value>,
    policy: &str,
    task: &str,
) -> (Handle, Vec<String>) {
    let n = steps.len();
    let server = scripted(steps);
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).unwrap();
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).unwrap();
    write_project(dir, &server, policy, task);
    let layout = sysward_broker::project::Layout::standalone(dir).unwrap();
    let ctx = sysward_broker::context::broker_context_with_binaries(layout, &bin_dir()).unwrap();
    let _ = run_tasks(&ctx, &Recorder::new());
    let results = (0..n).map(|i| result_of(&server, i)).collect();
    (server, results)
}

/// Writes a standalone project's init.conf (pointing at `server`), agent.md
/// (with `policy` as its policy block) and one task file, each 0600, in an
/// existing directory.
pub fn write_project(dir: &Path, server: &Handle, policy: &str, task: &str) {
    for (name, content) in [
        ("init.conf", format!("API_URL={}\nAPI_KEY=sk-test-0123456789abcdef\nMODEL=scripted\nREQUEST_TIMEOUT=30\n", server.base_url())),
        ("agent.md", format!("# T\n\n```policy\n{policy}\n```\n")),
        ("01-t.md", format!("# T\n{task}\n")),
    ] {
        fs::write(dir.join(name), content).unwrap();
        fs::set_permissions(dir.join(name), fs::Permissions::from_mode(0o600)).unwrap();
    }
}

/// Named checks that all run, each printed as it is made; the ones that
/// failed are reported together (with their details) when it is dropped.
#[derive(Default)]
pub struct Checks(Vec<String>);

impl Checks {
    pub fn check(&mut self, cond: bool, what: &str, detail: &str) {
        println!("  {} {what}", if cond { "ok  " } else { "FAIL" });
        if !cond {
            self.0.push(format!(
                "{what}: {}",
                detail.chars().take(1500).collect::<String>()
            ));
        }
    }
}

impl Drop for Checks {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            assert!(self.0.is_empty(), "{}", self.0.join("\n---\n"));
        }
    }
}

pub fn scenario(json: &str) -> Handle {
    ScriptedServer::start(Scenario::from_str(json).unwrap()).unwrap()
}

/// Starts `sysward args…` with no stdin and its output piped.
pub fn spawn_sysward(args: &[&str]) -> std::process::Child {
    Command::new(sysward())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs `sysward args…` to completion (killed after `timeout`).
pub fn run_sysward(args: &[&str], timeout: Duration) -> Output {
    wait_output(spawn_sysward(args), timeout)
}

/// Waits for `child` (killed after `timeout`) and returns its output. Its
/// stdout and stderr are read while it runs: a child that writes more than
/// a pipe holds (64 KiB, e.g. a whole `sysward run --json`) would otherwise
/// block on the write and never exit.
pub fn wait_output(child: std::process::Child, timeout: Duration) -> Output {
    let limited = hosts::wait_limited(child, timeout).unwrap();
    let output = limited.output;
    if limited.timed_out {
        panic!(
            "sysward did not finish within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    output
}

/// Parses `--json` output line by line (every line must be JSON).
pub fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

pub fn describe(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Reads the audit log of a project as JSON records.
pub fn audit_records(project: &TestProject) -> Vec<serde_json::Value> {
    fs::read_to_string(project.path("audit.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `tool` audit event whose request contains `needle`; panics, showing
/// the records, if there is none.
pub fn tool_event<'a>(records: &'a [serde_json::Value], needle: &str) -> &'a serde_json::Value {
    records
        .iter()
        .map(|r| &r["event"])
        .find(|e| e["event"] == "tool" && e["request"].as_str().unwrap_or("").contains(needle))
        .unwrap_or_else(|| panic!("no audit record of {needle:?}: {records:#?}"))
}

/// Children of `parent` whose command name is `name`.
pub fn children_named(parent: u32, name: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let field = |k: &str| {
            status
                .lines()
                .find(|l| l.starts_with(k))
                .map(|l| l[k.len()..].trim().to_string())
        };
        if field("Name:").as_deref() == Some(&name[..name.len().min(15)])
            && field("PPid:") == Some(parent.to_string())
        {
            found.push(pid);
        }
    }
    found
}

/// The root broker (`sysward-broker --standalone`) that a `sysward run|cli
/// --root` console (pid `console`) started: the process that holds the
/// session, its agent, gateway and actions.
pub fn standalone_broker(console: u32) -> u32 {
    wait_for(Duration::from_secs(15), "the standalone broker", || {
        children_named(console, "sysward-broker").pop()
    })
}

/// Kills the root broker of a `sysward run|cli --root` console with SIGKILL
/// (no chance to clean up), then waits for the console, which sees its
/// channel close, reaps the broker and exits. Returns once the broker's pid
/// is gone from /proc: the next broker judges a dead one by it (a zombie
/// still shows its start time, and would count as running).
pub fn kill9_standalone(console: &mut std::process::Child) {
    let broker = standalone_broker(console.id());
    // SAFETY: kill(2) with a pid this test started (through the console).
    unsafe {
        libc::kill(broker as i32, libc::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && matches!(console.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = console.kill();
    let _ = console.wait();
    wait_for(
        Duration::from_secs(10),
        "the killed broker to be reaped",
        || (!Path::new(&format!("/proc/{broker}")).exists()).then_some(()),
    );
}

/// A `/proc/<pid>/status` field.
pub fn status_field(pid: u32, key: &str) -> Option<String> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(key))
        .map(|l| l[key.len()..].trim().to_string())
}

/// Waits until `f` returns Some, or panics after `timeout`.
pub fn wait_for<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs the project's task files once in this process, through the real
/// broker tree, with `op` as the operator.
pub fn run_tasks(
    ctx: &sysward_broker::session::BrokerContext,
    op: &dyn sysward_broker::operator::Operator,
) -> sysward_ipc::operator::SessionSummary {
    sysward_broker::session::run_session(
        ctx,
        sysward_broker::session::SessionRequest {
            mode: sysward_ipc::agent::SessionMode::Tasks { rerun: false },
            dry_run: false,
            operator: "test".into(),
        },
        op,
    )
}

/// An operator for sessions run inside a test or bench process: records what
/// it is told, never answers (so asks become pending approvals).
pub struct Recorder {
    pub cancel: sysward_broker::cancel::CancelToken,
    pub events: std::sync::Mutex<Vec<sysward_ipc::agent::AgentEvent>>,
    /// Called when the broker has decided about a tool call (before it runs).
    pub on_decided: Option<Box<dyn Fn() + Send + Sync>>,
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            cancel: sysward_broker::cancel::CancelToken::new().unwrap(),
            events: std::sync::Mutex::new(Vec::new()),
            on_decided: None,
        }
    }

    /// A recorder that calls `f` after each decision.
    pub fn on_decided(f: impl Fn() + Send + Sync + 'static) -> Recorder {
        Recorder {
            on_decided: Some(Box::new(f)),
            ..Recorder::new()
        }
    }

    /// The text of the last Info event.
    pub fn last_info(&self) -> Option<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find_map(|e| match e {
                sysward_ipc::agent::AgentEvent::Info(t) => Some(t.clone()),
                _ => None,
            })
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl sysward_broker::operator::Operator for Recorder {
    fn session_started(&self, _: &str, _: &str) {}
    fn event(&self, e: &sysward_ipc::agent::AgentEvent) {
        self.events.lock().unwrap().push(e.clone());
    }
    fn next_input(&self) -> Option<String> {
        None
    }
    fn approve(
        &self,
        _: &sysward_ipc::operator::ApprovalPrompt,
    ) -> Option<(sysward_ipc::operator::ApprovalDecision, String)> {
        None
    }
    fn finished(&self, _: &sysward_ipc::operator::SessionSummary) {}
    fn cancel_token(&self) -> &sysward_broker::cancel::CancelToken {
        &self.cancel
    }
    fn decided(&self, _: &str, _: &str, _: &str, _: &str) {
        if let Some(f) = &self.on_decided {
            f();
        }
    }
}

/// The scripted model of the `ask_secret` tests: ask for `db` (printf, as an
/// argument), print it with printf, answer. `typed` must never reach the model.
pub fn ask_secret_scenario(typed: &str) -> Handle {
    scenario(&format!(
        r#"{{"never_contains":["{typed}"],"steps":[
          {{"tool_calls":[{{"name":"ask_secret","arguments":{{"name":"db","program":"printf","delivery":"arg","reason":"to show it"}}}}]}},
          {{"expect":{{"role_of_last":"tool"}},"tool_calls":[{{"name":"exec","arguments":{{"command":"printf","args":["got=%s\n","{{{{secret:db}}}}"]}}}}]}},
          {{"content":"Used it."}}
        ]}}"#
    ))
}

/// Plays the operator of an `ask_secret` dialogue on a `sysward cli` child whose
/// stdin is a pipe: one chat line, then (once the model asked) the secret.
pub fn answer_secret_dialogue(
    mut child: std::process::Child,
    server: &Handle,
    typed: &str,
) -> Output {
    use std::io::Write;
    {
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"use the db password\n").unwrap();
        server.wait_for_requests(1, Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(500));
        stdin.write_all(format!("{typed}\n").as_bytes()).unwrap();
        server.wait_for_requests(3, Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(500));
    }
    wait_output(child, Duration::from_secs(60))
}

/// Test accounts this test binary created, with how many tests hold each.
static TEST_USERS: std::sync::Mutex<std::collections::BTreeMap<String, (usize, bool)>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// A system account a test needs (no home, no login shell), created when
/// absent and removed again when the last test of this binary holding it
/// drops it — unless it existed before, when it is left as found.
pub struct TestUser {
    name: String,
}

impl TestUser {
    pub fn name(&self) -> &str {
        &self.name
    }
}

fn user_exists(name: &str) -> bool {
    Command::new("id")
        .args(["-u", name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn test_user(name: &str, groups: &[&str]) -> TestUser {
    let mut users = TEST_USERS.lock().unwrap_or_else(|p| p.into_inner());
    let entry = users.entry(name.to_string()).or_insert((0, false));
    if entry.0 == 0 && !user_exists(name) {
        let mut cmd = Command::new("useradd");
        cmd.args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
        ]);
        if !groups.is_empty() {
            cmd.args(["-G", &groups.join(",")]);
        }
        let ok = cmd
            .arg(name)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "useradd {name} failed");
        entry.1 = true;
    }
    entry.0 += 1;
    TestUser {
        name: name.to_string(),
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let mut users = TEST_USERS.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = users.get_mut(&self.name) else {
            return;
        };
        entry.0 = entry.0.saturating_sub(1);
        if entry.0 == 0 {
            if entry.1 {
                let _ = Command::new("userdel")
                    .arg(&self.name)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
            users.remove(&self.name);
        }
    }
}

/// Rewrites an audit log from `records` (their hashes recomputed), chaining
/// every record again and re-anchoring the head: what root can do to the
/// files without the sealing key or the journal.
pub fn rechain(log: &Path, head: &Path, records: Vec<serde_json::Value>) {
    use sha2::{Digest, Sha256};
    let mut prev = "0".repeat(64);
    let mut out = String::new();
    let mut seq = 0u64;
    for mut r in records {
        seq += 1;
        let obj = r.as_object_mut().unwrap();
        obj.remove("hash");
        obj.insert("seq".into(), serde_json::json!(seq));
        obj.insert("prev".into(), serde_json::json!(prev));
        let mut line = serde_json::to_vec(&r).unwrap();
        let hash = sysward_broker::project::hex(&Sha256::digest(&line));
        line.pop();
        line.extend_from_slice(format!(",\"hash\":\"{hash}\"}}\n").as_bytes());
        out.push_str(std::str::from_utf8(&line).unwrap());
        prev = hash;
    }
    fs::write(log, out).unwrap();
    fs::write(head, format!("{seq:020} {prev}\n")).unwrap();
}

/// Runs `f` on a thread of its own in a fresh network namespace with only
/// loopback up: the servers it starts, the model server and the
/// `sysward run` it forks (and so every executor) live there, apart from
/// the machine's own loopback. Needs root.
pub fn in_own_netns(f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        let ns = || std::fs::read_link("/proc/thread-self/ns/net").unwrap();
        let machine = ns();
        // SAFETY: integer argument only; it affects this thread alone.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
        let up = std::process::Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status()
            .unwrap();
        assert!(up.success(), "ip link set lo up failed");
        assert_ne!(ns(), machine, "not in a namespace of its own");
        f()
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
}
