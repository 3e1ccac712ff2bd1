//! The hardening pack (examples/hardening) in a throwaway host: its tasks
//! installed as the daemon's project, pre-approved for unattended runs, and
//! a scripted model replaying the pack's reference steps
//! (examples/hardening/reference/steps.json) with the facts a model reads
//! first (the SSH port, the listening services, the home directories).
//! Used by tests/tests/hardening_lynis.rs and, through it,
//! examples/hardening/measure.sh.
//!
//! The host gets its own network namespace: the pack loads a firewall and
//! sets network sysctls, which in a shared namespace would be this
//! machine's. The model server and an HTTP proxy for apt listen on the
//! host's own loopback (sockets made from inside its namespace); the proxy
//! forwards to the Debian archive from this machine's namespace.

use crate::hosts::Host;
use crate::Handle;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The pack's directory in this tree.
pub fn pack_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/hardening")
}

fn setns_net(ns: &File) -> bool {
    // SAFETY: a valid namespace descriptor; it affects the calling thread only.
    unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) == 0 }
}

/// Runs `f` on a thread that has entered the network namespace of `pid`.
pub fn in_netns_of<T: Send>(pid: u32, f: impl FnOnce() -> T + Send) -> T {
    let ns = File::open(format!("/proc/{pid}/ns/net")).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(setns_net(&ns), "setns: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .unwrap()
    })
}

/// The scripted model listening in a host's own network namespace; made and
/// shut down from inside it (its shutdown connects to its own address).
pub struct ModelIn {
    ns: File,
    server: Option<Handle>,
}

impl ModelIn {
    pub fn start(pid: u32, scenario_json: String) -> ModelIn {
        let ns = File::open(format!("/proc/{pid}/ns/net")).unwrap();
        let server = in_netns_of(pid, move || crate::scenario(&scenario_json));
        ModelIn {
            ns,
            server: Some(server),
        }
    }
}

impl std::ops::Deref for ModelIn {
    type Target = Handle;
    fn deref(&self) -> &Handle {
        self.server.as_ref().unwrap()
    }
}

impl Drop for ModelIn {
    fn drop(&mut self) {
        let server = self.server.take();
        let ns = &self.ns;
        std::thread::scope(|s| {
            s.spawn(move || {
                if setns_net(ns) {
                    drop(server);
                } else {
                    std::mem::forget(server);
                }
            });
        });
    }
}

/// A forward HTTP proxy (plain requests and CONNECT) whose listening socket
/// is on a host's loopback and whose upstream connections are made from this
/// machine's network namespace: apt in a host without a network of its own
/// reaches the archive through it.
pub struct AptProxy {
    pub port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AptProxy {
    pub fn start(pid: u32) -> AptProxy {
        let listener = in_netns_of(pid, || TcpListener::bind("127.0.0.1:0").unwrap());
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        // This thread (and those it spawns) stays in this machine's namespace.
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((c, _)) => {
                        std::thread::spawn(move || {
                            let _ = proxy_one(c);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        });
        AptProxy {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for AptProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn proxy_one(mut client: TcpStream) -> std::io::Result<()> {
    client.set_nonblocking(false)?;
    client.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 8192];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = client.read(&mut buf)?;
        if n == 0 || head.len() > 65536 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head[..head.iter().position(|&b| b == b'\r').unwrap_or(0)])
        .to_string();
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("");
    let target = parts.next().unwrap_or("");
    let (authority, connect) = if method == "CONNECT" {
        (target.to_string(), true)
    } else {
        let rest = target.strip_prefix("http://").unwrap_or(target);
        let host = rest.split('/').next().unwrap_or("");
        let host = if host.contains(':') {
            host.to_string()
        } else {
            format!("{host}:80")
        };
        (host, false)
    };
    let upstream = TcpStream::connect(&authority)?;
    upstream.set_read_timeout(Some(Duration::from_secs(120)))?;
    if connect {
        client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
        let end = head.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        (&upstream).write_all(&head[end..])?;
    } else {
        // Absolute-form request lines are valid HTTP/1.1 for any server.
        (&upstream).write_all(&head)?;
    }
    let (mut c2, mut u2) = (client.try_clone()?, upstream.try_clone()?);
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c2, &mut u2);
        let _ = u2.shutdown(Shutdown::Write);
    });
    let mut u3 = upstream;
    let _ = std::io::copy(&mut u3, &mut client);
    let _ = client.shutdown(Shutdown::Both);
    let _ = up.join();
    Ok(())
}

