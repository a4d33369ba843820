#!/usr/bin/env bash
# Reproduce the nearest-token case study (docs/results/case_study_nearest_tokens.md; CPU, one core): three runs of one task
# on the offline MiniLM backbone - Prompt Tuning, PT + Random IPT, PT + Encoder IPT (the category-pretrained table
# and TextCNN body, as in benchmarks/accuracy_groups.yaml) - then the nearest-token report of each run on three
# official validation rows, read from $IPT_ASSETS/superglue/<TASK>/val.jsonl by idx (no copy in the repo):
#   CB val idx 0 contradiction, 1 neutral, 2 entailment
#   RTE val idx 0 not_entailment, 1 entailment, 12 not_entailment
# TASK=cb (default) EPOCHS=8 is the accuracy study's budget (~15 minutes); TASK=rte EPOCHS=2 (~45 minutes: RTE
# has ten times CB's training rows). Reports go to docs/case_study/epochs$EPOCHS/<task>_<method>.md.
set -euo pipefail
export IPT_ASSETS=${IPT_ASSETS:-/work/shared/assets}
TASK=${TASK:-cb}
case $TASK in cb) FOLDER=CB; ROWS=0,1,2 ;; rte) FOLDER=RTE; ROWS=0,1,12 ;; *) echo "TASK must be cb or rte" >&2; exit 2 ;; esac
RUNS=${RUNS:-/work/runs-nearest}
EPOCHS=${EPOCHS:-8}
OUT=${OUT:-docs/case_study/epochs$EPOCHS}
EXPORT=exports/textcnn-minilm   # python experiments/pretrain_categories.py --config yamls/pretrain_textcnn.yaml
mkdir -p "$OUT"
OMP_NUM_THREADS=1 python experiments/run.py --config yamls/${TASK}_prompt_tuning.yaml --set train.epochs=$EPOCHS --output-dir "$RUNS" --quiet
OMP_NUM_THREADS=1 python experiments/run.py --config yamls/${TASK}_random_ipt.yaml --set train.epochs=$EPOCHS --output-dir "$RUNS" --quiet
OMP_NUM_THREADS=1 python experiments/run.py --config yamls/${TASK}_encoder_ipt_textcnn.yaml --set train.epochs=$EPOCHS \
  --set instance_wise.pretrained_path=$EXPORT/embedding.safetensors --set instance_wise.encoder_path=$EXPORT \
  --output-dir "$RUNS" --quiet
for m in prompt_tuning random_ipt encoder_ipt_textcnn; do
  OMP_NUM_THREADS=1 python experiments/nearest_tokens.py --run "$RUNS/${TASK}_$m/seed42" \
    --input "$IPT_ASSETS/superglue/$FOLDER/val.jsonl" --idx $ROWS --top-k 5 --output "$OUT/${TASK}_$m.md" --overwrite
done
