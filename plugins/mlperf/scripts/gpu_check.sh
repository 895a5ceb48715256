#!/usr/bin/env bash
# The H200 plan of the llama recipe, run for real on a lent GPU machine (no network there).
#
#   plugins/mlperf/scripts/gpu_check.sh              # detect, plan, check the plan, run Server + Offline
#   plugins/mlperf/scripts/gpu_check.sh --plan-only  # detect (or GPU_CHECK_FACTS), plan and check only
#
# Environment: OUT (where everything is written; default ./gpu-check-out), GPU_CHECK_FACTS (a
# saved facts file instead of detecting), GPU_CHECK_MODEL (a local model directory; default:
# the tiny Llama built here), CMX_PYTHON (default: .venv/bin/python, else python3),
# GPU_CHECK_DURATION_S (LoadGen min_duration, default 5).
#
# Uses only the copied working tree and what is installed on the machine. vLLM and torch may
# be missing there: with `import vllm` working the runs go through vLLM (openai-http SUT,
# `vllm serve` with the planned TP/DP); else, with CUDA torch, through hf-llm on the GPU
# (--backend=transformers); else the plan is checked and the script fails, saying why.
# Every step is bounded by `timeout`; the whole script stays under 8 minutes.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"
OUT="${OUT:-$root/gpu-check-out}"
mkdir -p "$OUT"
PY="${CMX_PYTHON:-}"
if [[ -z "$PY" ]]; then
  if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
duration="${GPU_CHECK_DURATION_S:-5}"
plan_only=0
[[ "${1:-}" == "--plan-only" ]] && plan_only=1
TAGS="mlperf,inference,llama,h200"
log() { echo "gpu_check: $*" | tee -a "$OUT/gpu_check.log" >&2; }

log "python: $PY; output: $OUT"
if ! timeout 60 "$PY" -c "import cmx_core, cmx_mlperf, cmx_detect" 2>>"$OUT/gpu_check.log"; then
  log "cmx is not importable by $PY: installing the checkout without dependencies (no network)"
  timeout 180 "$PY" -m pip install -q --no-index --no-deps --no-build-isolation \
    -e . -e plugins/detect -e plugins/mlperf >>"$OUT/gpu_check.log" 2>&1 \
    || { log "FAIL: cannot install cmx here (hatchling missing?); set CMX_PYTHON to a Python with cmx"; exit 2; }
fi
cmx=("$PY" -m cmx_core)

# --- what the machine is ------------------------------------------------------------------
{ command -v nvidia-smi >/dev/null && timeout 30 nvidia-smi; } >"$OUT/nvidia-smi.txt" 2>&1 || true
{ command -v nvidia-smi >/dev/null && timeout 30 nvidia-smi -q -x; } >"$OUT/nvidia-smi-q.xml" 2>&1 || true
timeout 60 "$PY" - >"$OUT/versions.txt" 2>&1 <<'PY' || true
import importlib, platform, sys
print("python", sys.version.split()[0], platform.machine())
for name in ("cmx_core", "cmx_mlperf", "torch", "transformers", "vllm", "mlperf_loadgen"):
    try:
        mod = importlib.import_module(name)
        print(name, getattr(mod, "__version__", "installed"))
    except Exception as exc:  # report, never fail: this is the inventory
        print(name, "MISSING:", type(exc).__name__, exc)
try:
    import torch
    print("cuda available", torch.cuda.is_available(), torch.version.cuda)
except Exception:
    pass
PY
cat "$OUT/versions.txt" >&2
if [[ -n "${GPU_CHECK_FACTS:-}" ]]; then
  cp "$GPU_CHECK_FACTS" "$OUT/facts.json"
else
  timeout 120 "${cmx[@]}" detect --json >"$OUT/facts.json"
fi

# --- the plan, and the check that it is what the planner chooses ----------------------------
inputs=()
[[ -n "${GPU_CHECK_MODEL:-}" ]] && inputs+=("--model_path=$GPU_CHECK_MODEL")
backend=vllm
if ! timeout 120 "$PY" -c "import vllm" 2>/dev/null; then
  if timeout 120 "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    backend=transformers
    log "vLLM is NOT installed here: the runs use hf-llm on the GPU (--backend=transformers)"
  else
    backend=none
    log "neither vLLM nor CUDA torch is installed here: only the plan can be checked"
  fi
fi
timeout 120 "${cmx[@]}" plan --tags="$TAGS" --facts "$OUT/facts.json" --executor local --json \
  "${inputs[@]}" >"$OUT/plan.json"
timeout 60 "$PY" - "$OUT/plan.json" "$OUT/facts.json" "${GPU_CHECK_MODEL:-}" >"$OUT/plan-check.txt" <<'PY'
import json, sys
from pathlib import Path
from cmx_mlperf.llm import vllm_plan

plan, facts, model = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
devices = facts["facts"]["gpus"]["devices"]
root = next(n for n in plan["nodes"] if n["recipe"] == "mlperf-inference-llama")
step = next(s for s in root["steps"] if s["id"] == "http")
params = step["rendered"]["sut_params"]
launch = [str(a) for a in params["launch"]]
weights = vllm_plan.weights_bytes_from_dir(Path(model)) if model else 0.0
split = vllm_plan.choose(len(devices), min(d["memory_total_bytes"] for d in devices), weights)
got = (int(launch[launch.index("--tensor-parallel-size") + 1]), int(launch[launch.index("--data-parallel-size") + 1]))
print("launch:", " ".join(launch))
print("planner:", split.tensor_parallel, split.data_parallel, split.reason)
print("concurrency:", params["concurrency"])
if got != (split.tensor_parallel, split.data_parallel):
    sys.exit(f"plan TP/DP {got} differs from vllm_plan.choose ({split.tensor_parallel}, {split.data_parallel})")
if int(params["concurrency"]) != int(launch[launch.index("--max-num-seqs") + 1]) * split.data_parallel:
    sys.exit("plan concurrency is not max_num_seqs x data_parallel")
PY
cat "$OUT/plan-check.txt" >&2
log "plan matches the planner"
[[ $plan_only == 1 ]] && exit 0
[[ $backend == none ]] && { log "FAIL: nothing can run here (no vLLM, no CUDA torch)"; exit 3; }

# --- two short bounded runs ---------------------------------------------------------------
status=0
for scenario in Server Offline; do
  log "running $scenario through $backend (min_duration ${duration}s)"
  if timeout 200 "${cmx[@]}" run recipe --tags="$TAGS" --facts "$OUT/facts.json" --executor local --json \
      --output "$OUT/run-$scenario" --backend="$backend" --scenario="$scenario" --duration_s="$duration" \
      --timeout_s=180 "${inputs[@]}" >"$OUT/result-$scenario.json" 2>"$OUT/run-$scenario.log"; then
    log "$scenario finished: $("$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d.get('outputs', d))[:400])" "$OUT/result-$scenario.json")"
  else
    status=1
    log "FAIL: $scenario (exit $?); last lines:"; tail -n 15 "$OUT/run-$scenario.log" >&2
  fi
done
exit $status
