#!/usr/bin/env bash
# Issue #41 on one lent GPU machine (its own python3 with torch and transformers, no network): first the
# efficiency rows on the idle GPU (the roberta-large architecture with random weights, late_layer 12 of 24:
# LPT against Prompt Tuning and P-tuning v2, fp32 with peak memory and bf16; the M-IDPG-PHM op cuts timed in
# the bf16 call), then the late_<task> groups' new rows (groups in benchmarks/accuracy_groups.yaml), seed-major,
# one process per run. What it needs travels in .devcarry/ (git-ignored), made by
#   DATA=late bash benchmarks/prepare_device_carry.sh
# (OpenPrompt's wheel and its missing pure-Python dependencies, MiniLM in fp16 -- upcast here, so the backbone
# differs from the CPU runs' by fp16 rounding of its weights -- and the four tasks' folders). results/ and docs/
# must be moved aside for the call (the 64 MiB transfer).
#
#   bash benchmarks/gpu_late_study.sh [SECONDS] [METHODS]
# Finished runs (metrics.json, config.json, log.csv) are packed into $OUT/late_results.tgz every minute and at
# the end; unpack at the repository root and rebuild the tables with
#   python benchmarks/accuracy.py --group late_mr --report-only   (and the same for subj, agnews, mpqa)
set -u
LIMIT=${1:-540}
METHODS=${2:-"LPT-NPG;LPT-APPG;LPT-MPPG;Late prompt (plain);Random IPT (late);P-tuning v2;S-IDPG-PHM (late)"}
START=$(date +%s)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
source benchmarks/gpu_runs.sh
device_setup data.tgz || exit 1
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv

# 1. efficiency on the idle GPU (the targets: LPT's step and peak memory <= 0.7x Prompt Tuning's at l = 12);
# SKIP_EFFICIENCY=1 goes straight to the study (a second call on finished runs: put them under results/ first)
[ -n "${SKIP_EFFICIENCY:-}" ] || {
E="benchmarks/efficiency.py --backbone random:roberta-large --batch-size 16 --seq-len 128 --device cuda --data-root /tmp/assets --overwrite"  # $OUT is scratch
timeout 150 $PY $E --rounds 2 --steps 5 --methods "Prompt Tuning,P-tuning v2,LPT-NPG,LPT-APPG,Late prompt (plain)" \
  --output "$OUT/rl_fp32.md" > "$OUT/rl_fp32.log" 2>&1 || echo "fp32 efficiency failed or timed out: rl_fp32.log"
timeout 90 $PY $E --rounds 2 --steps 5 --no-memory --mixed-precision bf16 --output "$OUT/rl_bf16.md" \
  --methods "Prompt Tuning,P-tuning v2,PEFT prefix tuning,LPT-NPG,Late prompt (plain),M-IDPG-PHM (cached [CLS]),M-IDPG-PHM (hidden injection)" \
  > "$OUT/rl_bf16.log" 2>&1 || echo "bf16 efficiency failed or timed out: rl_bf16.log"
echo "efficiency done at $(( $(date +%s) - START )) s"
}

# 2. the late groups' new rows
pack() { pack_runs late_ late_results; }
LEFT=$(( LIMIT - ($(date +%s) - START) ))
STOP_MIN=$(awk "BEGIN{print ($LEFT - 100) / 60}")  # a run started later than this would not finish
pids=()
for t in mr subj agnews mpqa; do
  $PY benchmarks/accuracy.py --group late_$t --workers ${WORKERS:-3} --stop-after "$STOP_MIN" --docs /tmp/docs \
    --methods "$METHODS" --set plm.model_path=/tmp/minilm --set train.device=cuda > "$OUT/late_$t.log" 2>&1 &
  pids+=($!)
done
wait_runs 15 pack "${pids[@]}"
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv 2>/dev/null
for t in mr subj agnews mpqa; do tail -n 4 "$OUT/late_$t.log"; done
