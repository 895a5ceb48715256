#!/bin/sh
# Run on a GPU host from the repository root: installs cmx-core and cmx-detect into a private
# virtualenv (reusing the host's site-packages for pluggy, pyyaml, nvidia-ml-py... when there is
# no package index), prints `cmx detect --json`, and records the machine as a fixture.
#   OUT=/some/dir sh plugins/detect/scripts/gpu_host_check.sh
# Then copy $OUT/fixture into plugins/detect/src/cmx_detect/fixtures/<name>/ and
# $OUT/facts.json into examples/facts/<name>.json (regenerate it with --replay <name>).
set -eu
OUT=${OUT:-$(mktemp -d)}
VENV=$(mktemp -d)/venv
python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q --no-build-isolation -e . -e plugins/detect 2>"$OUT/pip.log" \
  || "$VENV/bin/pip" install -q --no-deps --no-build-isolation -e . -e plugins/detect
export CMX_HOME="$OUT/cmx-home"
"$VENV/bin/cmx" detect --json --record "$OUT/fixture" > "$OUT/facts.json"
"$VENV/bin/cmx" detect --replay "$OUT/fixture"
# the raw views the fallback merges, kept beside the NVML recording (fixture/nvml.json)
nvidia-smi -q -x > "$OUT/fixture/nvidia-smi-q.xml" 2>/dev/null || true
nvidia-smi -L > "$OUT/fixture/nvidia-smi-L.txt" 2>&1 || true
nvidia-smi topo -m > "$OUT/fixture/nvidia-smi-topo-m.txt" 2>&1 || true
# the same node with NVML hidden: the fallback must agree with NVML device by device
"$VENV/bin/python" - "$OUT/fixture" <<'PY'
import json, sys
from cmx_detect.gpus import detect_gpus
from cmx_detect.replay import FixtureSource
from cmx_detect.convert import to_data
src = sys.argv[1]
print(json.dumps({"nvml": to_data(detect_gpus(FixtureSource(src)))["devices"][:1],
                  "fallback": to_data(detect_gpus(FixtureSource(src, hide=["nvml"])))["devices"][:1]}, indent=1))
PY
cat "$OUT/facts.json"
