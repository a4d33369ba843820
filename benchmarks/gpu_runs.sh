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
