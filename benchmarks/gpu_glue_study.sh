#!/usr/bin/env bash
# Issue #30's GLUE study (groups glue_mrpc / glue_stsb / glue_qnli / glue_qqp) on one lent GPU machine,
# which has its own python3 (torch, transformers) and no network. What it needs travels in .devcarry/
# (git-ignored): the wheels of OpenPrompt and its missing pure-Python dependencies (whl/), the offline
# MiniLM in fp16 (minilm/: 45 MB instead of 91 MB, to fit the 64 MiB transfer; upcast back to fp32 here, so
# the backbone differs from the CPU runs' by fp16 rounding of its weights) and the GLUE folders (glue.tgz).
#
#   [CHECK_SPEED=1] bash benchmarks/gpu_glue_study.sh [SECONDS] [extra --set overrides for every run ...]
# (.devcarry/ from benchmarks/prepare_device_carry.sh; CHECK_SPEED=1 first times one training step per method
# with benchmarks/efficiency.py into $OUT/speed.md.)
#
# Runs the four groups at once (one process per run, 15 in all), seed-major, starts no run after
# STOP_AFTER minutes, and ends by SECONDS (default 540): runs still going then are dropped (they resume on
# the next call). Finished runs (metrics.json, config.json, log.csv) are packed into $OUT/glue_results.tgz
# every minute and at the end; unpack it at the repository root and rebuild the tables with
#   python benchmarks/accuracy.py --group glue_mrpc --report-only   (and the same for the other three)
set -u
LIMIT=${1:-540}; shift || true
START=$(date +%s)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
source benchmarks/gpu_runs.sh
device_setup glue.tgz || exit 1
if [ -n "${CHECK_SPEED:-}" ]; then  # step time per method on the idle GPU first: is IDPG still ~10x Prompt Tuning?
  timeout 150 $PY benchmarks/efficiency.py --backbone /tmp/minilm --batch-size 32 --rounds 2 --steps 5 --no-memory --overwrite \
    --methods "Prompt Tuning,P-tuning v2,S-IDPG-PHM,M-IDPG-PHM (cached [CLS]),M-IDPG-PHM (uncached [CLS]),M-IDPG-PHM (hidden injection)" \
    --data-root /tmp/assets --output "$OUT/speed.md" > "$OUT/speed.log" 2>&1 || echo "speed check failed: $OUT/speed.log"
fi
SETS=(--set plm.model_path=/tmp/minilm)
for s in "$@"; do SETS+=(--set "$s"); done

pack() { pack_runs glue_ glue_results results/accuracy/glue_*/logs; }

STOP_MIN=$(( (LIMIT - 150) / 60 ))  # a run started later than this would not finish
# workers by each group's share of the optimizer steps (QQP 15k training rows, QNLI 8k, STS-B 4.6k, MRPC 2.9k)
declare -A W=([glue_qqp]=6 [glue_qnli]=4 [glue_stsb]=3 [glue_mrpc]=2)
pids=()
for g in glue_qqp glue_qnli glue_stsb glue_mrpc; do
  $PY benchmarks/accuracy.py --group $g --workers ${W[$g]} --stop-after $STOP_MIN --docs /tmp/docs "${SETS[@]}" \
    > "$OUT/$g.log" 2>&1 &
  pids+=($!)
done
wait_runs 20 pack "${pids[@]}"
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv 2>/dev/null
for g in glue_qqp glue_qnli glue_stsb glue_mrpc; do tail -n 3 "$OUT/$g.log"; done
