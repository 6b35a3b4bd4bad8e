# Source on a lent GPU machine, from the repository root, with .gpu/ carried (scripts/gpu_bundle.py):
#   source scripts/gpu_env.sh && python3 scripts/effectiveness.py --only 'idcm-gpu-rerank'
# Unpacks the collections to ../shared/data and the Pyserini caches to out/, installs the few
# packages the machine lacks into /tmp/ckqti-site, and points ckqti at the float16 MiniLM copy.
if [ ! -d .gpu ]; then echo "gpu_env.sh: no .gpu/ here (carry it; see scripts/gpu_bundle.py)" >&2; return 1; fi
mkdir -p ../shared/data
[ -d ../shared/data/scifact ] || tar -xzf .gpu/data.tar.gz -C ../shared/data || return 1
tar -xzf .gpu/cache.tar.gz || return 1
# installed again when the bundle's wheels differ from those installed (a warm machine keeps /tmp)
if [ "$(ls .gpu/wheels)" != "$(cat /tmp/ckqti-site/.wheels 2>/dev/null)" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/ckqti-site \
        .gpu/wheels/*.whl || return 1
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/ckqti-site \
        .gpu/wheels/*.tar.gz || return 1
    ls .gpu/wheels > /tmp/ckqti-site/.wheels
fi
export PYTHONPATH="$PWD:/tmp/ckqti-site${PYTHONPATH:+:$PYTHONPATH}"
export CKQTI_MINILM_DIR="$PWD/.gpu/minilm"
export PYTHONUNBUFFERED=1
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