/// Points apt in the host at the proxy (the host's own configuration, as a
/// site with a proxy has it; not part of the pack).
pub fn use_proxy(host: &Host, proxy: &AptProxy) {
    host.write(
        "/etc/apt/apt.conf.d/01test-bed-proxy",
        format!(
            "// The test bed: this host has no network of its own.\nAcquire::http::Proxy \"http://127.0.0.1:{}\";\n",
            proxy.port
        ),
        0o644,
    );
}

/// Lynis's result: the hardening index and the test ids it suggested or
/// warned about.
#[derive(Debug, Clone, Default)]
pub struct Lynis {
    pub index: u32,
    pub suggestions: Vec<String>,
    pub warnings: Vec<String>,
    pub seconds: f64,
}

/// `TEST-ID: text (detail)` from a report line's `TEST-ID|text|detail|`.
fn finding(v: &str) -> String {
    let p: Vec<&str> = v.split('|').collect();
    let detail = p
        .get(2)
        .map(|d| d.trim())
        .filter(|d| !d.is_empty() && *d != "-");
    match detail {
        Some(d) => format!("{}: {} ({d})", p[0], p.get(1).unwrap_or(&"")),
        None => format!("{}: {}", p[0], p.get(1).unwrap_or(&"")),
    }
}

pub fn lynis(host: &Host) -> Lynis {
    let t = Instant::now();
    let out = host.run_timeout(
        &[
            "sh",
            "-c",
            "rm -f /var/log/lynis-report.dat; lynis audit system --quick --no-colors >/var/log/lynis-run.txt 2>&1; cat /var/log/lynis-report.dat",
        ],
        Duration::from_secs(600),
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut l = Lynis {
        seconds: t.elapsed().as_secs_f64(),
        ..Lynis::default()
    };
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("hardening_index=") {
            l.index = v.trim().parse().unwrap_or(0);
        } else if let Some(v) = line.strip_prefix("suggestion[]=") {
            l.suggestions.push(finding(v));
        } else if let Some(v) = line.strip_prefix("warning[]=") {
            l.warnings.push(finding(v));
        }
    }
    assert!(l.index > 0, "no hardening index in lynis's report: {text}");
    l
}

/// The reference steps of one task.
#[derive(Debug, Clone)]
pub struct RefTask {
    pub task: String,
    pub steps: Vec<serde_json::Value>,
    pub done: String,
    pub blocked: Option<String>,
}

pub fn reference() -> Vec<RefTask> {
    let path = pack_dir().join("reference/steps.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| RefTask {
            task: t["task"].as_str().unwrap().to_string(),
            steps: t["steps"].as_array().unwrap().clone(),
            done: t["done"].as_str().unwrap().to_string(),
            blocked: t["blocked"].as_str().map(str::to_string),
        })
        .collect()
}

/// The placeholders one repetition of a step binds (name, value).
pub type Binding = Vec<(String, String)>;

/// What a model reads on the host before it writes: the facts the reference
/// steps' placeholders stand for.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub scalars: Vec<(String, String)>,
    /// A step holding `{{NAME}}` is repeated for each item (each item binds
    /// one or more placeholders).
    pub lists: Vec<(String, Vec<Binding>)>,
}

fn listening(host: &Host, proto: &str, ssh_port: &str) -> Vec<String> {
    let out = host.sh_ok(&format!(
        "ss -Hl{proto}n | awk '$4 !~ /^(127\\.|\\[::1\\]|\\[::ffff:127\\.)/ {{n=split($4, a, \":\"); print a[n]}}' | sort -un"
    ));
    out.lines()
        .map(str::trim)
        .filter(|p| !p.is_empty() && *p != ssh_port)
        .map(str::to_string)
        .collect()
}

