//! Every feature of the scripted server, exercised over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod common;

use std::io::{BufReader, Read, Write};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use sysward_scripted_model::{Handle, Scenario, ScriptedServer, ServerOptions};

fn start(scenario: Value) -> Handle {
    let sc = Scenario::from_str(&scenario.to_string()).unwrap();
    ScriptedServer::start(sc).unwrap()
}

// ---------- discovery shapes ----------

#[test]
fn vllm_models_report_max_model_len_and_props_is_404() {
    let h = start(json!({"flavor": "vllm", "model": "Qwen/Qwen2.5-7B", "context_size": 16384}));
    let r = get(h.addr(), "/v1/models");
    assert_eq!(r.status, 200);
    let j = r.json();
    assert_eq!(j["data"][0]["id"], "Qwen/Qwen2.5-7B");
    assert_eq!(j["data"][0]["max_model_len"], 16384);
    let p = get(h.addr(), "/props");
    assert_eq!(p.status, 404);
    assert_eq!(p.json(), json!({"detail": "Not Found"}));
    // vLLM serves only under /v1.
    assert_eq!(get(h.addr(), "/models").status, 404);
}

#[test]
fn llamacpp_models_report_n_ctx_train_and_props_n_ctx() {
    let h = start(json!({"flavor": "llamacpp", "context_size": 4096, "n_ctx_train": 32768}));
    let j = get(h.addr(), "/v1/models").json();
    assert_eq!(j["data"][0]["meta"]["n_ctx_train"], 32768);
    assert!(j["models"].is_array());
    let p = get(h.addr(), "/props");
    assert_eq!(p.status, 200);
    assert_eq!(p.json()["default_generation_settings"]["n_ctx"], 4096);
    assert_eq!(get(h.addr(), "/health").json(), json!({"status": "ok"}));
    // llama.cpp also serves the paths without /v1.
    assert_eq!(get(h.addr(), "/models").status, 200);
}

#[test]
fn ollama_and_openai_report_no_context_length() {
    for flavor in ["ollama", "openai"] {
        let h = start(json!({"flavor": flavor, "model": "llama3.2:latest", "context_size": 999}));
        let r = get(h.addr(), "/v1/models");
        assert_eq!(r.status, 200);
        assert!(!r.text().contains("999"), "{flavor}: {}", r.text());
        assert!(!r.text().contains("context"), "{flavor}");
        assert_eq!(r.json()["data"][0]["id"], "llama3.2:latest");
        let p = get(h.addr(), "/props");
        assert_eq!(p.status, 404, "{flavor}");
        if flavor == "ollama" {
            assert_eq!(p.text(), "404 page not found");
            assert!(p.header("content-type").unwrap().starts_with("text/plain"));
        } else {
            assert_eq!(p.json()["error"]["message"], "Invalid URL (GET /props)");
        }
    }
}

#[test]
fn openrouter_reports_context_length() {
    let h = start(json!({"flavor": "openrouter", "context_size": 131072}));
    let j = get(h.addr(), "/v1/models").json();
    assert_eq!(j["data"][0]["context_length"], 131072);
    assert_eq!(j["data"][0]["top_provider"]["context_length"], 131072);
}

#[test]
fn unknown_path_is_404_with_openai_error_and_routes_override() {
    let h = start(json!({
        "routes": {"GET /props": {"status": 503, "body": "loading model", "headers": {"Retry-After": "2"}}}
    }));
    let r = get(h.addr(), "/v2/whatever?x=1");
    assert_eq!(r.status, 404);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("/v2/whatever"));
    let p = get(h.addr(), "/props");
    assert_eq!(p.status, 503);
    assert_eq!(p.text(), "loading model");
    assert_eq!(p.header("retry-after"), Some("2"));
    let reqs = h.requests();
    assert_eq!(reqs[0].query.as_deref(), Some("x=1"));
    assert_eq!(reqs[0].outcome, "not_found");
    assert_eq!(reqs[1].outcome, "route");
}

// ---------- replies ----------

