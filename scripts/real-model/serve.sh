#!/usr/bin/env bash
# Start / stop a real OpenAI-compatible server (llama-cpp-python) on loopback.
#
#   bash scripts/real-model/serve.sh start PORT [MODE] [N_CTX]   # prints http://127.0.0.1:PORT/v1
#   bash scripts/real-model/serve.sh stop PORT
#   bash scripts/real-model/serve.sh status PORT
#   ("start" may be omitted: serve.sh PORT MODE N_CTX)
#
# MODE: functions  --chat_format chatml-function-calling (honours tools/tool_choice)
#       plain      no --chat_format: the chat template stored in the GGUF
#                  (SmolLM2's own, ChatML-shaped); no function calling
#       chatml     --chat_format chatml (llama-cpp-python's built-in ChatML); no function calling
#       llama-server upstream llama.cpp llama-server --jinja -np 1 (needs setup-llama-server.sh)
# N_CTX: context size in tokens (default 2048).
#
# Needs scripts/real-model/setup.sh first. Pid and log files live in
# $SYSWARD_CI_CACHE/run (default /var/cache/sysward-ci/run) as PORT.pid / PORT.log.
# Env: SYSWARD_REAL_MODEL_THREADS (default 1: ggml worker threads spin-wait; with 2 of them
# per server on a busy 2-core box generation fell from ~50 to ~1 token/s), SYSWARD_REAL_MODEL_ALIAS
# (model id served by /v1/models, default SmolLM2-135M-Instruct),
# SYSWARD_REAL_MODEL_START_TIMEOUT (seconds, default 120).
set -euo pipefail

CACHE="${SYSWARD_CI_CACHE:-/var/cache/sysward-ci}"
RUN="${SYSWARD_REAL_MODEL_RUN_DIR:-$CACHE/run}"
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

cmd=start
case "${1:-}" in start|stop|status) cmd="$1"; shift ;; ""|-h|--help) usage ;; esac
PORT="${1:-}"; [[ "$PORT" =~ ^[0-9]+$ ]] || usage
PIDF="$RUN/$PORT.pid"; LOGF="$RUN/$PORT.log"

alive() { [ -f "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null; }

stop() {
  if ! alive; then rm -f "$PIDF"; echo "not running on port $PORT"; return 0; fi
  local pid; pid="$(cat "$PIDF")"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; sleep 0.2; fi
  rm -f "$PIDF"
  echo "stopped pid $pid (port $PORT)"
}

case "$cmd" in
  stop) stop; exit 0 ;;
  status) if alive; then echo "running pid $(cat "$PIDF") http://127.0.0.1:$PORT/v1"; else echo "not running"; exit 1; fi; exit 0 ;;
esac

MODE="${2:-functions}"
N_CTX="${3:-2048}"
[[ "$N_CTX" =~ ^[0-9]+$ ]] || usage
case "$MODE" in
  functions) fmt=(--chat_format chatml-function-calling) ;;
  plain)     fmt=() ;;
  chatml)    fmt=(--chat_format chatml) ;;
  llama-server) fmt=() ;;
  *) echo "serve.sh: unknown mode '$MODE' (functions|plain|chatml|llama-server)" >&2; exit 2 ;;
esac

[ -f "$CACHE/env" ] || { echo "serve.sh: run scripts/real-model/setup.sh first ($CACHE/env missing)" >&2; exit 1; }
# shellcheck disable=SC1091
. "$CACHE/env"
mkdir -p "$RUN"
if alive; then echo "serve.sh: port $PORT already served by pid $(cat "$PIDF"); stop it first" >&2; exit 1; fi
if curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/"; then
  echo "serve.sh: something else already listens on 127.0.0.1:$PORT" >&2; exit 1
fi

ALIAS="${SYSWARD_REAL_MODEL_ALIAS:-SmolLM2-135M-Instruct}"
THREADS="${SYSWARD_REAL_MODEL_THREADS:-1}"
if [ "$MODE" = llama-server ]; then
  [ -f "$CACHE/llama-server.env" ] || { echo "serve.sh: run scripts/real-model/setup-llama-server.sh first" >&2; exit 1; }
  # shellcheck disable=SC1091
  . "$CACHE/llama-server.env"
  # -np 1: one slot, so the whole N_CTX is that slot's context (auto would split it).
  setsid "$SYSWARD_LLAMA_SERVER_BIN" \
    -m "$SYSWARD_REAL_MODEL_GGUF" -a "$ALIAS" \
    --host 127.0.0.1 --port "$PORT" \
    -c "$N_CTX" -np 1 -t "$THREADS" --jinja --no-webui -s 42 \
    </dev/null >"$LOGF" 2>&1 &
else
  setsid "$SYSWARD_REAL_MODEL_PYTHON" -m llama_cpp.server \
    --model "$SYSWARD_REAL_MODEL_GGUF" --model_alias "$ALIAS" \
    --host 127.0.0.1 --port "$PORT" \
    --n_ctx "$N_CTX" --n_threads "$THREADS" \
    --seed 42 "${fmt[@]}" \
    </dev/null >"$LOGF" 2>&1 &
fi
echo $! >"$PIDF"

deadline=$(( $(date +%s) + ${SYSWARD_REAL_MODEL_START_TIMEOUT:-120} ))
until curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/v1/models"; do
  if ! alive; then
    echo "serve.sh: server exited during start-up; log $LOGF:" >&2; tail -30 "$LOGF" >&2
    rm -f "$PIDF"; exit 1
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "serve.sh: no answer on /v1/models in time; log $LOGF:" >&2; tail -30 "$LOGF" >&2
    stop >/dev/null; exit 1
  fi
  sleep 0.3
done
echo "http://127.0.0.1:$PORT/v1"