pub fn read_facts(host: &Host) -> Facts {
    let ssh_port = host
        .sh_ok("sshd -T 2>/dev/null | awk '$1 == \"port\" {print $2; exit}'")
        .trim()
        .to_string();
    let ssh_port = if ssh_port.is_empty() {
        "22".to_string()
    } else {
        ssh_port
    };
    let rule = |proto: &str, ports: &[String]| {
        if ports.is_empty() {
            String::new()
        } else {
            format!(
                "    {proto} dport {{ {} }} ct state new accept comment \"listening services\"\n",
                ports.join(", ")
            )
        }
    };
    let tcp = listening(host, "t", &ssh_port);
    let udp = listening(host, "u", &ssh_port);
    let list = |script: &str| -> Vec<String> {
        host.sh_ok(script)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    let homes = list("for h in /home/*; do [ -d \"$h\" ] && echo \"$h\"; done; true");
    let keys =
        list("for k in /etc/ssh/ssh_host_*_key; do [ -e \"$k\" ] && echo \"$k\"; done; true");
    // Every standard cron path, present or not: the packages the pack
    // installs before 45-permissions runs add some (a model reads them at
    // that point; the replay is made before the run). An absent one is a
    // harmless tool error.
    let cron: Vec<String> = [
        "/etc/crontab",
        "/etc/cron.d",
        "/etc/cron.daily",
        "/etc/cron.hourly",
        "/etc/cron.weekly",
        "/etc/cron.monthly",
        "/etc/cron.yearly",
    ]
    .map(String::from)
    .to_vec();
    let one = |name: &str, items: Vec<String>| {
        (
            name.to_string(),
            items
                .into_iter()
                .map(|i| vec![(name.to_string(), i)])
                .collect::<Vec<_>>(),
        )
    };
    let cron_items = cron
        .into_iter()
        .map(|p| {
            let mode = if p == "/etc/crontab" { "0600" } else { "0700" };
            vec![
                ("CRON".to_string(), p),
                ("CRON_MODE".to_string(), mode.to_string()),
            ]
        })
        .collect();
    Facts {
        scalars: vec![
            ("SSH_PORT".into(), ssh_port),
            ("TCP_RULE".into(), rule("tcp", &tcp)),
            ("UDP_RULE".into(), rule("udp", &udp)),
            ("TCP_PORTS".into(), tcp.join(",")),
            ("UDP_PORTS".into(), udp.join(",")),
        ],
        lists: vec![
            one("HOME", homes),
            one("HOSTKEY", keys),
            ("CRON".to_string(), cron_items),
        ],
    }
}

/// A JSON string's inside: `text` escaped for substitution into serialized
/// JSON.
fn json_inner(text: &str) -> String {
    let s = serde_json::to_string(text).unwrap();
    s[1..s.len() - 1].to_string()
}

fn substitute(step: &str, binds: &[(String, String)]) -> String {
    let mut s = step.to_string();
    for (k, v) in binds {
        s = s.replace(&format!("{{{{{k}}}}}"), &json_inner(v));
    }
    s
}

/// The reference steps of `tasks` (all when empty) with the facts filled in,
/// and the model's closing message for each task chosen by the RESULT line
/// its verification printed. `runs` sessions in a row.
pub fn scenario_json(facts: &Facts, tasks: &[&str], runs: usize) -> String {
    let mut steps = Vec::new();
    for _ in 0..runs {
        for t in reference() {
            if !tasks.is_empty() && !tasks.contains(&t.task.as_str()) {
                continue;
            }
            for step in &t.steps {
                let text = step.to_string();
                let mut expanded = vec![text.clone()];
                for (name, items) in &facts.lists {
                    if text.contains(&format!("{{{{{name}}}}}")) {
                        expanded = items.iter().map(|b| substitute(&text, b)).collect();
                    }
                }
                for e in expanded {
                    let e = substitute(&e, &facts.scalars);
                    steps.push(serde_json::from_str::<serde_json::Value>(&e).unwrap());
                }
            }
            let tool_said = |needle: &str| serde_json::json!({"role_of_last": "tool", "last_message_contains": needle});
            steps.push(serde_json::json!({"when": tool_said("RESULT: DONE"), "content": t.done}));
            let blocked = t.blocked.clone().unwrap_or_else(|| {
                "BLOCKED: the verification reports a measure that needs the operator (quoted above).\n\nTASK_STATUS: BLOCKED".to_string()
            });
            steps.push(
                serde_json::json!({"when": tool_said("RESULT: BLOCKED"), "content": blocked}),
            );
            steps.push(serde_json::json!({"when": {"role_of_last": "tool"}, "content": "FAILED: the verification reports a failed measure or did not run (quoted above).\n\nTASK_STATUS: FAILED"}));
        }
    }
    serde_json::json!({
        "description": "the hardening pack's reference steps",
        "context_size": 32768,
        "steps": steps,
        "exhausted": {"content": "Nothing more to do.\n\nTASK_STATUS: DONE"}
    })
    .to_string()
}

/// Installs the pack as the daemon's project (/etc/sysward), pointed at
/// `server`, running only `tasks` (all when empty), in the pack's order.
pub fn install_pack(host: &Host, server: &Handle, tasks: &[&str]) {
    let dir = pack_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".md") && n.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    names.sort();
    let mut agent = std::fs::read_to_string(dir.join("agent.md")).unwrap();
    if !tasks.is_empty() {
        let line = agent
            .lines()
            .find(|l| l.starts_with("TASK_ORDER="))
            .unwrap()
            .to_string();
        agent = agent.replace(&line, &format!("TASK_ORDER={}", tasks.join(",")));
        names.retain(|n| tasks.contains(&n.as_str()));
    }
    host.write("/etc/sysward/agent.md", agent, 0o600);
    for n in &names {
        host.copy_in(&dir.join(n), &format!("/etc/sysward/{n}"), 0o600);
    }
    host.sh_ok(&format!(
        "sed -i 's#^API_URL=.*#API_URL={}#; s#^MODEL=.*#MODEL=scripted-model#' /etc/sysward/init.conf && echo REQUEST_TIMEOUT=120 >> /etc/sysward/init.conf",
        server.base_url()
    ));
}