#[test]
fn non_streaming_reply_with_content_and_native_tool_calls() {
    let h = start(json!({"model": "scripted", "steps": [
        {"content": "<think>check disk</think>Let me look.",
         "tool_calls": [
            {"name": "exec", "arguments": {"command": "df", "args": ["-h"]}},
            {"id": "call_x", "name": "read_file", "arguments": "{\"path\": \"/etc/hosts\""}
         ]},
        {"content": "Done.\nTASK_STATUS: DONE", "usage": {"prompt_tokens": 1234, "completion_tokens": 5}}
    ]}));
    let r = chat(h.addr(), &user("check the disk"));
    assert_eq!(r.status, 200);
    let j = r.json();
    assert_eq!(j["object"], "chat.completion");
    assert_eq!(j["model"], "scripted");
    let c = &j["choices"][0];
    assert_eq!(c["finish_reason"], "tool_calls");
    assert_eq!(c["message"]["role"], "assistant");
    assert_eq!(
        c["message"]["content"],
        "<think>check disk</think>Let me look."
    );
    let calls = c["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(calls[0]["function"]["name"], "exec");
    let args: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"command": "df", "args": ["-h"]}));
    assert_eq!(calls[1]["id"], "call_x");
    // Malformed JSON is sent verbatim.
    assert_eq!(
        calls[1]["function"]["arguments"],
        "{\"path\": \"/etc/hosts\""
    );
    assert!(calls[0]["id"].as_str().unwrap().starts_with("call_"));
    // Default usage is estimated from the request.
    assert!(j["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        j["usage"]["total_tokens"].as_u64().unwrap(),
        j["usage"]["prompt_tokens"].as_u64().unwrap()
            + j["usage"]["completion_tokens"].as_u64().unwrap()
    );

    let j = chat(h.addr(), &user("next")).json();
    assert_eq!(j["choices"][0]["finish_reason"], "stop");
    assert!(j["choices"][0]["message"].get("tool_calls").is_none());
    assert_eq!(j["usage"]["prompt_tokens"], 1234);
    assert_eq!(j["usage"]["completion_tokens"], 5);
    let big = start(
        json!({"steps": [{"content": "x", "usage": {"prompt_tokens": u64::MAX, "completion_tokens": 7}}]}),
    );
    let j = chat(big.addr(), &user("x")).json();
    assert_eq!(j["usage"]["total_tokens"], u64::MAX);
    assert_eq!(h.replies_used(), 2);
    assert_eq!(h.replies_remaining(), 0);
}

#[test]
fn text_protocol_content_passes_through_unchanged() {
    let content = "I will check.\n```tool\n{\"tool\": \"exec\", \"arguments\": {\"command\": \"uptime\"}}\n```\n<tool_call>{\"name\": \"system_info\", \"arguments\": {}}</tool_call>";
    let h = start(json!({"steps": [{"content": content, "finish_reason": "stop"}]}));
    let j = chat(h.addr(), &user("x")).json();
    assert_eq!(j["choices"][0]["message"]["content"], content);
}

fn reassemble(
    events: &[String],
) -> (
    String,
    Vec<(String, String, String)>,
    Option<String>,
    Option<Value>,
) {
    let mut content = String::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut finish = None;
    let mut usage = None;
    for e in events {
        let j: Value = serde_json::from_str(e).unwrap();
        assert_eq!(j["object"], "chat.completion.chunk");
        if let Some(u) = j.get("usage") {
            usage = Some(u.clone());
        }
        let Some(c) = j["choices"].get(0) else {
            continue;
        };
        if let Some(f) = c["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
        let d = &c["delta"];
        if let Some(t) = d["content"].as_str() {
            content.push_str(t);
        }
        if let Some(tcs) = d["tool_calls"].as_array() {
            for tc in tcs {
                let i = tc["index"].as_u64().unwrap() as usize;
                if calls.len() <= i {
                    calls.resize(i + 1, Default::default());
                }
                if let Some(id) = tc["id"].as_str() {
                    calls[i].0 = id.to_string();
                }
                if let Some(n) = tc["function"]["name"].as_str() {
                    calls[i].1.push_str(n);
                }
                if let Some(a) = tc["function"]["arguments"].as_str() {
                    calls[i].2.push_str(a);
                }
            }
        }
    }
    (content, calls, finish, usage)
}

#[test]
fn streaming_reply_splits_content_and_tool_call_arguments() {
    let h = start(json!({"stream_chunk_chars": 5, "steps": [
        {"content": "Checking the disks — ñandú ✓", "tool_calls": [
            {"name": "exec", "arguments": {"command": "df", "args": ["-h", "/"]}},
            {"name": "shell", "arguments": "{\"script\": \"du -sh /var/* | sort -h\"}"}
        ]}
    ]}));
    let mut body = user("disk");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let r = chat(h.addr(), &body);
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    let events = sse_data(&r.text());
    assert_eq!(events.last().unwrap(), "[DONE]");
    let events = &events[..events.len() - 1];
    assert!(
        events.len() > 10,
        "content and arguments are split across chunks"
    );
    let (content, calls, finish, usage) = reassemble(events);
    assert_eq!(content, "Checking the disks — ñandú ✓");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].1, "exec");
    let a: Value = serde_json::from_str(&calls[0].2).unwrap();
    assert_eq!(a, json!({"command": "df", "args": ["-h", "/"]}));
    assert_eq!(calls[1].2, "{\"script\": \"du -sh /var/* | sort -h\"}");
    assert!(calls.iter().all(|c| c.0.starts_with("call_")));
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    assert!(usage.unwrap()["prompt_tokens"].as_u64().unwrap() > 0);
    // The first chunk carries the role.
    let first: Value = serde_json::from_str(&events[0]).unwrap();
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(h.requests()[0].outcome, "stream");
}

