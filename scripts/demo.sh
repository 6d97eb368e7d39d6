#!/usr/bin/env bash
# The main job: a local stack with the gateway in front of a real 3-node
# cluster, exercised end to end, then torn down (also on failure).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.stack
if [ -f "$dir/stack.json" ]; then .venv/bin/kgw dev down --dir "$dir" || true; fi
trap '.venv/bin/kgw dev down --dir "$dir" >/dev/null 2>&1 || true' EXIT
.venv/bin/kgw dev up --dir "$dir"
.venv/bin/kgw dev demo --dir "$dir"
