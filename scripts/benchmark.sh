#!/usr/bin/env bash
# The quick start's main job: a real MLPerf Inference LLM benchmark (LoadGen + a tiny Llama
# built locally) on this machine's CPU, with the embedded defaults.
#   bash scripts/benchmark.sh [extra cmx run arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/cmx run recipe --tags=mlperf,inference,llama "$@"
