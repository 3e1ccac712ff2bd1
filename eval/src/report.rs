//! The overall report: a JSON document (every run, and per endpoint the
//! pass rate and totals) and a Markdown table.

use serde_json::{json, Value};
use std::collections::BTreeMap;

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

pub fn render(runs: &[Value], wall_s: f64) -> (Value, String) {
    let mut by_model: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for r in runs {
        by_model
            .entry(r["model"].as_str().unwrap_or("?").to_string())
            .or_default()
            .push(r);
    }
    let mut models = Vec::new();
    for (m, rs) in &by_model {
        let passed = rs.iter().filter(|r| r["pass"] == true).count();
        let sum = |k: &str| rs.iter().map(|r| num(&r[k])).sum::<f64>();
        let mut walls: Vec<f64> = rs.iter().map(|r| num(&r["wall_s"])).collect();
        walls.sort_by(|a, b| a.total_cmp(b));
        let median = walls.get(walls.len() / 2).copied().unwrap_or(0.0);
        models.push(json!({
            "model": m,
            "runs": rs.len(),
            "passed": passed,
            "pass_rate": if rs.is_empty() { 0.0 } else { passed as f64 / rs.len() as f64 },
            "steps": sum("steps"),
            "tokens_in": sum("tokens_in"),
            "tokens_out": sum("tokens_out"),
            "actions": sum("actions"),
            "approvals_asked": sum("approvals_asked"),
            "denials": sum("policy_denials") + sum("denied_by_rule"),
            "wall_s_median": median,
            "wall_s_max": walls.last().copied().unwrap_or(0.0),
        }));
    }
    let json = json!({
        "wall_s": (wall_s * 10.0).round() / 10.0,
        "models": models,
        "runs": runs,
    });

    let mut md = String::from("# sysward eval\n\n");
    for m in &models {
        md.push_str(&format!(
            "**{}**: {}/{} passed ({:.0} %), {} steps, {} actions, {} approvals asked, {} denials, tokens {} in / {} out, median {:.0} s per run\n\n",
            m["model"].as_str().unwrap_or("?"),
            m["passed"],
            m["runs"],
            num(&m["pass_rate"]) * 100.0,
            num(&m["steps"]),
            num(&m["actions"]),
            num(&m["approvals_asked"]),
            num(&m["denials"]),
            num(&m["tokens_in"]),
            num(&m["tokens_out"]),
            num(&m["wall_s_median"]),
        ));
    }
    md.push_str("| scenario | model | # | result | status | steps | tokens in/out | actions | approvals | denials | wall s | note |\n");
    md.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for r in runs {
        let statuses: Vec<&str> = r["task_status"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let note = r["error"]
            .as_str()
            .map(|e| e.lines().next().unwrap_or("").replace('|', "\\|"))
            .unwrap_or_else(|| {
                if r["timed_out"] == true {
                    "time limit".into()
                } else {
                    String::new()
                }
            });
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} | {:.1} | {} |\n",
            r["scenario"].as_str().unwrap_or("?"),
            r["model"].as_str().unwrap_or("?"),
            r["repeat"],
            if r["pass"] == true { "PASS" } else { "FAIL" },
            statuses.join("→"),
            r["steps"],
            r["tokens_in"],
            r["tokens_out"],
            r["actions"],
            r["approvals_asked"],
            num(&r["policy_denials"]) + num(&r["denied_by_rule"]),
            num(&r["wall_s"]),
            note.chars().take(120).collect::<String>(),
        ));
    }
    md.push_str(&format!("\nTotal wall time {wall_s:.0} s.\n"));
    (json, md)
}