#[test]
fn streaming_without_include_usage_has_no_usage_chunk() {
    let h = start(json!({"steps": [{"content": "hi"}]}));
    let mut body = user("x");
    body["stream"] = json!(true);
    let r = chat(h.addr(), &body);
    let events = sse_data(&r.text());
    let (content, calls, finish, usage) = reassemble(&events[..events.len() - 1]);
    assert_eq!(content, "hi");
    assert!(calls.is_empty());
    assert_eq!(finish.as_deref(), Some("stop"));
    assert!(usage.is_none());
}

// ---------- server behaviours ----------

#[test]
fn reject_tools_uses_the_flavor_error_and_does_not_consume_a_step() {
    let tools = json!([{"type": "function", "function": {"name": "exec", "parameters": {"type": "object"}}}]);
    let cases = [
        ("llamacpp", 500, "tools param requires --jinja flag"),
        ("vllm", 400, "--enable-auto-tool-choice"),
        ("ollama", 400, "does not support tools"),
        (
            "openrouter",
            404,
            "No endpoints found that support tool use",
        ),
        ("openai", 400, "'tools' is not supported"),
    ];
    for (flavor, status, needle) in cases {
        let h = start(
            json!({"flavor": flavor, "reject_tools": true, "steps": [{"content": "text mode"}]}),
        );
        let mut body = user("x");
        body["tools"] = tools.clone();
        let r = chat(h.addr(), &body);
        assert_eq!(r.status, status, "{flavor}");
        assert!(r.text().contains(needle), "{flavor}: {}", r.text());
        assert_eq!(h.requests()[0].outcome, "tools_rejected");
        // Without tools the step is still there.
        let j = chat(h.addr(), &user("x")).json();
        assert_eq!(
            j["choices"][0]["message"]["content"], "text mode",
            "{flavor}"
        );
    }
}

#[test]
fn reject_tools_custom_reply() {
    let h = start(json!({"reject_tools": {"status": 422, "body": {"error": "no tools here"}}}));
    let mut body = user("x");
    body["tools"] = json!([{"type": "function", "function": {"name": "a"}}]);
    let r = chat(h.addr(), &body);
    assert_eq!(r.status, 422);
    assert_eq!(r.json(), json!({"error": "no tools here"}));
}

#[test]
fn require_api_key_answers_401_and_records_authorization() {
    let h = start(json!({"require_api_key": "sk-test-123", "steps": [{"content": "ok"}]}));
    let r = request(h.addr(), "GET", "/v1/models", &[], None).unwrap();
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["code"], "invalid_api_key");
    let r = request(
        h.addr(),
        "GET",
        "/v1/models",
        &[("Authorization", "Bearer nope")],
        None,
    )
    .unwrap();
    assert_eq!(r.status, 401);
    let body = user("x").to_string();
    let r = request(
        h.addr(),
        "POST",
        "/v1/chat/completions",
        &[("Authorization", "Bearer sk-test-123")],
        Some(&body),
    )
    .unwrap();
    assert_eq!(r.status, 200);
    let reqs = h.requests();
    assert_eq!(reqs[0].outcome, "unauthorized");
    assert_eq!(reqs[0].authorization(), None);
    assert_eq!(reqs[1].authorization(), Some("Bearer nope"));
    assert_eq!(reqs[2].authorization(), Some("Bearer sk-test-123"));

    let any = start(json!({"require_api_key": true}));
    assert_eq!(get(any.addr(), "/v1/models").status, 401);
    let r = request(
        any.addr(),
        "GET",
        "/v1/models",
        &[("Authorization", "Bearer x")],
        None,
    )
    .unwrap();
    assert_eq!(r.status, 200);
}

