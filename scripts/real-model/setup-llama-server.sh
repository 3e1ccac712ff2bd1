#!/usr/bin/env bash
# Upstream llama.cpp `llama-server`, built from the copy of llama.cpp that the
# llama-cpp-python sdist on PyPI vendors (vendor/llama.cpp), CPU only.
#
#   sudo bash scripts/real-model/setup-llama-server.sh      # idempotent; runs setup.sh first
#
# Result (under $SYSWARD_CI_CACHE, default /var/cache/sysward-ci):
#   llama-server/<version>-<key>/llama-server   static binary (key = CPU flags + cmake args)
#   src/llama_cpp_python-<version>.tar.gz        the sdist (kept: a re-build needs no download)
#   llama-server.env                             SYSWARD_LLAMA_SERVER_BIN / _VERSION
# Start it with: bash scripts/real-model/serve.sh start PORT llama-server [N_CTX]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${SYSWARD_CI_CACHE:-/var/cache/sysward-ci}"
LLAMA_CPP_PYTHON_VERSION="0.3.36"
# Portable by default, as setup.sh (a VM may list CPU instructions it cannot
# run; a native build died on them): SYSWARD_LLAMA_NATIVE=ON for -march=native.
NATIVE="${SYSWARD_LLAMA_NATIVE:-OFF}"
# No web UI (its assets would come from npm or a download), no HTTPS, no curl,
# static libraries so the one binary is all that is kept.
CMAKE_ARGS_SERVER="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=${NATIVE} -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_RPC=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON ${SYSWARD_LLAMA_SERVER_CMAKE_ARGS:-}"

log() { printf '[real-model setup-llama-server] %s\n' "$*"; }
now() { date +%s; }
T0=$(now)

bash "$HERE/setup.sh" >/dev/null          # apt packages, venv (its pip fetches the sdist), model
. "$CACHE/env"

exec 9>"$CACHE/.setup-llama-server.lock"
flock 9

cpu_flags="$(grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null || uname -m)"
key="$(printf '%s\n%s\n%s\n' "$LLAMA_CPP_PYTHON_VERSION" "$cpu_flags" "$CMAKE_ARGS_SERVER" | sha256sum | cut -c1-12)"
DEST="$CACHE/llama-server/$LLAMA_CPP_PYTHON_VERSION-$key"
BIN="$DEST/llama-server"

if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
  log "cached binary: $BIN"
else
  mkdir -p "$CACHE/src" "$CACHE/logs" "$CACHE/llama-server"
  SDIST="$CACHE/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
  if [ ! -s "$SDIST" ]; then
    log "downloading the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist from PyPI"
    PIP_CACHE_DIR="$CACHE/pip" PIP_DISABLE_PIP_VERSION_CHECK=1 \
      "$SYSWARD_REAL_MODEL_PYTHON" -m pip download -q --no-deps --no-binary llama-cpp-python \
      -d "$CACHE/src" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >"$CACHE/logs/sdist.log" 2>&1 \
      || { tail -20 "$CACHE/logs/sdist.log" >&2; exit 1; }
  fi
  tb=$(now)
  work="$(mktemp -d "$CACHE/llama-server/.build.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  tar -xzf "$SDIST" -C "$work"
  src="$work/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
  # The sdist has no .git: take the llama.cpp commit from the package's changelog.
  commit="$(awk -v v="## [$LLAMA_CPP_PYTHON_VERSION]" '$0==v{f=1;next} /^## \[/{f=0} f' \
    "$work/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/CHANGELOG.md" \
    | grep -o -m1 'llama\.cpp@[0-9a-f]\{7,40\}' | cut -d@ -f2 || true)"
  blog="$CACHE/logs/build-llama-server-$LLAMA_CPP_PYTHON_VERSION-$key.log"
  log "building llama-server (llama.cpp ${commit:-unknown}) from the sdist (cold; minutes)"
  log "  cmake $CMAKE_ARGS_SERVER"
  # shellcheck disable=SC2086
  if ! { cmake -S "$src" -B "$work/build" $CMAKE_ARGS_SERVER ${commit:+-DLLAMA_BUILD_COMMIT=$commit} \
         && cmake --build "$work/build" --target llama-server -j 2; } >"$blog" 2>&1; then
    tail -40 "$blog" >&2
    echo "setup-llama-server.sh: build failed; full log: $blog" >&2
    exit 1
  fi
  stage="$work/stage"; mkdir -p "$stage"
  cp "$work/build/bin/llama-server" "$stage/"
  strip "$stage/llama-server" 2>/dev/null || true
  rm -rf "$DEST"; mv "$stage" "$DEST"; chmod 755 "$DEST"
  log "  built in $(( $(now) - tb ))s"
fi

ver="$("$BIN" --version 2>&1 | grep -m1 "^version" | sed "s/^version: //" || true)"
{
  printf 'SYSWARD_LLAMA_SERVER_BIN=%q\n' "$BIN"
  printf 'SYSWARD_LLAMA_SERVER_VERSION=%q\n' "llama.cpp llama-server ${ver:-version unknown} (vendored in llama-cpp-python $LLAMA_CPP_PYTHON_VERSION)"
} >"$CACHE/llama-server.env"
log "binary:  $BIN"
log "version: ${ver:-unknown}"
log "done in $(( $(now) - T0 ))s"
echo "$BIN"
