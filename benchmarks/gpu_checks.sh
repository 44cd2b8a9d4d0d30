#!/usr/bin/env bash
# The GPU checks, run as one script on a machine with CUDA GPUs (a lent GPU's time is short: each stage
# has its own time limit and writes its log under $OUT, so a stage that runs long costs only itself).
#
#   OUT=/tmp/gpu-out bash benchmarks/gpu_checks.sh [stage ...]
# stages: env gpu-tests suite slow-suite checks compute accuracy (default: env gpu-tests suite compute accuracy);
# checks = gpu-tests and slow-suite at the same time
# decent_dp and loguru may come as wheels in .whl/ (installed into /tmp/site when present).
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PWD:/tmp/site"
else
  export PYTHONPATH="$PWD"
fi
# as the README's set-up does (the `rtmodel` command and its distribution metadata), offline
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 \
  || echo "editable install failed (see install.log)"
stages=${*:-env gpu-tests suite compute accuracy}
workers=$(( $(nproc) > 2 ? $(nproc) - 2 : 1 ))

stage() {  # stage NAME LIMIT_S COMMAND...: run with a time limit, log to $OUT/NAME.log, print its tail
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "=== $name: rc $rc in $((SECONDS - t0)) s"
  tail -n 6 "$OUT/$name.log"
}

for s in $stages; do
  case $s in
    env) stage env 60 bash -c 'nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)"; python3 -c "
import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.nccl.version(),
torch.cuda.get_device_name(0)); import decent_dp, loguru; print(\"decent_dp ok\")"' ;;
    gpu-tests) stage gpu-tests 150 python3 -m pytest -q -p no:cacheprovider -m gpu -x -rs tests/ ;;
    suite) stage suite 120 python3 -m pytest -q -p no:cacheprovider -m "not slow and not emulated and not gpu" \
             -n "$workers" -rf tests/ ;;
    slow-suite) stage slow-suite 300 python3 -m pytest -q -p no:cacheprovider -m "slow and not emulated and not gpu" \
             -n "$workers" -rf tests/ ;;
    # the functional checks together (none of them times anything), then the timed benchmarks alone
    checks) limit=${CHECKS_S:-170}  # -v: a stage cut off at its limit still shows what passed and failed
            stage gpu-tests "$limit" python3 -m pytest -v -p no:cacheprovider -m gpu -rs --timeout 150 tests/ &
            stage slow-suite "$limit" python3 -m pytest -v -p no:cacheprovider -m "slow and not emulated and not gpu" \
              -n "$((workers / 2))" -rf --timeout 150 tests/ &
            stage reruns "$limit" python3 -m pytest -q -p no:cacheprovider -m "not slow and not gpu" -n 3 -rf \
              tests/test_first_contact.py tests/test_docs.py tests/test_consensus.py tests/test_topologies.py &
            wait ;;
    compute) stage compute 180 python3 -m benchmarks.gpu_compute --device cuda --out-dir "$OUT"
             # what this host says of the presets' host cost, and today's model on its points (no GPU needed)
             stage host-cost 30 python3 -m benchmarks.gpu_host_cost "$OUT/gpu-compute.json"
             stage rescore 30 python3 -m benchmarks.gpu_compute_rescore "$OUT/gpu-compute.json" ;;
    accuracy) stage accuracy "${ACCURACY_S:-240}" python3 -m benchmarks.gpu_accuracy --out-dir "$OUT" \
                --iterations "${ITERATIONS:-20}" ;;
    *) echo "unknown stage $s"; exit 2 ;;
  esac
done
