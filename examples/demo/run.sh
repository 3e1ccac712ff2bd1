#!/usr/bin/env bash
# The embedded demo: builds sysward, creates its users, starts the scripted
# OpenAI-compatible model on loopback and runs the demo task through the real
# broker → agent → gateway → executor tree. Run as root on Debian:
#   bash examples/demo/run.sh         (as root; or: sudo bash examples/demo/run.sh)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"

if [ "$(id -u)" -ne 0 ]; then
  echo "run.sh: run as root (su -, then bash examples/demo/run.sh; or sudo bash examples/demo/run.sh): the broker runs as root and drops privileges for everything else" >&2
  exit 1
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "run.sh: cargo is missing; install Rust with rustup (https://rustup.rs) and re-run" >&2
  exit 1
fi

# cargo's own progress stays visible: the first build compiles a few
# hundred crates and takes minutes on a small machine.
if [ -x "$repo/target/release/sysward" ]; then
  echo "== building sysward (release; only what changed since the last build)"
else
  echo "== building sysward (release; the first build takes a few minutes, cargo shows its progress below)"
fi
cargo build --release --workspace --bins
bin="$repo/target/release"
echo "== built: $bin/sysward"

echo "== users and group (sysward-agent, sysward-model, group sysward; created if missing)"
getent group sysward >/dev/null || groupadd --system sysward
for u in sysward-agent sysward-model; do
  id "$u" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$u"
done

work=$(mktemp -d /var/tmp/sysward-demo.XXXXXX)
chmod 700 "$work"
cp examples/demo/agent.md examples/demo/01-health-check.md "$work/"
cleanup() { [ -n "${model_pid:-}" ] && kill "$model_pid" 2>/dev/null; rm -f "$work/port"; }
trap cleanup EXIT

echo "== starting the scripted model server on loopback (examples/demo/model-scenario.json)"
"$bin/sysward-scripted-model" --scenario examples/demo/model-scenario.json \
  --port-file "$work/port" --record "$work/model-requests.jsonl" --exit-after-idle 120 >/dev/null &
model_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
port=$(cat "$work/port")
sed "s/@PORT@/$port/" examples/demo/init.conf.template > "$work/init.conf"
chmod 600 "$work/init.conf" "$work"/*.md

echo "== sysward run --root $work"
set +e
"$bin/sysward" run --root "$work" "$@"
status=$?
set -e
echo "== exit status $status; audit trail:"
"$bin/sysward" audit show --root "$work" | tail -n 12
"$bin/sysward" audit verify --root "$work"
echo "== project kept in $work (audit.log, contexto.mem, model-requests.jsonl)"
exit "$status"
