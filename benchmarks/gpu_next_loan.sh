#!/usr/bin/env bash
# Everything that waits for a lent GPU (docs/gpu.md, "For the next loan"), in one call, the most decisive first:
#   1. tests/test_cuda.py: the CUDA tests, #42's `pipeline` on CUDA among them            -> $OUT/test_cuda.log
#      then the pipeline tests, then the suite (FULL=1: the fourth loan's memory / timing steps before the suite)
#   2. #41's measured GPU peak memory, roberta-large shape, l = 12, 16 x 128, fp32           -> $OUT/rl_memory_fp32.md
#   3. the M-IDPG-PHM op-count cuts timed, bf16 and fp32                                      -> $OUT/rl_{bf16,no}.md
#   4. with the time left: the whole suite on the GPU machine                                 -> $OUT/suite.log
# Each step has its own time limit, so a hang costs one step, not the loan. What it needs travels in .devcarry/
# (git-ignored), made by `bash benchmarks/prepare_device_carry.sh` (the wheels and MiniLM; its data archive is
# optional here). results/accuracy/ must be moved aside for the 64 MiB transfer.
#
#   bash benchmarks/gpu_next_loan.sh [SECONDS]      (the run tool: carry [".devcarry"], timeout_s >= SECONDS + 30)
set -u
LIMIT=${1:-420}
START=$(date +%s)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
source benchmarks/gpu_runs.sh
device_setup "$(cd .devcarry 2>/dev/null && ls data.tgz glue.tgz 2>/dev/null | head -n 1)" || exit 1
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv 2>/dev/null
left() { echo $(( LIMIT - ($(date +%s) - START) )); }
step() {  # step NAME SECONDS COMMAND...: run with a time limit, say how it ended
  local name=$1 secs=$2; shift 2
  timeout "$secs" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: rc=$? at $(( $(date +%s) - START )) s"; tail -n 3 "$OUT/$name.log"
}

step test_cuda 150 $PY -m pytest -q -p no:cacheprovider tests/test_cuda.py
XDIST=""; $PY -c "import xdist" 2>/dev/null && XDIST="-n 8"  # the image may lack pytest-xdist
# the CPU pipeline tests on a CUDA machine: transformers 5's pipeline moves the model to cuda:0 (docs/gpu.md, fourth loan)
step pipelines 120 $PY -m pytest -q -p no:cacheprovider $XDIST -rf tests/test_hf_pipelines.py tests/test_hf_trainer_habits.py
[ -n "${FULL:-}" ] || { REST=$(( $(left) - 15 )); [ "$REST" -gt 60 ] && step suite "$REST" $PY -m pytest -q -p no:cacheprovider $XDIST -rf tests \
  --deselect tests/test_cuda.py --deselect tests/test_data_sources.py --deselect tests/test_console.py; echo "done"; exit 0; }
E="benchmarks/efficiency.py --backbone random:roberta-large --batch-size 16 --seq-len 128 --device cuda --overwrite"  # $OUT is scratch
step rl_memory_fp32 90 $PY $E --late-layer 12 --memory-only --output "$OUT/rl_memory_fp32.md" \
  --methods "Prompt Tuning,P-tuning v2,LPT-NPG,LPT-MPPG"
for mp in bf16 no; do
  step rl_$mp 75 $PY $E --rounds 2 --steps 5 --no-memory --mixed-precision $mp --output "$OUT/rl_$mp.md" \
    --methods "Prompt Tuning,P-tuning v2,PEFT prefix tuning,M-IDPG-PHM (cached [CLS]),M-IDPG-PHM (hidden injection),PT + Random IPT"
done
REST=$(( $(left) - 15 ))
XDIST=""; $PY -c "import xdist" 2>/dev/null && XDIST="-n 8"  # the image may lack pytest-xdist
[ "$REST" -gt 60 ] && step suite "$REST" $PY -m pytest -q -p no:cacheprovider $XDIST tests --deselect tests/test_cuda.py
echo "done at $(( $(date +%s) - START )) s"