/// Points the installed pack at another model server.
pub fn point_at(host: &Host, server: &Handle) {
    host.sh_ok(&format!(
        "sed -i 's#^API_URL=.*#API_URL={}#' /etc/sysward/init.conf",
        server.base_url()
    ));
}

/// The run's summary (the last JSON line of `sysward run --json`).
pub fn summary(out: &std::process::Output) -> serde_json::Value {
    crate::json_lines(out).last().cloned().unwrap_or_default()
}

pub fn task_statuses(summary: &serde_json::Value) -> Vec<(String, String)> {
    summary["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["task"].as_str().unwrap_or("").to_string(),
                t["status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The verification outputs the model received, in order: every tool result
/// that holds a RESULT line (each chat request carries the whole task
/// conversation, so a result is taken once, from the request it ends).
pub fn verifications(server: &Handle) -> Vec<String> {
    server
        .chat_requests()
        .iter()
        .filter_map(|r| r.messages().last().cloned())
        .filter(|m| m["role"] == "tool")
        .map(|m| sysward_scripted_model::message_text(&m))
        .filter(|t| t.contains("RESULT: "))
        .collect()
}

/// The first verification output of `task` (its `CHECK <task>` line).
pub fn verification_of(checks: &[String], task: &str) -> String {
    let line = format!("CHECK {task}");
    checks
        .iter()
        .find(|c| c.lines().any(|l| l.trim() == line))
        .cloned()
        .unwrap_or_default()
}

/// One measure: its id, state, detail.
pub fn measures(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("MEASURE "))
        .map(|l| {
            let mut p = l.splitn(3, ' ');
            (
                p.next().unwrap_or("").to_string(),
                p.next().unwrap_or("").to_string(),
                p.next().unwrap_or("").to_string(),
            )
        })
        .collect()
}

pub fn undo_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("UNDO: "))
        .map(str::to_string)
        .collect()
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes hardening-report.md and hardening-report.html into `dir`.
pub struct Report<'a> {
    pub before: &'a Lynis,
    pub after: &'a Lynis,
    /// (task, status, its verification output).
    pub tasks: Vec<(String, String, String)>,
    pub timings: Vec<(String, f64)>,
}

