#!/usr/bin/env bash
# The prepared device check (≤ 6 minutes on one GPU). Here, once: `make gpu-wheels` (wheels into .whl/) and
# `make run` or `growcert prepare --dataset shakespeare --out data/prepared/shakespeare` (the prepared arrays
# travel with it). On the GPU machine, from the repository root, carrying .whl and data/prepared/shakespeare:
#     bash benchmarks/gpu_check.sh            # or: GPU_CHECK_ARGS="--smoke" on a CPU, to check the plumbing
# It needs python3 with torch and xarray; the missing packages (zarr, numcodecs, jsonschema, ...) come from
# .whl/ without an index, growcert from src/ through a `growcert` shim on PATH, so every stage runs as its
# `growcert <stage>` command. Output: the CUDA-marked tests, then benchmarks/gpu_check.py's tables; the
# tables are also written under ${GPU_CHECK_OUT:-$OUT or /tmp}/gpu-check.
# P2's grokking headline at the paper's nominal task (p 97, batch 512, PyTorch's default init, 9 arms x 8 seeds, up to
# 40,000 steps each: more than one lent session) is configs/grokking-nominal.yaml, for a GPU allocation of its own;
# this check times one of its units and prints the whole config's worst case in GPU-hours at that rate.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python=${PYTHON:-python3}
site=$(mktemp -d)
if ! "$python" -c "import zarr, numcodecs, jsonschema" 2>/dev/null; then  # the GPU machine lacks them
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl
fi
export PYTHONPATH="$PWD/src:$site${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$site/bin"
printf '#!/bin/sh\nexec %s -m growcert.cli "$@"\n' "$(command -v "$python")" > "$site/bin/growcert"
chmod +x "$site/bin/growcert"
export PATH="$site/bin:$PATH"
out=${GPU_CHECK_OUT:-${OUT:-/tmp}}/gpu-check
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true

echo "== CUDA-marked tests (capture exactness on CUDA, same seed -> same checkpoint on CUDA)"
"$python" -m pytest -q -p no:cacheprovider -m cuda tests/test_capture.py tests/test_train.py -rs || status=$?
if [ "${status:-0}" -gt 1 ] && [ "${status:-0}" -ne 5 ]; then exit "$status"; fi  # 5: none collected (no CUDA)
[ "${status:-0}" -eq 1 ] && echo "CUDA tests FAILED (see above); the sweep runs anyway"

echo "== P1 width sweep through growcert train / dump / estimate-alignment"
# shellcheck disable=SC2086
"$python" benchmarks/gpu_check.py --out "$out" ${GPU_CHECK_ARGS:-}
