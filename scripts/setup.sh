#!/usr/bin/env bash
# All set-up on a fresh machine: torch first (the local CPU wheel; any other spec pulls
# GB of CUDA packages), then the project with its dev and bench extras.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
"$PYTHON" -m pip install -q "torch==2.13.0"
"$PYTHON" -m pip install -q -e ".[dev,bench]"
# Numba's search kernels compiled now rather than in a user's first searches (10-20 s each of four)
"$PYTHON" -m retriever.warm
