#!/usr/bin/env bash
# Issue #13's GPU measurements, for one call of a lent GPU machine (no network there).
#
# On your machine first: bash ../shared/tools/gpu/prepare.sh  (makes .gpu-env/, see its README)
# Then, through the device tool with carry [".gpu-env"], one or more parts per call (a call may
# run 10 minutes; the session's device time is limited, so pick):
#     bash benchmarks/gpu_session.sh runs          # the two GPU configs: wall, GPU busy share
#     bash benchmarks/gpu_session.sh encoders      # img/s per encoder: default, fused+bf16, +compile
#     bash benchmarks/gpu_session.sh distance      # distance transforms: scipy, edt, CuPy
#     bash benchmarks/gpu_session.sh naive         # ViT-H: a plain SamPredictor loop vs intrabench run
#     bash benchmarks/gpu_session.sh all
# Each benchmark's whole output goes to $OUT/<part>.txt (the device tool brings $OUT back),
# with nvidia-smi's view of the card and a 250 ms utilisation trace beside it; the last lines
# of each are printed. Record the figures, machine and command in docs/performance.md.
# The GPU image has no SimpleITK (a stand-in is carried), so these use generated phantoms only
# (bench_vs_naive.py --source generated); the --proxy-ms mode reads NIfTI files and is not run here.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
if [ ! -f .gpu-env/setup.sh ]; then
    echo "no .gpu-env/: run bash ../shared/tools/gpu/prepare.sh here, then carry .gpu-env" >&2
    exit 2
fi
# shellcheck disable=SC1091
source .gpu-env/setup.sh
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || echo "no nvidia-smi" > "$out/nvidia-smi.txt"

part() {  # part NAME SECONDS COMMAND...: run with a time limit, output to $OUT/NAME.txt
    local name=$1 limit=$2
    shift 2
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 250 \
        > "$out/$name.utilisation.csv" 2>/dev/null &
    local sampler=$!
    local started=$SECONDS
    timeout "$limit" "$@" > "$out/$name.txt" 2>&1
    local status=$?
    kill "$sampler" 2>/dev/null
    echo "== $name: exit $status after $((SECONDS - started)) s ($*)"
    tail -n 4 "$out/$name.txt"
}

parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(all)
for wanted in "${parts[@]}"; do
    case $wanted in
        runs|all)
            part gpu-2d-refine 280 python3 benchmarks/bench_gpu_run.py \
                benchmarks/configs/gpu-2d-refine.yaml
            part gpu-3d-refine 280 python3 benchmarks/bench_gpu_run.py \
                benchmarks/configs/gpu-3d-refine.yaml ;;&
        encoders|all)
            part encoders 420 python3 benchmarks/bench_throughput.py --part encoders --no-tiny \
                --device cuda --encoder-options "" "attention=fused,encoder_weights=bf16" \
                "attention=fused,encoder_weights=bf16,compile=true" ;;&
        distance|all)
            part distance 200 python3 benchmarks/bench_distance.py --device cuda ;;&
        naive|all)
            part naive 400 python3 benchmarks/bench_vs_naive.py --source generated --full \
                --device cuda --shape 160 512 512 ;;
        runs|encoders|distance) ;;
        *) echo "unknown part '$wanted' (runs, encoders, distance, naive, all)" >&2; exit 2 ;;
    esac
done
