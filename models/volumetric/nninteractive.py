"""nnInteractive (Isensee, Rokuss, Krämer et al., 2025; the CVPR 2025 interactive challenge's
winner) through its PyPI package ``nninteractive`` (optional extra: ``pip install
'intrabench[nninteractive]'``; it brings nnU-Net v2).

The package's own inference session does all the work: ``nnInteractiveInferenceSession``,
loaded from a model folder (``plans.json``, ``dataset.json``, ``inference_session_class.json``
or ``inference_info.json``, ``fold_0/checkpoint_final.pth``, ``LICENSE``) such as the
published ``nnInteractive_v1.0``. The adapter:

* ``set_case``: the image in its file's own voxel order ((k, j, i), SimpleITK's array, as the
  package's README reads it), raw intensities, ``set_image`` once per case (the session
  normalises with the statistics of the nonzero region itself).
* ``predict``: the session is stateful and the episodes of a case interleave, so every step
  starts from clean interactions and replays its state: the previous step's mask as the
  session's initial segmentation (``add_initial_seg_interaction``), then the prompt's
  elements (clicks with their sign, 2D boxes, scribbles, lassos, 3D boxes) in the order the
  user gave them (``Prompt.elements``: a correction click after a box comes after it), the last
  one running the prediction into a target buffer. Replaying applies the session's interaction
  decay in the same order as a clinician adding them one by one.
* Coordinates: canonical (z, y, x) voxels are moved to the file's (k, j, i) order
  (:func:`intrabench.io.volume.native_index`); a 2D box on an axial slice is a box of size 1
  along the file axis that slice runs across.
* A 3D box: the published weights refuse them (their capability says ``bbox3d: false``); it
  becomes the documented equivalent, the 2D box on the box's middle axial slice (state in
  ``Prediction.feedback["box3d_as"]``). Weights that support 3D boxes get them as they are.
* Scribbles that span several axial slices are split into one scribble interaction per
  slice (each a volume holding that slice's scribble voxels).
* A lasso (:class:`intrabench.types.Lasso`, the ``lasso`` prompter) is a volume holding the
  filled contour on its slice, given with ``add_lasso_interaction``; weights whose capability
  says ``lasso: false`` refuse the prompt with a one-line error.

Checkpoints are read with ``torch.load(weights_only=True)`` and an explicit allow-list (numpy
scalars in the training log), never with the package's ``weights_only=False``. Weights: CC
BY-NC-SA 4.0 (the package's code: Apache 2.0). ``weights="random", tiny=True`` writes a tiny
randomly initialised model folder (a 3-stage plain U-Net, 64^3 patch: the session's
refinement planning keeps a 24-voxel margin inside each patch) and loads it through
the same path: for tests and timing only.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from intrabench.io.volume import Volume, from_canonical, native_index, to_canonical
from intrabench.models.volumetric._3d_common import NetworkModel3D, check_weights_mode, seeded_init
from intrabench.registry import models
from intrabench.types import Prediction, Prompt

#: where a model folder is looked for under the checkpoint directory
DEFAULT_FOLDER = "nnInteractive_v1.0"
#: its checkpoint file, relative to the checkpoint directory (the checkpoint table's entry)
CHECKPOINT_FILE = f"{DEFAULT_FOLDER}/fold_0/checkpoint_final.pth"
#: the legacy capability of the published v1.0 weights (the package's own default)
TINY_CAPABILITY = {
    "point_radius": 4,
    "preferred_scribble_thickness": [2, 2, 2],
    "interaction_decay": 0.9,
    "pad_mode_image": "constant",
}


def _tiny_plans(patch: int = 64) -> dict[str, Any]:
    """nnU-Net v2 plans of a tiny 3-stage plain U-Net (4, 8, 16 features)."""
    return {
        "dataset_name": "Dataset999_IntraBenchTiny",
        "plans_name": "nnUNetPlans",
        "original_median_spacing_after_transp": [1.0, 1.0, 1.0],
        "original_median_shape_after_transp": [patch] * 3,
        "image_reader_writer": "SimpleITKIO",
        "transpose_forward": [0, 1, 2],
        "transpose_backward": [0, 1, 2],
        "experiment_planner_used": "tiny",
        "label_manager": "LabelManager",
        "foreground_intensity_properties_per_channel": {
            "0": {
                "max": 1.0,
                "mean": 0.0,
                "median": 0.0,
                "min": 0.0,
                "percentile_00_5": 0.0,
                "percentile_99_5": 1.0,
                "std": 1.0,
            }
        },
        "configurations": {
            "3d_fullres": {
                "data_identifier": "tiny",
                "preprocessor_name": "DefaultPreprocessor",
                "batch_size": 1,
                "patch_size": [patch] * 3,
                "median_image_size_in_voxels": [patch] * 3,
                "spacing": [1.0, 1.0, 1.0],
                "normalization_schemes": ["ZScoreNormalization"],
                "use_mask_for_norm": [False],
                "resampling_fn_data": "resample_data_or_seg_to_shape",
                "resampling_fn_seg": "resample_data_or_seg_to_shape",
                "resampling_fn_data_kwargs": {
                    "is_seg": False,
                    "order": 3,
                    "order_z": 0,
                    "force_separate_z": None,
                },
                "resampling_fn_seg_kwargs": {
                    "is_seg": True,
                    "order": 1,
                    "order_z": 0,
                    "force_separate_z": None,
                },
                "resampling_fn_probabilities": "resample_data_or_seg_to_shape",
                "resampling_fn_probabilities_kwargs": {
                    "is_seg": False,
                    "order": 1,
                    "order_z": 0,
                    "force_separate_z": None,
                },
                "batch_dice": False,
                "architecture": {
                    "network_class_name": "dynamic_network_architectures.architectures.unet.PlainConvUNet",
                    "arch_kwargs": {
                        "n_stages": 3,
                        "features_per_stage": [4, 8, 16],
                        "conv_op": "torch.nn.modules.conv.Conv3d",
                        "kernel_sizes": [[3, 3, 3]] * 3,
                        "strides": [[1, 1, 1], [2, 2, 2], [2, 2, 2]],
                        "n_conv_per_stage": [1, 1, 1],
                        "n_conv_per_stage_decoder": [1, 1],
                        "conv_bias": True,
                        "norm_op": "torch.nn.modules.instancenorm.InstanceNorm3d",
                        "norm_op_kwargs": {"eps": 1e-5, "affine": True},
                        "dropout_op": None,
                        "dropout_op_kwargs": None,
                        "nonlin": "torch.nn.LeakyReLU",
                        "nonlin_kwargs": {"inplace": True},
                    },
                    "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"],
                },
            }
        },
    }


def write_tiny_model_folder(
    folder: str | Path, seed: int = 0, background_bias: float = 5.0
) -> Path:
    """A complete nnInteractive model folder with a tiny randomly initialised network, laid
    out as the published ``nnInteractive_v1.0`` (legacy capability file, 7 interaction
    channels), checkpoint saved as the release's cleansing leaves it. ``background_bias`` is
    added to the background logit, so that a click gives a small region as a trained network
    would, not most of the volume (which sends the session's zoom-out to its limit and costs
    minutes on a CPU). Returns the folder.

    Args:
        folder: Where to write it (created if needed).
        seed: The seed of the network's random initialisation.
        background_bias: Added to the background logit of the last layer.

    Returns:
        The folder, as a Path.
    """
    import torch
    from nnInteractive.trainer.nnInteractiveTrainer import nnInteractiveTrainer_stub
    from nnunetv2.utilities.plans_handling.plans_handler import PlansManager

    folder = Path(folder)
    (folder / "fold_0").mkdir(parents=True, exist_ok=True)
    plans = _tiny_plans()
    dataset = {
        "channel_names": {"0": "any"},
        "labels": {"background": 0, "foreground": 1},
        "numTraining": 0,
        "file_ending": ".nii.gz",
    }
    (folder / "plans.json").write_text(json.dumps(plans, indent=1))
    (folder / "dataset.json").write_text(json.dumps(dataset, indent=1))
    (folder / "inference_session_class.json").write_text(json.dumps(TINY_CAPABILITY))
    (folder / "LICENSE").write_text("random weights (IntraBench tests)\n")
    manager = PlansManager(plans)
    with seeded_init(seed):
        network = nnInteractiveTrainer_stub.build_network_architecture(
            manager,
            manager.get_configuration("3d_fullres"),
            1 + 7,
            2,
            enable_deep_supervision=False,
        )
        with torch.no_grad():  # lean towards background, as a trained network does away from
            network.decoder.seg_layers[-1].bias.copy_(torch.tensor([background_bias, 0.0]))
    torch.save(
        {
            "network_weights": network.state_dict(),
            "trainer_name": "nnInteractiveTrainer_stub",
            "init_args": {"configuration": "3d_fullres", "fold": 0},
            "current_epoch": 0,
            "logging": {"ema_fg_dice": [np.float64(0.5)]},
        },
        folder / "fold_0" / "checkpoint_final.pth",
    )
    return folder


@contextlib.contextmanager
def safe_checkpoint_loading():
    """Inside: ``torch.load`` ignores a caller's ``weights_only=False`` (the package's loader)
    and unpickles only tensors, containers, primitives and the numpy scalar types a training
    log holds."""
    import torch

    original = torch.load
    allowed = [
        np.core.multiarray.scalar,
        np.dtype,
        type(np.dtype(np.float64)),
        type(np.dtype(np.float32)),
        type(np.dtype(np.int64)),
    ]

    def load(*args: Any, **kwargs: Any) -> Any:
        kwargs["weights_only"] = True
        with torch.serialization.safe_globals(allowed):
            return original(*args, **kwargs)

    torch.load = load
    try:
        yield
    finally:
        torch.load = original


@contextlib.contextmanager
def _quiet_and_seeded(seed: int):
    """The session prints progress on stdout and its refinement planning draws from numpy's
    global generator: silence the one and seed the other, restoring its state after."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        with contextlib.redirect_stdout(None):
            yield
    finally:
        np.random.set_state(state)


