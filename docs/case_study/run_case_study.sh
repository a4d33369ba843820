#!/usr/bin/env bash
# Reproduce docs/case_study_nearest_tokens.md (CPU, one core, ~15 minutes): CB runs on the offline MiniLM backbone at
# the accuracy study's budget (8 epochs; Encoder IPT with the category-pretrained table and TextCNN body, as in
# benchmarks/accuracy_groups.yaml), then the nearest-token report of each run on 3 official CB validation rows
# (docs/case_study/cb_val_rows.jsonl: val idx 0 contradiction, 1 neutral, 2 entailment, copied verbatim from
# $IPT_ASSETS/superglue/CB/val.jsonl). EPOCHS=2 gives the first, smoke-scale version of the page.
set -euo pipefail
export IPT_ASSETS=${IPT_ASSETS:-/work/shared/assets}
RUNS=${RUNS:-/work/runs-nearest}
EPOCHS=${EPOCHS:-8}
EXPORT=exports/textcnn-minilm   # python experiments/pretrain_categories.py --config yamls/pretrain_textcnn.yaml
OMP_NUM_THREADS=1 python experiments/run.py --config yamls/cb_prompt_tuning.yaml --set train.epochs=$EPOCHS --output-dir "$RUNS" --quiet
OMP_NUM_THREADS=1 python experiments/run.py --config yamls/cb_random_ipt.yaml --set train.epochs=$EPOCHS --output-dir "$RUNS" --quiet
OMP_NUM_THREADS=1 python experiments/run.py --config yamls/cb_encoder_ipt_textcnn.yaml --set train.epochs=$EPOCHS \
  --set instance_wise.pretrained_path=$EXPORT/embedding.safetensors --set instance_wise.encoder_path=$EXPORT \
  --output-dir "$RUNS" --quiet
for c in cb_prompt_tuning cb_random_ipt cb_encoder_ipt_textcnn; do
  OMP_NUM_THREADS=1 python experiments/nearest_tokens.py --run "$RUNS/$c/seed42" \
    --input docs/case_study/cb_val_rows.jsonl --top-k 5 --output docs/case_study/$c.md
done
