#!/usr/bin/env bash
# Reproduce docs/case_study_nearest_tokens.md (CPU, ~5 minutes): 2-epoch CB runs on the offline MiniLM backbone,
# then the nearest-token report of each run on 3 official CB validation rows (docs/case_study/cb_val_rows.jsonl:
# val idx 0 contradiction, 1 neutral, 2 entailment, copied verbatim from $IPT_ASSETS/superglue/CB/val.jsonl).
set -euo pipefail
export IPT_ASSETS=${IPT_ASSETS:-/work/shared/assets}
RUNS=${RUNS:-/work/runs-nearest}
for c in cb_random_ipt cb_prompt_tuning cb_encoder_ipt_textcnn; do
  OMP_NUM_THREADS=1 python experiments/run.py --config yamls/$c.yaml --set train.epochs=2 --output-dir "$RUNS"
done
for c in cb_prompt_tuning cb_random_ipt cb_encoder_ipt_textcnn; do
  OMP_NUM_THREADS=1 python experiments/nearest_tokens.py --run "$RUNS/$c/seed42" \
    --input docs/case_study/cb_val_rows.jsonl --top-k 5 --output docs/case_study/$c.md
done
