#!/usr/bin/env python3
"""One table from many hosts: reads what run.yml / verify.yml fetched into
RESULTS/<host>/ and prints hosts x tasks -> DONE/BLOCKED/FAILED/INCOMPLETE,
the pending approvals with their ids and each host's audit chain state.

    fleet_report.py RESULTS                 # a text table
    fleet_report.py RESULTS --json          # the same as JSON
    fleet_report.py RESULTS --html FILE     # a self-contained HTML page

Per host it reads (each optional): run.jsonl (the `sysward run --json`
events, the last one the summary), run.rc, run.stderr, approvals.json
(`sysward approvals --json`), audit-verify.rc and audit-verify.txt (`sysward
audit verify`), audit.head. Python 3 standard library only.

Exit status: 0, or 1 with --strict when a host has a task that is not DONE,
a pending approval, no run, or an audit chain that does not verify.
"""

import argparse
import html
import json
import os
import sys

EXIT_MEANING = {
    0: "done",
    1: "session error",
    2: "blocked",
    3: "failed",
    4: "incomplete",
    5: "broker stopped",
    130: "interrupted",
    143: "terminated",
}


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def host_report(name, d):
    h = {
        "host": name,
        "run": None,
        "tasks": {},
        "pending": [],
        "approvals_error": None,
        "audit": {"state": "unknown", "detail": "", "head": ""},
    }
    events = []
    text = read(os.path.join(d, "run.jsonl"))
    if text is not None:
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    rc_text = read(os.path.join(d, "run.rc"))
    rc = int(rc_text.strip()) if rc_text and rc_text.strip().lstrip("-").isdigit() else None
    summary = next((e for e in reversed(events) if e.get("event") == "summary"), None)
    if text is not None or rc is not None:
        run = {
            "exit_code": rc,
            "meaning": EXIT_MEANING.get(rc, "unknown") if rc is not None else "unknown",
            "session": None,
            "error": None,
            "actions": None,
            "duration_ms": None,
        }
        if summary:
            run.update(
                session=summary.get("session"),
                error=summary.get("error"),
                actions=summary.get("actions"),
                duration_ms=summary.get("duration_ms"),
            )
            for t in summary.get("tasks") or []:
                h["tasks"][str(t.get("task"))] = {
                    "status": str(t.get("status", "?")),
                    "steps": t.get("steps"),
                    "summary": t.get("summary") or "",
                }
        else:
            stderr = (read(os.path.join(d, "run.stderr")) or "").strip()
            run["error"] = stderr.splitlines()[-1] if stderr else "no summary event"
        h["run"] = run
    approvals = read(os.path.join(d, "approvals.json"))
    if approvals is not None:
        try:
            v = json.loads(approvals)
            for a in v.get("approvals") or []:
                if a.get("status") != "pending":
                    continue
                # sysward flattens the request into the approval.
                req = a.get("request") or a
                h["pending"].append(
                    {
                        "id": a.get("id"),
                        "task": req.get("task"),
                        "tool": req.get("tool"),
                        "command": req.get("command"),
                        "risk": req.get("risk"),
                        "expires": a.get("expires_rfc3339"),
                    }
                )
        except ValueError as e:
            h["approvals_error"] = "approvals.json: %s" % e
    verify_rc = read(os.path.join(d, "audit-verify.rc"))
    verify_txt = (read(os.path.join(d, "audit-verify.txt")) or "").strip()
    if verify_rc is not None:
        ok = verify_rc.strip() == "0"
        h["audit"]["state"] = "ok" if ok else "BROKEN"
        lines = verify_txt.splitlines()
        h["audit"]["detail"] = lines[-1] if lines else ""
    head = (read(os.path.join(d, "audit.head")) or "").strip()
    h["audit"]["head"] = head
    return h


def collect(results):
    hosts = []
    for name in sorted(os.listdir(results)):
        d = os.path.join(results, name)
        if os.path.isdir(d):
            hosts.append(host_report(name, d))
    tasks = sorted({t for h in hosts for t in h["tasks"]})
    return {"hosts": hosts, "tasks": tasks}


def cell(h, task):
    t = h["tasks"].get(task)
    if t:
        # DONE in an earlier run and unchanged since: not run again.
        return "DONE*" if t["status"] == "SKIPPED" else t["status"]
    if h["run"] is None:
        return "-"
    if h["run"]["error"] and not h["tasks"]:
        return "ERROR"
    return "-"


def short_head(head):
    """The audit head in a few characters: seq and the hash's start."""
    try:
        v = json.loads(head)
    except ValueError:
        # "SEQUENCE HASH"
        parts = head.split()
        if len(parts) >= 2 and parts[0].isdigit():
            return "#%d %s" % (int(parts[0]), parts[1][:12])
        return head[:24]
    if isinstance(v, dict):
        seq = v.get("seq", v.get("records", v.get("count", "?")))
        digest = str(v.get("hash", v.get("head", v.get("last_hash", ""))))
        return "#%s %s" % (seq, digest[:12])
    return str(v)[:24]