#[test]
fn error_steps_with_headers_then_recovery() {
    let h = start(json!({"steps": [
        {"error": {"status": 429, "headers": {"Retry-After": "1"}}},
        {"error": {"status": 503, "body": {"error": {"message": "overloaded"}}}},
        {"error": {"status": 502, "body": "bad gateway"}},
        {"content": "recovered"}
    ]}));
    let r = chat(h.addr(), &user("x"));
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("429"));
    let r = chat(h.addr(), &user("x"));
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["error"]["message"], "overloaded");
    let r = chat(h.addr(), &user("x"));
    assert_eq!(r.status, 502);
    assert_eq!(r.text(), "bad gateway");
    let r = chat(h.addr(), &user("x"));
    assert_eq!(r.json()["choices"][0]["message"]["content"], "recovered");
    let outcomes: Vec<String> = h.requests().iter().map(|r| r.outcome.clone()).collect();
    assert_eq!(outcomes, ["error", "error", "error", "reply"]);
}

#[test]
fn error_in_stream_is_sent_as_an_sse_event() {
    let body = json!({"error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}});
    let h = start(json!({"steps": [
        {"error": {"status": 500, "body": body, "in_stream": true}},
        {"error": {"status": 500, "body": body, "in_stream": true}}
    ]}));
    let mut req = user("x");
    req["stream"] = json!(true);
    let r = chat(h.addr(), &req);
    assert_eq!(r.status, 200);
    let events = sse_data(&r.text());
    assert_eq!(events.len(), 1);
    assert_eq!(serde_json::from_str::<Value>(&events[0]).unwrap(), body);
    // Not streaming: a plain HTTP error.
    let r = chat(h.addr(), &user("x"));
    assert_eq!(r.status, 500);
    assert_eq!(r.json(), body);
}

#[test]
fn garbage_is_not_json() {
    let h = start(json!({"steps": [{"garbage": "<html>oops"}, {"garbage": true}]}));
    let r = chat(h.addr(), &user("x"));
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "<html>oops");
    let r = chat(h.addr(), &user("x"));
    assert!(serde_json::from_slice::<Value>(&r.body).is_err());
}

#[test]
fn truncated_non_streaming_body_is_short_of_content_length() {
    let h = start(
        json!({"steps": [{"content": "a fairly long reply that will be cut in half", "truncated": true}]}),
    );
    let mut s = connect(h.addr());
    send(
        &mut s,
        "POST",
        "/v1/chat/completions",
        &[],
        Some(&user("x").to_string()),
    );
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(body.len() < len, "body {} < declared {len}", body.len());
    assert!(serde_json::from_str::<Value>(body).is_err());
}

#[test]
fn truncated_stream_has_no_done_and_no_final_chunk() {
    let h = start(
        json!({"steps": [{"content": "0123456789abcdefghijklmnopqrstuvwxyz", "truncated": true}]}),
    );
    let mut body = user("x");
    body["stream"] = json!(true);
    let mut s = connect(h.addr());
    send(
        &mut s,
        "POST",
        "/v1/chat/completions",
        &[],
        Some(&body.to_string()),
    );
    let mut r = BufReader::new(s);
    let e = read_response(&mut r).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    assert_eq!(h.requests()[0].outcome, "truncated");
}

#[test]
fn close_connection_sends_nothing() {
    let h = start(json!({"steps": [{"close_connection": true}, {"content": "next"}]}));
    let mut s = connect(h.addr());
    send(
        &mut s,
        "POST",
        "/v1/chat/completions",
        &[],
        Some(&user("x").to_string()),
    );
    let mut raw = Vec::new();
    let n = s.read_to_end(&mut raw).unwrap_or(0);
    assert_eq!(n, 0);
    assert_eq!(
        chat(h.addr(), &user("x")).json()["choices"][0]["message"]["content"],
        "next"
    );
}

#[test]
fn hang_never_answers_until_the_client_gives_up_and_shutdown_is_prompt() {
    let h = start(json!({"steps": [{"hang": true}, {"content": "after"}]}));
    let mut s = connect(h.addr());
    s.set_read_timeout(Some(Duration::from_millis(400)))
        .unwrap();
    send(
        &mut s,
        "POST",
        "/v1/chat/completions",
        &[],
        Some(&user("x").to_string()),
    );
    let mut buf = [0u8; 16];
    let e = s.read(&mut buf).unwrap_err();
    assert!(matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    ));
    drop(s);
    // The next request gets the next step.
    assert_eq!(
        chat(h.addr(), &user("x")).json()["choices"][0]["message"]["content"],
        "after"
    );
    // A hang in progress does not block shutdown.
    let h2 = start(json!({"steps": [{"hang": true}]}));
    let mut s2 = connect(h2.addr());
    send(
        &mut s2,
        "POST",
        "/v1/chat/completions",
        &[],
        Some(&user("x").to_string()),
    );
    assert!(h2.wait_for_requests(1, Duration::from_secs(5)));
    assert_eq!(
        h2.idle_for(),
        Duration::ZERO,
        "a hanging request is in flight"
    );
    let t = Instant::now();
    h2.shutdown();
    assert!(t.elapsed() < Duration::from_secs(2));
    let mut raw = Vec::new();
    assert_eq!(s2.read_to_end(&mut raw).unwrap_or(0), 0);
}

