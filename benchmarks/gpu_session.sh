#!/usr/bin/env bash
# The GPU measurements (issues #13, #48), for calls of a lent GPU machine (no network there).
#
# On your machine first: bash benchmarks/gpu_prepare.sh  (makes .gpu-runs/, .gpu-lite/ and
# .gpu-mobilesam/: one carried folder per part, each under the 64 MiB a call may carry), and
# after a change to the code or the carried packages bash benchmarks/gpu_rehearse.sh (every
# part on the CPU, tiny, in an environment like the GPU image's: an import that fails there
# fails here). Then, through the device tool, one or more parts per call (a call may run 10
# minutes; device time is limited, so pick; the order and durations: docs/performance.md,
# "The next card session"):
#   carry [".gpu-runs"]:
#     bash benchmarks/gpu_session.sh runs          # the two GPU configs, phantoms read from NIfTI
#                                                  # files: start, steady state, GPU busy share,
#                                                  # the model loop's phases; SAM-Med3D's case
#                                                  # set-up by NumPy vs on the card; the
#                                                  # figures for the proxy's calibration in
#                                                  # $OUT/gpu-*-refine.json (then here:
#                                                  # bench_gpu_run.py --proxy-of CONFIG
#                                                  # --calibrate-from THAT.json)
#     bash benchmarks/gpu_session.sh encoders      # img/s per encoder: default, fused+bf16, +compile
#     bash benchmarks/gpu_session.sh distance      # distance transforms: scipy, edt, CuPy
#     bash benchmarks/gpu_session.sh naive         # ViT-H: plain and careful SamPredictor loops vs
#                                                  # intrabench run, 4 NIfTI phantoms 160 x 512 x
#                                                  # 512 (the start printed apart)
#   carry [".gpu-lite"], right after a .gpu-runs call (it needs the SimpleITK installed there):
#     bash benchmarks/gpu_session.sh lite          # LiteMedSAM: pre-processing on the card (equal
#                                                  # to the bit?), plain and careful loops vs the
#                                                  # run on 3 NIfTI phantoms 128 x 512 x 512 with
#                                                  # 6-10 lesions, 2.5 mm slices (the start
#                                                  # printed apart)
#   carry [".gpu-mobilesam"], right after a .gpu-runs call (the same reason):
#     bash benchmarks/gpu_session.sh mobilesam     # MobileSAM's click refinement: the careful
#                                                  # loop (encoder once per slice and case, decoder
#                                                  # per click, logits fed back) vs the run
#     bash benchmarks/gpu_session.sh served        # MobileSAM served from another process vs in
#                                                  # process (the transport's cost on a card)
# (.gpu-env/ of ../shared/tools/gpu/prepare.sh still works for the parts that read no file.)
# Each benchmark's whole output goes to $OUT/<part>.txt (the device tool brings $OUT back),
# with nvidia-smi's view of the card and a 250 ms utilisation trace beside it; the last lines
# of each are printed. Record the figures, machine and command in docs/performance.md.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
carried=""
# every carried folder present (a machine kept warm may still hold an earlier call's), the
# runs folder first: the others' parts need its SimpleITK
for folder in .gpu-runs .gpu-lite .gpu-mobilesam .gpu-env; do
    [ -f "$folder/setup.sh" ] || continue
    carried="$carried $folder"
    # shellcheck disable=SC1090
    source "$folder/setup.sh" || exit 2
done
if [ -z "$carried" ]; then
    echo "nothing carried: run bash benchmarks/gpu_prepare.sh here, then carry .gpu-runs," \
        ".gpu-lite or .gpu-mobilesam" >&2
    exit 2
fi
python3 -c "from intrabench.io.machine import describe_machine as d; import json; print(json.dumps(d()))" \
    > "$out/machine.json" 2>&1
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
                benchmarks/configs/gpu-2d-refine.yaml --figures-out "$out/gpu-2d-refine.json"
            part gpu-3d-refine 250 python3 benchmarks/bench_gpu_run.py \
                benchmarks/configs/gpu-3d-refine.yaml --figures-out "$out/gpu-3d-refine.json"
            part case-setup 60 python3 benchmarks/bench_case_setup.py --device cuda ;;&
        encoders|all)
            part encoders 420 python3 benchmarks/bench_throughput.py --part encoders --no-tiny \
                --device cuda --encoder-options "" "attention=fused,encoder_weights=bf16" \
                "attention=fused,encoder_weights=bf16,compile=true" ;;&
        distance|all)
            part distance 200 python3 benchmarks/bench_distance.py --device cuda ;;&
        naive|all)
            part naive 420 python3 benchmarks/bench_vs_naive.py --full --device cuda \
                --cases 4 --shape 160 512 512 ;;&
        lite)
            part lite-preprocess 120 python3 benchmarks/bench_lite_preprocess.py --device cuda
            part lite 420 python3 benchmarks/bench_real_cpu.py --device cuda --no-real --repeats 1 \
                --phantom-source nifti --phantoms 3 --phantom-shape 128 512 512 \
                --phantom-spacing 2.5 0.7 0.7 --phantom-lesions 6 10 --bf16 ;;
        mobilesam)
            part mobilesam-clicks 300 python3 benchmarks/bench_mobilesam_clicks.py --device cuda \
                --cases 4 --shape 160 512 512 ;;
        served)
            part served 240 python3 benchmarks/bench_served_model.py --device cuda \
                --only mobilesam-refine --phantoms 4 --shape 160 512 512 ;;
        runs|encoders|distance|naive|all) ;;
        *) echo "unknown part '$wanted' (runs, encoders, distance, naive, lite, mobilesam," \
               "served, all)" >&2; exit 2 ;;
    esac
done