def model_folder_problem(folder: Path) -> str | None:
    """Why ``folder`` is not an nnInteractive model folder, or None when it looks like one.

    Args:
        folder: The candidate model folder.

    Returns:
        One line naming what is missing, or None.
    """
    if not folder.is_dir():
        return f"model folder missing: {folder}"
    needed = ["plans.json", "dataset.json"]
    missing = [n for n in needed if not (folder / n).is_file()]
    if not (
        (folder / "inference_info.json").is_file()
        or (folder / "inference_session_class.json").is_file()
    ):
        missing.append("inference_info.json or inference_session_class.json")
    if not list(folder.glob("fold_*/checkpoint_final.pth")):
        missing.append("fold_*/checkpoint_final.pth")
    return f"{folder} lacks {', '.join(missing)}" if missing else None


@models.register
class NnInteractive(NetworkModel3D):
    """nnInteractive (nnU-Net based, CVPR 2025 challenge winner): clicks, 2D boxes, scribbles."""

    name: ClassVar[str] = "nninteractive"
    dimension: ClassVar[int] = 3
    accepts: ClassVar[frozenset[str]] = frozenset(
        {"point", "box2d", "box3d", "scribble", "lasso", "mask"}
    )
    checkpoint_key: ClassVar[str] = "nninteractive"
    licence: ClassVar[str] = "weights CC BY-NC-SA 4.0; code Apache-2.0"

    def __init__(
        self,
        model_dir: str | None = None,
        checkpoint_dir: str | None = None,
        device: str = "auto",
        weights: str = "checkpoint",
        tiny: bool = False,
        seed: int = 0,
        autozoom: bool = True,
        torch_threads: int | None = None,
        precision: str = "auto",
        server: str | None = None,
        server_timeout_s: float = 600.0,
    ) -> None:
        """``model_dir``: the model folder (default: ``nnInteractive_v1.0`` in the checkpoint
        directory); ``autozoom``: the session's adaptive zoom-out (on, as upstream);
        ``torch_threads``: the session sets torch's thread count (default: keep the current);
        ``weights="random"`` + ``tiny=True``: a tiny random model folder (tests/timing);
        ``seed``: the random weights' seed, and the seed of the numpy draws the session's
        refinement planning makes (so that a step gives the same mask every time);
        ``precision``: 'auto' is the session's own choice (fp16 autocast on CUDA, float32
        elsewhere); 'fp32' is accepted where that is float32 (not on CUDA).
        ``server``: the URL of a running ``nninteractive-server`` (nnInteractive's own server,
        e.g. ``http://gpu-node:1527``): the session is its remote client
        (``nnInteractiveRemoteInferenceSession``, torch-free), the weights and the device are
        the server's, and ``server_timeout_s`` bounds each request."""
        if server is not None:
            self._connect(str(server), float(server_timeout_s), int(seed))
            return
        import torch

        try:
            from nnInteractive.inference.inference_session import (
                nnInteractiveInferenceSession,
            )
        except ImportError:
            from intrabench.errors import UserError

            raise UserError(
                "nninteractive needs its package: pip install "
                "'intrabench[nninteractive]' (or pip install nninteractive)"
            ) from None
        from intrabench.device import select_device

        check_weights_mode(weights, tiny)
        self.device = select_device(device)
        on_cuda = str(self.device).startswith("cuda")
        if precision not in ("auto", "fp32") or (precision == "fp32" and on_cuda):
            raise ValueError(
                f"precision {precision!r}: nnInteractive's session autocasts to "
                "fp16 on CUDA and runs float32 elsewhere; use 'auto'"
            )
        self.precision = "fp16" if on_cuda else "fp32"
        if weights == "random":
            self._scratch = tempfile.TemporaryDirectory(prefix="nninteractive-tiny-")
            folder = write_tiny_model_folder(self._scratch.name, seed)
        else:
            folder = self.model_folder(model_dir, checkpoint_dir)
        with contextlib.redirect_stdout(None):  # the session prints its licence banner
            self.session = nnInteractiveInferenceSession(
                device=torch.device(self.device),
                use_torch_compile=False,
                verbose=False,
                torch_n_threads=int(torch_threads or torch.get_num_threads()),
                do_autozoom=bool(autozoom),
                interactions_storage="tensor",
                enable_undo=False,
            )
            with safe_checkpoint_loading():
                self.session.initialize_from_trained_model_folder(str(folder))
        self.weights_licence = self.session.license
        self.seed = int(seed)
        self._image: Volume | None = None
        self._native_shape: tuple[int, ...] = ()
        self._seconds = 0.0

    def _connect(self, server: str, timeout_s: float, seed: int) -> None:
        """Use nnInteractive's own remote client on ``server`` as the session."""
        try:
            from nnInteractive.inference.remote import nnInteractiveRemoteInferenceSession
        except ImportError:
            from intrabench.errors import UserError

            raise UserError(
                "nninteractive with server: needs nnInteractive's client: pip "
                "install nninteractive-client"
            ) from None
        if not (timeout_s > 0 and np.isfinite(timeout_s)):
            raise ValueError(f"server_timeout_s must be a positive number, got {timeout_s}")
        try:
            self.session = nnInteractiveRemoteInferenceSession(
                server_url=server, read_timeout=timeout_s, set_image_read_timeout=timeout_s
            )
        except Exception as error:  # noqa: BLE001 - an unreachable or foreign server
            from intrabench.io.checkpoints import CheckpointError

            raise CheckpointError(
                f"nninteractive: no nnInteractive server at {server} "
                f"({type(error).__name__}: {str(error)[:200]})"
            ) from None
        self.device, self.precision = f"server {server}", "the server's"
        self.weights_licence = self.session.license
        self.seed = seed
        self._image = None
        self._native_shape = ()
        self._seconds = 0.0

    @classmethod
    def forward_frees_cpu(cls, params: dict[str, Any]) -> bool:
        """A session on a server computes there; else as the other torch adapters."""
        return params.get("server") is not None or super().forward_frees_cpu(params)

    @classmethod
    def model_folder(cls, model_dir: str | None, checkpoint_dir: str | None) -> Path:
        """The model folder to load; CheckpointError naming what is missing.

        Args:
            model_dir: The ``model_dir`` parameter (a folder), or None for the default folder.
            checkpoint_dir: The checkpoint folder the default is found in; None for the default one.

        Returns:
            The model folder.

        Raises:
            CheckpointError: The folder lacks a file the session needs.
        """
        from intrabench.io.checkpoints import CheckpointError
        from intrabench.io.checkpoints import checkpoint_dir as directory

        folder = (
            Path(model_dir).expanduser()
            if model_dir
            else directory(checkpoint_dir) / DEFAULT_FOLDER
        )
        problem = model_folder_problem(folder)
        if problem:
            raise CheckpointError(
                f"nninteractive: {problem} (download nnInteractive_v1.0 from "
                "https://huggingface.co/nnInteractive/nnInteractive and give "
                "its folder as model_dir)"
            )
        return folder

    @classmethod
    def availability(cls) -> str:
        """``ready``, or why the model cannot run here in one line (its checkpoint folder
        missing, wrong or unverified).
        """
        from intrabench.io.checkpoints import checkpoint_dir

        problem = model_folder_problem(checkpoint_dir(None) / DEFAULT_FOLDER)
        if problem is not None:
            return f"checkpoint missing: {DEFAULT_FOLDER}/"
        from intrabench.io.checkpoints import readiness

        return readiness(cls.checkpoint_key)  # ready only once its hash is known to match

    @classmethod
    def check_checkpoint(cls, path: Path, key: str) -> None:
        """CheckpointError unless the model folder holding ``path`` (its
        ``fold_*/checkpoint_final.pth``) loads, weights-only, strictly into the network its
        plans describe (``intrabench models verify``)."""
        from intrabench.io.checkpoints import CheckpointError

        try:
            cls(model_dir=str(Path(path).parents[1]), device="cpu")
        except CheckpointError:
            raise
        except Exception as error:  # noqa: BLE001 - any failure to load is the file's
            raise CheckpointError(f"{path}: {str(error).strip().splitlines()[0]}") from None

    def set_case(self, image: Volume) -> None:
        """Take the case's image (canonical (z, y, x), float32); it is handed to the session in
        its native (k, j, i) order; the same image again does nothing.
        """
        if image is self._image:
            return
        started = time.perf_counter()
        self._image = image
        native = from_canonical(image.array, image.geometry)  # (k, j, i), raw intensities
        self._native_shape = native.shape
        self.session.set_image(np.asarray(native, dtype=np.float32)[None])
        self._seconds += time.perf_counter() - started

    # -- prompts as the session's interactions ------------------------------------------------
    def _native(self, points_zyx: np.ndarray) -> np.ndarray:
        return native_index(np.asarray(points_zyx).reshape(-1, 3), self._image.geometry)

    def _box(self, low_zyx: tuple[int, ...], high_zyx: tuple[int, ...]) -> list[list[int]]:
        """Half-open [[lo, hi), ...] per file axis of a canonical inclusive box."""
        corners = self._native(np.array([low_zyx, high_zyx]))
        return [[int(lo), int(hi) + 1] for lo, hi in zip(corners.min(axis=0), corners.max(axis=0))]

    def interactions(self, prompt: Prompt) -> tuple[list[tuple[str, Any, bool]], str]:
        """The session calls that replay ``prompt`` in the order the user gave its elements
        (:meth:`~intrabench.types.Prompt.elements`; the session centres its prediction on the
        last interaction and decays older ones): (kind, argument, positive), and what became of
        a 3D box ("" when there is none).

        Args:
            prompt: The interactions so far, in canonical (z, y, x) voxels.

        Returns:
            (calls, box3d_as): the session calls, in the file's own (k, j, i) voxel order
            ("point" with a voxel, "bbox" with half-open [lo, hi) per axis, "scribble" or
            "lasso" with a uint8 volume of the file's shape), and "3D box", "2D box on slice
            <z>" or "".

        Raises:
            ValueError: The prompt has lassos and the weights do not take them.
        """
        if prompt.lassos and not self.session.supported_interactions.get("lasso", False):
            raise ValueError(
                "nnInteractive: these weights do not take lasso prompts "
                "(their capability says lasso: false)"
            )
        calls: list[tuple[str, Any, bool]] = []
        box3d_as = ""
        for kind, element in prompt.elements():
            if kind == "point":
                point, label = element
                native = self._native(np.array([point]))[0]
                calls.append(("point", tuple(int(v) for v in native), bool(label)))
            elif kind == "box2d":
                z, box = element
                calls.append(
                    ("bbox", self._box((z, box.y_min, box.x_min), (z, box.y_max, box.x_max)), True)
                )
            elif kind == "box3d":
                cube = element
                if self.session.supported_interactions.get("bbox3d", False):
                    calls.append(
                        (
                            "bbox",
                            self._box(
                                (cube.z_min, cube.y_min, cube.x_min),
                                (cube.z_max, cube.y_max, cube.x_max),
                            ),
                            True,
                        )
                    )
                    box3d_as = "3D box"
                else:
                    middle = (cube.z_min + cube.z_max) // 2
                    calls.append(
                        (
                            "bbox",
                            self._box(
                                (middle, cube.y_min, cube.x_min), (middle, cube.y_max, cube.x_max)
                            ),
                            True,
                        )
                    )
                    box3d_as = f"2D box on slice {middle}"
            elif kind == "scribble":
                voxels = np.asarray(element.points).reshape(-1, 3)
                for z in sorted(set(voxels[:, 0].tolist())):
                    image = np.zeros(self._native_shape, dtype=np.uint8)
                    native = self._native(voxels[voxels[:, 0] == z])
                    image[tuple(native.T)] = 1
                    calls.append(("scribble", image, bool(element.label)))
            else:  # lasso
                canonical = np.zeros(self._image.array.shape, dtype=bool)
                canonical[element.z] = element.region(canonical.shape[1:])
                image = from_canonical(canonical.astype(np.uint8), self._image.geometry)
                calls.append(("lasso", image, bool(element.label)))
        return calls, box3d_as

    def predict(
        self,
        prompt: Prompt,
        previous: Prediction | None = None,
        update_slices: list[int] | None = None,
    ) -> Prediction:
        """nnInteractive's 3D prediction for ``prompt`` on the case of :meth:`set_case`.

        Args:
            prompt: The interactions so far, in canonical (z, y, x) voxels.
            previous: The previous step's prediction (its mask and feedback), or None.
            update_slices: Unused by 3D models (2D models predict only these slices again).

        Returns:
            The mask, bool of the image's (z, y, x) shape, with the model's seconds and feedback.

        Raises:
            RuntimeError: :meth:`set_case` was not called.
            ValueError: The prompt has no kind the model takes.
        """
        if self._image is None:
            raise RuntimeError("nnInteractive: set_case() was not called")
        calls, box3d_as = self.interactions(prompt)
        if not calls:
            raise ValueError("nnInteractive needs at least one click, box, scribble or lasso")
        started = time.perf_counter()
        with _quiet_and_seeded(self.seed):
            target = self._replay(calls, previous)
        mask = np.ascontiguousarray(to_canonical(target > 0, self._image.geometry))
        self._seconds += time.perf_counter() - started
        return Prediction(
            mask, {"model": self.name, "interactions": len(calls), "box3d_as": box3d_as}
        )

    def _replay(
        self, calls: list[tuple[str, Any, bool]], previous: Prediction | None
    ) -> np.ndarray:
        """Clean interactions, the previous mask, then ``calls``; returns the target buffer
        ((k, j, i), uint8)."""
        session = self.session
        target = np.zeros(self._native_shape, dtype=np.uint8)
        session.set_target_buffer(target)
        session.reset_interactions()
        if previous is not None:
            initial = from_canonical(previous.mask.astype(np.uint8), self._image.geometry)
            session.add_initial_seg_interaction(initial, run_prediction=False)
        for index, (kind, argument, positive) in enumerate(calls):
            run = index == len(calls) - 1
            if kind == "point":
                session.add_point_interaction(
                    argument, include_interaction=positive, run_prediction=run
                )
            elif kind == "bbox":
                session.add_bbox_interaction(
                    argument, include_interaction=positive, run_prediction=run
                )
            elif kind == "lasso":
                session.add_lasso_interaction(
                    argument, include_interaction=positive, run_prediction=run
                )
            else:
                session.add_scribble_interaction(
                    argument, include_interaction=positive, run_prediction=run
                )
        return target