#[test]
fn stream_stalls_after_some_chunks() {
    let h = start(
        json!({"steps": [{"content": "abcdefghijklmnopqrstuvwxyz", "stall_after_chunks": 2}, {"content": "next"}]}),
    );
    let mut body = user("x");
    body["stream"] = json!(true);
    let mut s = connect(h.addr());
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    send(
        &mut s,
        "POST",
        "/v1/chat/completions",
        &[],
        Some(&body.to_string()),
    );
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let err = loop {
        match s.read(&mut buf) {
            Ok(0) => panic!("closed instead of stalling"),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => break e,
        }
    };
    assert!(matches!(
        err.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    ));
    let text = String::from_utf8_lossy(&got);
    assert_eq!(text.matches("data: ").count(), 2, "{text}");
    assert!(text.contains("\"content\":\"abcdefgh\""));
    assert!(!text.contains("[DONE]"));
    drop(s);
    assert_eq!(
        chat(h.addr(), &user("x")).json()["choices"][0]["message"]["content"],
        "next"
    );
}

#[test]
fn delay_ms_and_chunk_delay() {
    let h = start(json!({"steps": [
        {"content": "slow", "delay_ms": 300},
        {"content": "abcdefghijklmnopqrstuvwx", "chunk_delay_ms": 40}
    ]}));
    let t = Instant::now();
    assert_eq!(chat(h.addr(), &user("x")).status, 200);
    assert!(t.elapsed() >= Duration::from_millis(300));
    let mut body = user("x");
    body["stream"] = json!(true);
    let t = Instant::now();
    let r = chat(h.addr(), &body);
    assert_eq!(r.status, 200);
    // role + 3 content + finish = 5 chunks, 4 gaps of 40 ms.
    assert!(t.elapsed() >= Duration::from_millis(160));
}

#[test]
fn context_exceeded_step_and_enforced_context() {
    let h = start(
        json!({"flavor": "llamacpp", "context_size": 4096, "steps": [{"context_exceeded": true}, {"content": "fine"}]}),
    );
    let r = chat(h.addr(), &user("x"));
    assert_eq!(r.status, 400);
    let j = r.json();
    assert_eq!(j["error"]["type"], "exceed_context_size_error");
    assert_eq!(j["error"]["n_ctx"], 4096);
    assert!(j["error"]["n_prompt_tokens"].as_u64().unwrap() > 0);

    let o = start(
        json!({"flavor": "openai", "context_size": 100, "enforce_context": true, "steps": [{"content": "short ok"}]}),
    );
    let r = chat(o.addr(), &user(&"word ".repeat(200)));
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], "context_length_exceeded");
    assert!(r.text().contains("maximum context length is 100 tokens"));
    // Not consumed: a short prompt gets the step.
    let r = chat(o.addr(), &user("hi"));
    assert_eq!(r.json()["choices"][0]["message"]["content"], "short ok");
    assert_eq!(o.requests()[0].outcome, "context_exceeded");

    let v = start(
        json!({"flavor": "vllm", "context_size": 2048, "steps": [{"context_exceeded": true}]}),
    );
    let r = chat(v.addr(), &user("x"));
    assert_eq!(r.status, 400);
    assert!(r.json()["message"]
        .as_str()
        .unwrap()
        .contains("maximum context length is 2048"));
}

