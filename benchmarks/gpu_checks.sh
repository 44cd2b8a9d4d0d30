#!/usr/bin/env bash
# The GPU checks, run as one script on a machine with CUDA GPUs. A lent GPU's time is short (15 minutes a
# session, its start included; one command at most 10): each stage has its own time limit, so a stage
# that runs long costs only itself, and the default plan fits one command of about 9 minutes.
#
#   OUT=/tmp/gpu-out bash benchmarks/gpu_checks.sh [stage ...]
# stages: env checks accuracy compute (the default: about 580 s at most), or singly gpu-tests suite
# slow-suite; checks = gpu-tests, suite and slow-suite at the same time (the functional checks: none of
# them times anything), then the timed benchmarks alone: accuracy (profile, advise and validate at three
# configurations: whether the pick is right; every validate record and profile carries each rank's peak
# allocated memory beside the memory model's prediction) and compute (two passes, the second reversed).
# Time limits: CHECKS_S (200), ACCURACY_S (280), COMPUTE_S (90); ITERATIONS (12) per validate;
# ACCURACY_CONFIGS (e.g. "4r-3200") runs only those configurations (a lease's last minutes). Accuracy
# comes first and gets what its three configurations took on three H200 leases (244-250 s at 12-15
# iterations; 150 s finished one of them), and the profile's in-flight timing (a few s per profile): a
# cut-off compute stage still leaves points measured.
#
# Logs and results are written to $WORK (/tmp/gpu-work) and packed after every stage into
# $OUT/gpu-checks.tgz, beside $OUT/summary.txt (one line per stage): two files, so everything comes back
# from a lent machine (it returns at most 8) even when the command is cut off.
# decent_dp and loguru may come as wheels in .whl/ (installed into /tmp/site when present).
set -u
OUT=${OUT:-/tmp/gpu-out}
WORK=${WORK:-/tmp/gpu-work}
mkdir -p "$OUT" "$WORK"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PWD:/tmp/site"
else
  export PYTHONPATH="$PWD"
fi
# as the README's set-up does (the `rtmodel` command and its distribution metadata), offline; INSTALL=0 skips
if [ "${INSTALL:-1}" != 0 ]; then
  python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$WORK/install.log" 2>&1 \
    || echo "editable install failed (see install.log)" | tee -a "$OUT/summary.txt"
fi
stages=${*:-env checks accuracy compute}
for s in $stages; do  # a mistyped stage stops the run before any stage spends the lease
  case $s in env|checks|gpu-tests|suite|slow-suite|compute|accuracy) ;; *) echo "unknown stage $s"; exit 2 ;; esac
done
workers=$(( $(nproc) > 4 ? ($(nproc) - 4) / 2 : 1 ))  # each of the two CPU suites, beside the GPU tests
# the device's Python has pytest but maybe not its plugins (bring them as wheels in .whl/): use them if there
parallel=$(python3 -c "import xdist" 2>/dev/null && echo "-n $workers")
limit_each=$(python3 -c "import pytest_timeout" 2>/dev/null && echo "--timeout 150")

pack() {  # everything in $WORK, packed whole, replacing the last pack only once the new one is complete
  tar czf "/tmp/gpu-checks.tgz" -C "$WORK" . && mv -f /tmp/gpu-checks.tgz "$OUT/gpu-checks.tgz"
}

stage() {  # stage NAME LIMIT_S COMMAND...: run with a time limit, log to $WORK/NAME.log, print its tail
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$WORK/$name.log" 2>&1
  local rc=$?
  echo "=== $name: rc $rc in $((SECONDS - t0)) s (limit $limit s)" | tee -a "$OUT/summary.txt"
  tail -n 6 "$WORK/$name.log"
}

for s in $stages; do
  case $s in
    env) stage env 30 bash -c 'nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)"; python3 -c "
import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.nccl.version(),
torch.cuda.get_device_name(0)); import decent_dp, loguru; print(\"decent_dp ok\")"' ;;
    gpu-tests) stage gpu-tests 150 python3 -m pytest -q -p no:cacheprovider -m gpu -x -rs tests/ ;;
    suite) stage suite 120 python3 -m pytest -q -p no:cacheprovider -m "not slow and not emulated and not gpu" \
             $parallel -rf tests/ ;;
    slow-suite) stage slow-suite 300 python3 -m pytest -q -p no:cacheprovider -m "slow and not emulated and not gpu" \
             $parallel -rf tests/ ;;
    checks) limit=${CHECKS_S:-200}  # -v: a stage cut off at its limit still shows what passed and failed
            stage gpu-tests "$limit" python3 -m pytest -v -p no:cacheprovider -m gpu -rs $limit_each tests/ &
            stage suite "$limit" python3 -m pytest -q -p no:cacheprovider -m "not slow and not emulated and not gpu" \
              $parallel -rf $limit_each tests/ &
            stage slow-suite "$limit" python3 -m pytest -v -p no:cacheprovider -m "slow and not emulated and not gpu" \
              $parallel -rf $limit_each tests/ &
            wait ;;
    compute) stage compute "${COMPUTE_S:-90}" python3 -m benchmarks.gpu_compute --device cuda --out-dir "$WORK" \
               --repeats 2 --budget-s "$(( ${COMPUTE_S:-90} - 15 ))"
             # what this host says of the presets' host cost, and today's model on its points (no GPU needed)
             stage host-cost 20 python3 -m benchmarks.gpu_host_cost "$WORK/gpu-compute.json"
             stage rescore 20 python3 -m benchmarks.gpu_compute_rescore "$WORK/gpu-compute.json" \
               --md "$WORK/rescore.md" ;;
    accuracy) stage accuracy "${ACCURACY_S:-280}" python3 -m benchmarks.gpu_accuracy --out-dir "$WORK" \
                --iterations "${ITERATIONS:-12}" ${ACCURACY_CONFIGS:+--configs $ACCURACY_CONFIGS} ;;
  esac
  pack
done