def text_table(report):
    tasks = report["tasks"]
    header = ["host"] + tasks + ["exit", "pending", "audit"]
    rows = []
    for h in report["hosts"]:
        run = h["run"]
        exit_s = "no run" if run is None else "%s (%s)" % (run["exit_code"], run["meaning"])
        rows.append(
            [h["host"]]
            + [cell(h, t) for t in tasks]
            + [exit_s, str(len(h["pending"])), "%s %s" % (h["audit"]["state"], short_head(h["audit"]["head"]))]
        )
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    out = []
    fmt = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
    out.append(fmt(header))
    out.append(fmt(["-" * w for w in widths]))
    out.extend(fmt(r) for r in rows)
    pending = [(h["host"], a) for h in report["hosts"] for a in h["pending"]]
    out.append("")
    if any(t["status"] == "SKIPPED" for h in report["hosts"] for t in h["tasks"].values()):
        out.append("DONE*: DONE in an earlier run and unchanged since (skipped by this run)")
    if pending:
        out.append("pending approvals (approve with: ansible-playbook sysward.fleet.approvals -e approval_id=ID):")
        for host, a in pending:
            out.append(
                "  %s  %s  %s  %s: %s" % (host, a["id"], a["task"] or "-", a["tool"], a["command"])
            )
    else:
        out.append("pending approvals: none")
    errors = [(h["host"], h["run"]["error"]) for h in report["hosts"] if h["run"] and h["run"]["error"]]
    for host, e in errors:
        out.append("%s: session error: %s" % (host, e))
    broken = [h for h in report["hosts"] if h["audit"]["state"] == "BROKEN"]
    for h in broken:
        out.append("%s: audit chain BROKEN: %s" % (h["host"], h["audit"]["detail"]))
    return "\n".join(out) + "\n"


CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin-bottom:1.5em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;font-size:.9em}
th{background:#f0f0f0}
.DONE{background:#d9f2d9}.BLOCKED{background:#fff1c2}.FAILED,.ERROR,.BROKEN{background:#f8d0d0}
.INCOMPLETE{background:#e6e0f8}.ok{background:#d9f2d9}
code{font-size:.85em}
"""


def html_page(report):
    e = html.escape
    tasks = report["tasks"]
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>sysward fleet</title>",
        "<style>%s</style></head><body><h1>sysward fleet: %d hosts</h1>" % (CSS, len(report["hosts"])),
        "<table><tr><th>host</th>%s<th>exit</th><th>pending</th><th>audit</th></tr>"
        % "".join("<th>%s</th>" % e(t) for t in tasks),
    ]
    for h in report["hosts"]:
        run = h["run"]
        cells = []
        for t in tasks:
            status = cell(h, t)
            title = h["tasks"].get(t, {}).get("summary", "")
            cells.append("<td class='%s' title='%s'>%s</td>" % (e(status.rstrip("*")), e(title), e(status)))
        exit_s = "no run" if run is None else "%s (%s)" % (run["exit_code"], run["meaning"])
        parts.append(
            "<tr><td>%s</td>%s<td>%s</td><td>%d</td><td class='%s' title='%s'>%s <code>%s</code></td></tr>"
            % (
                e(h["host"]),
                "".join(cells),
                e(exit_s),
                len(h["pending"]),
                e(h["audit"]["state"]),
                e(h["audit"]["detail"]),
                e(h["audit"]["state"]),
                e(short_head(h["audit"]["head"])),
            )
        )
    parts.append("</table><h2>pending approvals</h2>")
    pending = [(h["host"], a) for h in report["hosts"] for a in h["pending"]]
    if pending:
        parts.append("<table><tr><th>host</th><th>id</th><th>task</th><th>tool</th><th>request</th><th>expires</th></tr>")
        for host, a in pending:
            parts.append(
                "<tr><td>%s</td><td><code>%s</code></td><td>%s</td><td>%s</td><td><code>%s</code></td><td>%s</td></tr>"
                % tuple(e(str(x or "-")) for x in (host, a["id"], a["task"], a["tool"], a["command"], a["expires"]))
            )
        parts.append("</table>")
    else:
        parts.append("<p>none</p>")
    parts.append("</body></html>\n")
    return "".join(parts)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", help="the results directory (RESULTS/<host>/...)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page")
    p.add_argument("--strict", action="store_true", help="exit 1 unless every host is clean")
    args = p.parse_args(argv)
    if not os.path.isdir(args.results):
        print("fleet_report: %s is not a directory" % args.results, file=sys.stderr)
        return 2
    report = collect(args.results)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        sys.stdout.write(text_table(report))
    if args.html:
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(html_page(report))
    if args.strict:
        for h in report["hosts"]:
            if (
                h["run"] is None
                or h["pending"]
                or h["audit"]["state"] != "ok"
                # SKIPPED: DONE in an earlier run and unchanged since.
                or any(t["status"] not in ("DONE", "SKIPPED") for t in h["tasks"].values())
            ):
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