#[test]
fn expectations_pass_and_fail_without_consuming_the_step() {
    let h = start(json!({"steps": [
        {"name": "first", "expect": {
            "last_message_contains": "disk",
            "any_message_contains": ["You are sysward", "disk"],
            "system_contains": "You are sysward",
            "none_contains": "hunter2",
            "has_tools": true,
            "role_of_last": "user",
            "stream": false,
            "min_messages": 2,
            "max_messages": 2
         }, "content": "one"},
        {"expect": {"role_of_last": "tool", "tool_result_contains": "42% used"}, "content": "two"}
    ]}));
    let good = json!({"messages": [
        {"role": "system", "content": "You are sysward"},
        {"role": "user", "content": [{"type": "text", "text": "check the disk"}]}
    ], "tools": [{"type": "function", "function": {"name": "exec"}}]});
    assert_eq!(
        chat(h.addr(), &good).json()["choices"][0]["message"]["content"],
        "one"
    );

    let bad = json!({"messages": [
        {"role": "user", "content": "password hunter2"}
    ]});
    let r = chat(h.addr(), &bad);
    assert_eq!(r.status, 500);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("expectation failed"), "{msg}");
    assert!(msg.contains("steps[1]"), "{msg}");
    assert!(
        msg.contains("last message role is \"user\", expected \"tool\""),
        "{msg}"
    );
    let fails = h.expectation_failures();
    assert_eq!(fails.len(), 1);
    assert_eq!(fails[0].step, Some(1));
    assert!(fails[0]
        .detail
        .as_deref()
        .unwrap()
        .contains("no tool message contains"));

    let ok = json!({"messages": [
        {"role": "user", "content": "df"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "exec", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "/dev/sda1 42% used"}
    ]});
    assert_eq!(
        chat(h.addr(), &ok).json()["choices"][0]["message"]["content"],
        "two"
    );
}

#[test]
fn failing_expectations_report_each_check() {
    let h = start(json!({"steps": [{"expect": {
        "last_message_contains": "zzz", "any_message_contains": "yyy", "none_contains": "secret",
        "system_contains": "sys", "has_tools": true, "stream": true, "min_messages": 3, "max_messages": 0
    }, "content": "never"}]}));
    let r = chat(h.addr(), &user("a secret"));
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    for needle in [
        "last message does not contain \"zzz\"",
        "no message contains \"yyy\"",
        "the request contains \"secret\"",
        "no system message contains \"sys\"",
        "the request has no tools",
        "stream is false, expected true",
        "expected at least 3",
        "expected at most 0",
    ] {
        assert!(msg.contains(needle), "{needle} missing in {msg}");
    }
    assert_eq!(h.replies_used(), 0);
}

#[test]
fn never_contains_guards_every_request() {
    let h = start(
        json!({"never_contains": ["AKIAIOSFODNN7EXAMPLE"], "steps": [{"content": "a"}, {"content": "b"}]}),
    );
    assert_eq!(chat(h.addr(), &user("clean")).status, 200);
    let r = chat(h.addr(), &user("key AKIAIOSFODNN7EXAMPLE leaked"));
    assert_eq!(r.status, 500);
    assert_eq!(r.json()["error"]["type"], "expectation_failed");
    let f = h.expectation_failures();
    assert_eq!(f.len(), 1);
    assert!(f[0].detail.as_deref().unwrap().contains("never_contains"));
    assert!(f[0].contains("AKIAIOSFODNN7EXAMPLE"));

    let fast = start(json!({"expectation_status": 400, "never_contains": ["x-secret"]}));
    let r = chat(fast.addr(), &user("x-secret"));
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], "expectation_failed");
}

