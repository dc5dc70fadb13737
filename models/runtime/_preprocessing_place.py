"""Where a model's pre-processing runs: its ``preprocessing`` parameter, shared by the adapters
that can pre-process on their device to the same bits as on the CPU (LiteMedSAM's slices,
SAM-Med3D's 1.5 mm resampling).

* ``auto`` (the default): on the model's device when that is not the CPU (a GPU), else the
  NumPy/OpenCV steps on the CPU;
* ``numpy``: always the CPU steps;
* ``device``: always torch on the model's device (also on the CPU, where tests compare it).
"""

from __future__ import annotations

#: the values of a ``preprocessing`` parameter
PLACES = ("auto", "numpy", "device")


def check_preprocessing(value: str) -> str:
    """``value`` if it is one of :data:`PLACES`, else ValueError (one line)."""
    if value not in PLACES:
        raise ValueError(f"preprocessing must be 'auto', 'numpy' or 'device', not '{value}'")
    return value


def on_device(preprocessing: str, device_type: str) -> bool:
    """Whether ``preprocessing`` runs in torch on a device of ``device_type`` ('cpu', 'cuda',
    'mps')."""
    if preprocessing == "auto":
        return device_type != "cpu"
    return preprocessing == "device"
