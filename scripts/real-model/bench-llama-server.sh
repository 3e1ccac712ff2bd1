#!/usr/bin/env bash
# The real-server checks against upstream llama.cpp's llama-server (built from
# the llama.cpp that llama-cpp-python's sdist vendors; its build takes ~8 min
# cold on 2 cores, cached afterwards), as a bench run outside CI:
#
#   sudo bash scripts/real-model/bench-llama-server.sh
#
# Prints each session's status, time and number of model calls.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/real-model/setup.sh
bash scripts/real-model/setup-llama-server.sh
cargo build --workspace --bins
SYSWARD_REQUIRE_REAL_MODEL=1 SYSWARD_REAL_MODEL_SERVER=llama-server \
  cargo test -p sysward-tests --test real_model -- --nocapture --test-threads 1 2>&1 |
  grep -E '^(real model|test |test result)'