#[test]
fn exhausted_default_and_custom() {
    let h = start(json!({"steps": [{"content": "only"}]}));
    assert_eq!(chat(h.addr(), &user("x")).status, 200);
    let r = chat(h.addr(), &user("x"));
    assert_eq!(r.status, 500);
    assert!(r.text().contains("scenario exhausted"));
    assert_eq!(h.requests()[1].outcome, "exhausted");

    let c = start(json!({"exhausted": {"content": "I have nothing more.\nTASK_STATUS: BLOCKED"}}));
    for _ in 0..3 {
        let j = chat(c.addr(), &user("x")).json();
        assert!(j["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .contains("BLOCKED"));
    }
    assert!(c
        .requests()
        .iter()
        .all(|r| r.outcome == "exhausted" && r.step.is_none()));
}

#[test]
fn repeat_serves_a_step_several_times() {
    let h = start(json!({"steps": [
        {"tool_calls": [{"name": "exec", "arguments": {"command": "uptime"}}], "repeat": 3},
        {"content": "end"}
    ]}));
    for _ in 0..3 {
        let j = chat(h.addr(), &user("x")).json();
        assert_eq!(
            j["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
            "exec"
        );
    }
    assert_eq!(
        chat(h.addr(), &user("x")).json()["choices"][0]["message"]["content"],
        "end"
    );
    let steps: Vec<Option<usize>> = h.requests().iter().map(|r| r.step).collect();
    assert_eq!(steps, [Some(0), Some(0), Some(0), Some(1)]);
}

#[test]
fn records_every_request_to_memory_and_jsonl() {
    let dir = sysward_testdir::RemoveOnDrop::fresh_dir("scripted-rec");
    let path = dir.join("rec.jsonl");
    let _ = std::fs::remove_file(&path);
    let sc = Scenario::from_str(r#"{"steps": [{"content": "hi"}]}"#).unwrap();
    let h = ScriptedServer::start_with(
        sc,
        ServerOptions {
            record: Some(path.clone()),
            ..ServerOptions::default()
        },
    )
    .unwrap();
    get(h.addr(), "/v1/models");
    let r = request(
        h.addr(),
        "POST",
        "/v1/chat/completions",
        &[("Authorization", "Bearer k1"), ("X-Trace", "t")],
        Some(&user("hello there").to_string()),
    )
    .unwrap();
    assert_eq!(r.status, 200);
    request(
        h.addr(),
        "POST",
        "/v1/chat/completions",
        &[],
        Some("not json"),
    )
    .unwrap();
    let mem = h.requests();
    assert_eq!(mem.len(), 3);
    assert_eq!(mem[0].method, "GET");
    assert_eq!(mem[0].outcome, "models");
    assert_eq!(mem[1].seq, 2);
    assert_eq!(mem[1].header("x-trace"), Some("t"));
    assert_eq!(mem[1].messages()[0]["content"], "hello there");
    assert!(mem[1].message_text().contains("hello there"));
    assert_eq!(mem[2].raw_body.as_deref(), Some("not json"));
    assert_eq!(mem[2].outcome, "bad_request");
    h.shutdown();
    let lines: Vec<Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1]["body"]["messages"][0]["content"], "hello there");
    assert_eq!(lines[1]["outcome"], "reply");
    let recorded: sysward_scripted_model::RecordedRequest =
        serde_json::from_value(lines[1].clone()).unwrap();
    assert_eq!(recorded, mem[1]);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------- HTTP robustness ----------

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let h = start(json!({"steps": [{"content": "a"}, {"content": "b"}]}));
    let mut s = connect(h.addr());
    let mut r = BufReader::new(s.try_clone().unwrap());
    send(&mut s, "GET", "/v1/models", &[], None);
    assert_eq!(read_response(&mut r).unwrap().status, 200);
    for want in ["a", "b"] {
        send(
            &mut s,
            "POST",
            "/v1/chat/completions",
            &[],
            Some(&user("x").to_string()),
        );
        let resp = read_response(&mut r).unwrap();
        assert_eq!(resp.json()["choices"][0]["message"]["content"], want);
    }
    // Streaming on the same connection, then a normal request again.
    let mut body = user("x");
    body["stream"] = json!(true);
    let h2 = start(json!({"steps": [{"content": "s"}, {"content": "t"}]}));
    let mut s = connect(h2.addr());
    let mut r = BufReader::new(s.try_clone().unwrap());
    send(
        &mut s,
        "POST",
        "/v1/chat/completions",
        &[],
        Some(&body.to_string()),
    );
    assert!(read_response(&mut r).unwrap().text().contains("[DONE]"));
    send(
        &mut s,
        "POST",
        "/v1/chat/completions",
        &[],
        Some(&user("x").to_string()),
    );
    assert_eq!(
        read_response(&mut r).unwrap().json()["choices"][0]["message"]["content"],
        "t"
    );
}

#[test]
fn chunked_request_body_and_expect_continue() {
    let h = start(json!({"steps": [{"content": "a"}, {"content": "b"}]}));
    let body = user("chunked hello").to_string();
    let (p1, p2) = body.split_at(10);
    let mut s = connect(h.addr());
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{p1}\r\n{:x};ext=1\r\n{p2}\r\n0\r\n\r\n",
        p1.len(),
        p2.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    assert_eq!(read_response(&mut r).unwrap().status, 200);
    assert_eq!(h.requests()[0].messages()[0]["content"], "chunked hello");

    // Expect: 100-continue: the server asks for the body before reading it.
    let body = user("continued").to_string();
    let mut s = connect(h.addr());
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let cont = read_response(&mut r).unwrap();
    assert_eq!(cont.status, 100);
    s.write_all(body.as_bytes()).unwrap();
    let resp = read_response(&mut r).unwrap();
    assert_eq!(resp.json()["choices"][0]["message"]["content"], "b");
}

#[test]
fn odd_requests_never_break_the_server() {
    let h = start(json!({"steps": [{"content": "still alive"}]}));
    let bad: &[&[u8]] = &[
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"get /v1/models HTTP/1.1\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"short\"",
        b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"GET /v1/models HTTP/1.1\r\nNoColonHere\r\n\r\n",
        b"\xff\xfe\xfd\r\n\r\n",
        b"",
    ];
    for raw in bad {
        let mut s = connect(h.addr());
        s.write_all(raw).unwrap();
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        if !out.is_empty() {
            let t = String::from_utf8_lossy(&out);
            assert!(
                t.starts_with("HTTP/1.1 4") || t.starts_with("HTTP/1.1 5"),
                "{t}"
            );
        }
    }
    // Huge header block.
    let mut s = connect(h.addr());
    let big = format!(
        "GET /v1/models HTTP/1.1\r\nX: {}\r\n\r\n",
        "a".repeat(100_000)
    );
    let _ = s.write_all(big.as_bytes());
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 431"));
    // Valid JSON that is not a chat request.
    for body in ["[]", "{}", "{\"messages\": 3}", "null"] {
        let r = request(h.addr(), "POST", "/v1/chat/completions", &[], Some(body)).unwrap();
        assert_eq!(r.status, 400, "{body}");
    }
    // HEAD: a head without a body, then close.
    let mut s = connect(h.addr());
    s.write_all(b"HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let t = String::from_utf8_lossy(&out);
    assert!(t.starts_with("HTTP/1.1 "), "{t}");
    assert!(t.ends_with("\r\n\r\n"), "{t}");
    // Wrong method on a known path.
    assert_eq!(
        request(h.addr(), "DELETE", "/v1/models", &[], None)
            .unwrap()
            .status,
        404
    );
    assert_eq!(get(h.addr(), "/v1/chat/completions").status, 404);
    // And the step is intact.
    assert_eq!(
        chat(h.addr(), &user("x")).json()["choices"][0]["message"]["content"],
        "still alive"
    );
}

#[test]
fn many_concurrent_clients() {
    let h = start(json!({"exhausted": {"content": "same"}}));
    let addr = h.addr();
    let threads: Vec<_> = (0..16)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..5 {
                    assert_eq!(chat(addr, &user("x")).status, 200);
                    assert_eq!(get(addr, "/v1/models").status, 200);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let reqs = h.requests();
    assert_eq!(reqs.len(), 160);
    let mut seqs: Vec<u64> = reqs.iter().map(|r| r.seq).collect();
    seqs.dedup();
    assert_eq!(seqs.len(), 160);
}

#[test]
fn base_url_and_idle() {
    let h = start(json!({}));
    assert_eq!(
        h.base_url(),
        format!("http://127.0.0.1:{}/v1", h.addr().port())
    );
    std::thread::sleep(Duration::from_millis(120));
    assert!(h.idle_for() >= Duration::from_millis(100));
    get(h.addr(), "/v1/models");
    assert!(h.idle_for() < Duration::from_millis(100));
}

// ---------- conditional steps ----------

/// A step whose `when` does not hold is passed over: the script answers
/// according to what the last message (a tool result) says, and the passed
/// alternatives never answer a later request.
#[test]
fn when_passes_over_steps_whose_condition_does_not_hold() {
    let h = start(json!({"steps": [
        {"when": {"last_message_contains": "RESULT: DONE"}, "content": "done"},
        {"when": {"last_message_contains": "RESULT: BLOCKED"}, "content": "blocked"},
        {"when": {"role_of_last": "tool"}, "content": "failed"},
        {"content": "next task"}
    ]}));
    let tool = |text: &str| {
        json!({"model": "m", "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": text}
        ]})
    };
    let content = |r: Resp| r.json()["choices"][0]["message"]["content"].clone();
    assert_eq!(
        content(chat(h.addr(), &tool("x\nRESULT: BLOCKED\n"))),
        "blocked"
    );
    // The third alternative (a tool result) does not hold for a user message.
    assert_eq!(content(chat(h.addr(), &user("the next task"))), "next task");
    assert!(h.expectation_failures().is_empty());
}
