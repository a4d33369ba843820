# Sourced by the lent-GPU study scripts (gpu_glue_study.sh, gpu_late_study.sh): pack finished runs, and wait for
# the group processes with a time limit. Needs OUT, START and LIMIT set.

# pack_runs PATTERN NAME [EXTRA...]: the finished runs (a metrics.json marks one) of results/accuracy/PATTERN into
# $OUT/NAME.tgz (metrics, config, log.csv), plus EXTRA paths; written whole, then renamed
pack_runs() {
  local pattern=$1 name=$2; shift 2
  find results/accuracy -path "*$pattern*" -name metrics.json 2>/dev/null | while read -r m; do
    d=$(dirname "$m"); echo "$d/metrics.json"; echo "$d/config.json"; [ -f "$d/log.csv" ] && echo "$d/log.csv"; done \
    > /tmp/pack.list
  tar czf "$OUT/$name.tgz.tmp" -T /tmp/pack.list "$@" 2>/dev/null
  mv "$OUT/$name.tgz.tmp" "$OUT/$name.tgz"
  echo "packed $(wc -l < /tmp/pack.list) files at $(( $(date +%s) - START )) s"
}

# wait_runs PERIOD PACK_COMMAND PID...: until every PID has ended or LIMIT seconds have passed since START,
# running PACK_COMMAND about once a minute and once at the end
wait_runs() {
  local period=$1 pack=$2; shift 2
  while :; do
    sleep "$period"
    local alive=0 p now
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    now=$(( $(date +%s) - START ))
    [ $(( now % 60 )) -lt "$period" ] && $pack
    [ $alive = 0 ] && break
    [ "$now" -ge "$LIMIT" ] && { echo "time limit $LIMIT s: dropping the runs still going"; break; }
  done
  $pack
}

# device_setup DATA_TGZ: OpenPrompt and its missing dependencies from .devcarry/whl (unless SKIP_INSTALL), the data
# folders unpacked under /tmp/assets (IPT_ASSETS), MiniLM upcast from its fp16 carry to /tmp/minilm; prints the stack
device_setup() {  # an empty DATA_TGZ: no data folders (efficiency falls back to synthetic text)
  local C=.devcarry
  if [ -z "${SKIP_INSTALL:-}" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $C/whl/*.whl || return 1
    export PYTHONPATH=/tmp/site:$PWD
  fi
  mkdir -p /tmp/assets
  if [ -n "$1" ]; then tar xzf "$C/$1" -C /tmp/assets || return 1; fi
  export IPT_ASSETS=/tmp/assets TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
  mkdir -p /tmp/minilm && cp $C/minilm/*.json $C/minilm/vocab.txt /tmp/minilm/ || return 1
  $PY -c "from safetensors.torch import load_file, save_file
sd = load_file('$C/minilm/model_fp16.safetensors')
save_file({k: v.float() if v.is_floating_point() else v for k, v in sd.items()}, '/tmp/minilm/model.safetensors')" || return 1
  $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
}
