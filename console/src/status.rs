//! `sysward status`: the daemon (running, its unit enabled), the socket, the
//! last run of each task with its outcome, pending approvals and the audit
//! chain's state. Root reads the files; anyone else gets what the daemon
//! tells a member of the `sysward` group.

use anyhow::Result;
use serde_json::{json, Value};
use std::path::Path;
use sysward_broker::project::Layout;

fn daemon_state(socket: &Path) -> Value {
    // A stream connect always fails on the daemon's SEQPACKET socket: only a
    // real request says whether it answers.
    let listening = crate::client::request_once(
        socket,
        sysward_ipc::operator::OperatorRequest::ListApprovals,
    )
    .is_ok();
    let unit = std::process::Command::new("systemctl")
        .args(["is-enabled", "sysward.service"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty());
    json!({"socket": socket.display().to_string(), "answering": listening, "unit": unit})
}

/// Collects the status as JSON.
pub fn collect(layout: &Layout, standalone: bool, socket: &Path) -> Value {
    let root = nix::unistd::geteuid().is_root();
    let mut v = json!({ "daemon": if standalone { Value::Null } else { daemon_state(socket) } });
    let approvals = if root {
        sysward_broker::approvals::list_json(layout).map_err(|e| sysward_broker::error::chain(&e))
    } else {
        crate::client::request_once(
            socket,
            sysward_ipc::operator::OperatorRequest::ListApprovals,
        )
        .map_err(|e| format!("{e:#}"))
        .and_then(|(ok, text)| {
            if ok {
                serde_json::from_str(&text).map_err(|e| e.to_string())
            } else {
                Err(text)
            }
        })
    };
    let now = sysward_broker::approvals::now_unix();
    v["pending_approvals"] = match approvals {
        Ok(list) => Value::Array(
            list["approvals"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| {
                    serde_json::from_value::<sysward_broker::approvals::Approval>(a.clone()).ok()
                })
                .filter(|a| a.status_at(now) == sysward_broker::approvals::Status::Pending)
                .map(|a| {
                    json!({"id": a.id, "task": a.request.task, "risk": a.request.risk,
                           "command": sysward_broker::approval_view::elide(&a.request.command, 80, 40, "")})
                })
                .collect(),
        ),
        Err(e) => json!({"error": e}),
    };
    if root {
        let records = sysward_broker::tasks::TaskRecords::load(layout);
        v["tasks"] = Value::Array(
            records
                .tasks
                .iter()
                .map(|(name, r)| json!({"task": name, "status": r.status, "time": r.time}))
                .collect(),
        );
        v["audit"] = match sysward_broker::audit::verify(&layout.audit_log(), &layout.audit_head())
        {
            Ok(a) => match a.first_break {
                None => json!({"intact": true, "records": a.records}),
                Some(b) => json!({"intact": false, "break_at": b.line, "problem": b.problem}),
            },
            Err(e) => json!({"error": sysward_broker::error::chain(&e)}),
        };
    } else {
        v["tasks"] =
            json!({"error": "task records and the audit log are root's: run sudo sysward status"});
    }
    v
}

pub fn run(layout: &Layout, standalone: bool, socket: &Path, as_json: bool) -> Result<i32> {
    let v = collect(layout, standalone, socket);
    if as_json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    let l = |x: &Value| sysward_broker::sanitize::one_line(x.as_str().unwrap_or(""), 300);
    if !standalone {
        let d = &v["daemon"];
        println!(
            "daemon    {} on {}{}",
            if d["answering"].as_bool() == Some(true) {
                "running"
            } else {
                "NOT running (sudo systemctl start sysward)"
            },
            l(&d["socket"]),
            d["unit"]
                .as_str()
                .map(|u| format!(" (unit {u})"))
                .unwrap_or_default()
        );
    }
    match v["tasks"].as_array() {
        Some(tasks) if tasks.is_empty() => println!("tasks     none has run yet"),
        Some(tasks) => {
            for t in tasks {
                println!(
                    "task      {:<32} {:<10} {}",
                    l(&t["task"]),
                    l(&t["status"]),
                    l(&t["time"])
                );
            }
        }
        None => println!("tasks     {}", l(&v["tasks"]["error"])),
    }
    match v["pending_approvals"].as_array() {
        Some(list) if list.is_empty() => println!("approvals none pending"),
        Some(list) => {
            for a in list {
                println!(
                    "approval  {} [{}] {} — sysward approve {}",
                    l(&a["id"]),
                    l(&a["risk"]),
                    l(&a["command"]),
                    l(&a["id"])
                );
            }
        }
        None => println!("approvals {}", l(&v["pending_approvals"]["error"])),
    }
    let a = &v["audit"];
    if a["intact"].as_bool() == Some(true) {
        println!("audit     chain intact ({} records)", a["records"]);
    } else if a["intact"].as_bool() == Some(false) {
        println!(
            "audit     BROKEN at record {}: {} (sysward audit verify)",
            a["break_at"],
            l(&a["problem"])
        );
    } else if !a.is_null() {
        println!("audit     {}", l(&a["error"]));
    }
    Ok(0)
}