impl Report<'_> {
    pub fn write(&self, dir: &Path) -> (PathBuf, PathBuf) {
        std::fs::create_dir_all(dir).unwrap();
        let mut md = String::new();
        md.push_str("# Hardening report (examples/hardening through sysward, unattended)\n\n");
        md.push_str(&format!(
            "Lynis hardening index: **{} -> {}** (`lynis audit system --quick` on a fresh Debian 12 container, before and after).\n\n",
            self.before.index, self.after.index
        ));
        md.push_str("| step | seconds |\n| --- | --- |\n");
        for (what, s) in &self.timings {
            md.push_str(&format!("| {what} | {s:.0} |\n"));
        }
        md.push_str("\n## Tasks and measures\n\n");
        for (task, status, text) in &self.tasks {
            md.push_str(&format!(
                "### {task}: {status}\n\n| measure | state | detail |\n| --- | --- | --- |\n"
            ));
            for (id, state, detail) in measures(text) {
                md.push_str(&format!(
                    "| {id} | {state} | {} |\n",
                    detail.replace('|', "\\|")
                ));
            }
            for u in undo_lines(text) {
                md.push_str(&format!("\nUndo: `{u}`\n"));
            }
            md.push('\n');
        }
        let fixed: Vec<&String> = self
            .before
            .suggestions
            .iter()
            .chain(&self.before.warnings)
            .filter(|s| !self.after.suggestions.contains(s) && !self.after.warnings.contains(s))
            .collect();
        md.push_str("## Lynis findings no longer reported\n\n");
        for f in &fixed {
            md.push_str(&format!("- {f}\n"));
        }
        md.push_str("\n## Lynis findings still reported\n\n");
        for f in self.after.warnings.iter().chain(&self.after.suggestions) {
            md.push_str(&format!("- {f}\n"));
        }
        let mut html = String::from("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Hardening report</title>\n<style>body{font-family:sans-serif;max-width:72em;margin:2em auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}.DONE{color:#060}.FAILED{color:#a00}.BLOCKED{color:#a60}.NOT-APPLICABLE{color:#666}</style></head><body>\n");
        html.push_str(&format!(
            "<h1>Hardening report</h1>\n<p>Lynis hardening index: <b>{} &rarr; {}</b></p>\n<table><tr><th>step</th><th>seconds</th></tr>\n",
            self.before.index, self.after.index
        ));
        for (what, s) in &self.timings {
            html.push_str(&format!(
                "<tr><td>{}</td><td>{s:.0}</td></tr>\n",
                html_escape(what)
            ));
        }
        html.push_str("</table>\n");
        for (task, status, text) in &self.tasks {
            html.push_str(&format!(
                "<h2>{}: <span class=\"{}\">{}</span></h2>\n<table><tr><th>measure</th><th>state</th><th>detail</th></tr>\n",
                html_escape(task),
                html_escape(status),
                html_escape(status)
            ));
            for (id, state, detail) in measures(text) {
                html.push_str(&format!(
                    "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>\n",
                    html_escape(&id),
                    html_escape(&state),
                    html_escape(&state),
                    html_escape(&detail)
                ));
            }
            html.push_str("</table>\n");
            for u in undo_lines(text) {
                html.push_str(&format!("<p>Undo: <code>{}</code></p>\n", html_escape(&u)));
            }
        }
        html.push_str("<h2>Lynis findings no longer reported</h2><ul>\n");
        for f in &fixed {
            html.push_str(&format!("<li>{}</li>\n", html_escape(f)));
        }
        html.push_str("</ul><h2>Lynis findings still reported</h2><ul>\n");
        for f in self.after.warnings.iter().chain(&self.after.suggestions) {
            html.push_str(&format!("<li>{}</li>\n", html_escape(f)));
        }
        html.push_str("</ul></body></html>\n");
        let (m, h) = (
            dir.join("hardening-report.md"),
            dir.join("hardening-report.html"),
        );
        std::fs::write(&m, md).unwrap();
        std::fs::write(&h, html).unwrap();
        (m, h)
    }
}
