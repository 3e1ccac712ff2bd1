#!/usr/bin/env python3
"""Record real request/response pairs from a running OpenAI-compatible server.

    python3 scripts/real-model/record.py --base http://127.0.0.1:PORT --mode functions \
        --server "llama-cpp-python 0.3.36" --n-ctx 2048 --out agent/tests/recorded/llama-cpp-python

One JSON file per exchange, named <mode>-<case>.json:
    {"server": ..., "server_config": {...}, "case": ..., "note": ...,
     "request": {"method", "path", "body"},
     "response": {"status", "headers": {"content-type"}, "body"}}
response.body is the parsed JSON when the server answered JSON, else the raw
text (SSE streams are kept verbatim as one string). Standard library only;
talks to loopback only.
"""
import argparse
import http.client
import json
import os
import sys
import time
import urllib.parse

MODEL = "SmolLM2-135M-Instruct"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_command",
            "description": "Run a shell command on the managed host and return its output.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "The shell command line."}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file on the managed host.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Absolute path of the file."}},
                "required": ["path"],
            },
        },
    },
]

SYSTEM = "You are a system administration agent. Use the tools to inspect the host."
# ~46 SmolLM2 tokens
LOG_LINE = "Dec  1 10:00:01 host sshd[1234]: Accepted publickey for admin from 127.0.0.1 port 50000\n"
TOOL_USER = "How much free disk space is there on /? Use run_command."


def chat(messages, **kw):
    body = {"model": MODEL, "messages": messages, "temperature": 0, "seed": 42}
    body.update(kw)
    return body


def cases(mode, n_ctx):
    c = []
    c.append(("models", "GET", "/v1/models", None, "model list"))
    c.append(("props", "GET", "/props", None, "llama.cpp's llama-server has /props; other servers may 404"))
    c.append(("chat-length", "POST", "/v1/chat/completions",
              chat([{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}], max_tokens=16),
              "max_tokens reached: finish_reason should be \"length\""))
    c.append(("chat-stop", "POST", "/v1/chat/completions",
              chat([{"role": "user", "content": "What is 2+2? Answer with one number."}], max_tokens=64),
              "natural end of answer: finish_reason should be \"stop\""))
    base = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TOOL_USER}]
    c.append(("chat-notools", "POST", "/v1/chat/completions", chat(base, max_tokens=64),
              "same messages as chat-tools-auto but without tools: compare usage.prompt_tokens"))
    c.append(("chat-tools-auto", "POST", "/v1/chat/completions",
              chat(base, tools=TOOLS, tool_choice="auto", max_tokens=64),
              "2 function tools, tool_choice auto"))
    c.append(("chat-tools-forced", "POST", "/v1/chat/completions",
              chat(base, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "run_command"}}, max_tokens=64),
              "tool_choice names run_command"))
    c.append(("chat-tools-required", "POST", "/v1/chat/completions",
              chat(base, tools=TOOLS, tool_choice="required", max_tokens=64),
              "tool_choice \"required\" (the string form; some servers take no object form)"))
    call = [{"id": "call_1", "type": "function",
             "function": {"name": "run_command", "arguments": "{\"command\": \"df -h /\"}"}}]
    result = {"role": "tool", "tool_call_id": "call_1",
              "content": "Filesystem Size Used Avail Use% Mounted on\n/dev/vda 252G 25G 67G 28% /"}
    c.append(("chat-tool-result", "POST", "/v1/chat/completions",
              chat(base + [{"role": "assistant", "content": "", "tool_calls": call}, result],
                   tools=TOOLS, tool_choice="auto", max_tokens=64),
              "second turn: the assistant tool_calls message (content \"\") and its role=tool result are sent back"))
    c.append(("chat-tool-result-content-null", "POST", "/v1/chat/completions",
              chat(base + [{"role": "assistant", "content": None, "tool_calls": call}, result],
                   tools=TOOLS, tool_choice="auto", max_tokens=64),
              "as chat-tool-result but the assistant message has content null, as OpenAI itself returns it"))
    c.append(("stream-usage", "POST", "/v1/chat/completions",
              chat([{"role": "user", "content": "What is 2+2? Answer with one number."}], max_tokens=16,
                   stream=True, stream_options={"include_usage": True}),
              "stream:true with stream_options.include_usage; body is the raw SSE text"))
    c.append(("stream-tools-forced", "POST", "/v1/chat/completions",
              chat(base, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "run_command"}},
                   max_tokens=64, stream=True, stream_options={"include_usage": True}),
              "streamed forced tool call; body is the raw SSE text"))
    # "hello " is one token per repetition for SmolLM2's tokenizer.
    big = "hello " * (n_ctx + 200)
    c.append(("overflow", "POST", "/v1/chat/completions",
              chat([{"role": "user", "content": big}], max_tokens=16),
              f"prompt longer than n_ctx={n_ctx}: records the overflow status and error body"))
    c.append(("stream-overflow", "POST", "/v1/chat/completions",
              chat([{"role": "user", "content": big}], max_tokens=16, stream=True,
                   stream_options={"include_usage": True}),
              f"as overflow but stream:true: is the error an HTTP status or an SSE event?"))
    c.append(("overflow-completion", "POST", "/v1/chat/completions",
              chat([{"role": "user", "content": "Here is a log:\n" + LOG_LINE * max(1, (n_ctx - 180) // 47)
                     + "\nRepeat the log above line by line."}], max_tokens=400),
              f"prompt fits in n_ctx={n_ctx} but prompt + max_tokens does not"))
    return c


def request(base, method, path, body, timeout=600):
    u = urllib.parse.urlsplit(base)
    assert u.hostname in ("127.0.0.1", "localhost", "::1"), "loopback only"
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    data = None if body is None else json.dumps(body).encode()
    headers = {"content-type": "application/json"} if data is not None else {}
    t = time.monotonic()
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    raw = r.read()
    dt = time.monotonic() - t
    ctype = r.getheader("content-type", "")
    conn.close()
    text = raw.decode("utf-8", errors="replace")
    if "json" in ctype:
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
    else:
        parsed = text
    return {"status": r.status, "headers": {"content-type": ctype}, "body": parsed}, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="http://127.0.0.1:PORT (no /v1)")
    ap.add_argument("--mode", required=True)
    ap.add_argument("--server", required=True, help="server name and version")
    ap.add_argument("--server-config", default="{}", help="JSON object stored as server_config")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*", help="case names to record")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cfg = json.loads(a.server_config)
    for name, method, path, body, note in cases(a.mode, a.n_ctx):
        if a.only and name not in a.only:
            continue
        resp, dt = request(a.base, method, path, body)
        rec = {
            "server": a.server,
            "server_config": cfg,
            "case": name,
            "note": note,
            "request": {"method": method, "path": path, "body": body},
            "response": resp,
        }
        fn = os.path.join(a.out, f"{a.mode}-{name}.json")
        with open(fn, "w") as f:
            json.dump(rec, f, indent=2, ensure_ascii=False)
            f.write("\n")
        b = resp["body"]
        summary = ""
        if isinstance(b, dict):
            if "usage" in b:
                summary = f"usage={b['usage']}"
            if b.get("choices"):
                ch = b["choices"][0]
                summary += f" finish={ch.get('finish_reason')} msg={json.dumps(ch.get('message'))[:160]}"
            elif "error" in b or "detail" in b:
                summary = json.dumps(b)[:300]
        else:
            summary = repr(b[:160])
        print(f"{fn}: {resp['status']} {dt:.1f}s {summary}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
