#!/usr/bin/env bash
# The whole eval set, outside CI (CI runs a subset: tests/tests/eval_runner.rs):
#
#   sudo bash scripts/eval-bench.sh [--smollm2 [--no-controls]] [OUT_DIR] [-- EXTRA sysward-eval ARGS]
#
# Every scenario of eval/scenarios under --oracle and --null-model, two hosts
# at a time. Fails when a reference solution does not pass, or when a
# scenario tagged repair or harden passes under the null model (its check
# would not inspect the change). --smollm2 adds the small real model
# (llama-cpp-python + SmolLM2-135M, scripts/real-model/setup.sh) through
# sysward and through the plain-loop baseline, three hosts at a time sharing
# the one model server, with a 120 s session cap (EXTRA args such as
# --time-limit 60 override it); --no-controls leaves the oracle and the null
# model out of that run.
# Writes OUT_DIR (default eval-out/bench-<time>)/report.{json,md,svg}.
# Needs the host bed (scripts/hosts/base.sh) and a .deb ($SYSWARD_DEB, else
# the newest target/debian/sysward_*.deb; bash packaging/build-deb.sh).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

if [ "$(id -u)" -ne 0 ]; then
  echo "eval-bench.sh: run as root: the hosts are systemd-nspawn containers" >&2
  exit 1
fi
smollm2=0
controls=1
out=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --smollm2) smollm2=1 ;;
    --no-controls) controls=0 ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "eval-bench.sh: unknown option $1" >&2; exit 2 ;;
    *) out="$1" ;;
  esac
  shift
done
out=${out:-eval-out/bench-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"

deb=${SYSWARD_DEB:-$(ls -t target/debian/sysward_*.deb 2>/dev/null | head -n 1 || true)}
if [ -z "$deb" ] || [ ! -f "$deb" ]; then
  echo "eval-bench.sh: no .deb: set SYSWARD_DEB or run bash packaging/build-deb.sh" >&2
  exit 1
fi
cargo build -q -p sysward-eval
eval_bin="${CARGO_TARGET_DIR:-$repo/target}/debug/sysward-eval"

if [ "$controls" = 0 ] && [ "$smollm2" = 0 ]; then
  echo "eval-bench.sh: --no-controls needs --smollm2 (nothing would run)" >&2
  exit 2
fi
args=(--jobs 2 --deb "$deb" --output "$out")
[ "$controls" = 1 ] && args+=(--oracle --null-model)
port=""
if [ "$smollm2" = 1 ]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  trap 'bash scripts/real-model/serve.sh stop "$port" >/dev/null' EXIT
  bash scripts/real-model/serve.sh start "$port" functions 4096 >/dev/null
  printf 'API_URL=http://127.0.0.1:%s/v1\nMODEL=SmolLM2-135M-Instruct\nCONTEXT_SIZE=4096\nREQUEST_TIMEOUT=100\n' "$port" > "$out/smollm2.conf"
  args+=(--model "$out/smollm2.conf" --baseline "$out/smollm2.conf" --jobs 3 --time-limit 120)
fi

start=$(date +%s)
set +e
"$eval_bin" "${args[@]}" "${extra[@]}" eval/scenarios > "$out/stdout.log"
code=$?
set -e
echo "sysward-eval exited $code after $(( $(date +%s) - start )) s; report: $out/report.md"

# The bench's own verdict: the oracle and the null model, whatever the
# models scored.
python3 - "$out/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad = []
for run in r["runs"]:
    if run["model"] == "oracle" and not run["pass"]:
        bad.append("oracle fails %s (%s)" % (run["scenario"], run["artifacts"]))
    if run["model"] == "null" and run["pass"] and {"repair", "harden"} & set(run["tags"]):
        bad.append("null model passes %s: its check does not inspect the change" % run["scenario"])
for m in r["models"]:
    print("%-32s %3d/%-3d passed, median %.0f s per run" % (m["model"], m["passed"], m["runs"], m["wall_s_median"]))
print("wall time %.0f s" % r["wall_s"])
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
