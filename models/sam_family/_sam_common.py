"""Shared machinery of the 2D SAM-family adapters (SAM, SAM2, MedSAM, SAM-Med2D).

What lives here:

* :class:`SamFamilyModel`: a :class:`~intrabench.interfaces.SliceModel` that encodes the slices
  it is asked to predict in fixed blocks of ``batch_size`` consecutive slices (see
  :meth:`SamFamilyModel.encode_block`), caches their embeddings for every target, prompter and
  refinement step of the case, and counts encoder/decoder work
  (:attr:`SamFamilyModel.stats`). Subclasses implement four small hooks: build the network,
  turn slices into the encoder's input batch, run the encoder, decode one prompt.
* Re-exported for the adapters, from one module per idea: the intensity helpers
  (:mod:`._slice_intensity`), the embedding cache (:mod:`._embedding_cache`) and
  segment_anything's network, prompts and decoding (:mod:`._sam_network`).

Array conventions: volumes are ``(z, y, x)``; a slice is ``(y, x)``; points arrive as
``(N, 2)`` ``(y, x)`` integer voxel indices and are handed to the networks as ``(x, y)`` in the
network's input frame; boxes are inclusive ``(y_min, x_min, y_max, x_max)`` and go to the
networks as ``(x_min, y_min, x_max, y_max)`` (the prompt encoders add the half-pixel offset
themselves). Low-resolution logits fed back between refinement steps are float32 numpy arrays
``(h_low, w_low)``.

torch and the model packages are imported lazily (inside functions) so that listing the
registered models stays fast.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from intrabench.interfaces import SliceModel, SliceOutput
from intrabench.io.checkpoints import (
    CHECKPOINTS,
    CheckpointError,
    check_fits,
    check_pinned,
    checkpoint_dir,
    checkpoint_path,
    is_pinned,
    is_present,
    load_checkpoint,
    load_state_dict_strict,
    pinned_difference,
    readiness,
    strip_prefix,
)
from intrabench.io.volume import Volume
from intrabench.models.runtime._embedding_cache import EmbeddingCache, tensor_bytes  # noqa: F401 - re-exported
from intrabench.models.runtime._encoder_backends import BACKENDS
from intrabench.models.runtime._precision import (
    check_choice,
    check_precision,
    device_type,
    forward_context,
    keep_float32,
    resolve_precision,
)
from intrabench.models.sam_family._encoder_speed import (
    ATTENTIONS,
    ENCODER_WEIGHTS,
    compile_in_place,
    resolve_attention,
    use_bf16_weights,
    use_fused_attention,
)
from intrabench.models.sam_family._sam_network import (  # noqa: F401 - re-exported for the adapters
    SAM_CONFIGS,
    SAM_PIXEL_MEAN,
    SAM_PIXEL_STD,
    TINY_SAM,
    SamConfig,
    build_sam,
    feedback_tensor,
    logits_feedback,
    prompt_tensors,
    sam_decode,
    sam_embedding_nbytes,
    slice_batch,
)
from intrabench.models.sam_family._slice_intensity import PERCENTILES, percentile_window, to_uint8  # noqa: F401
from intrabench.types import SlicePrompt

_UNRESOLVED = object()

log = logging.getLogger(__name__)


def exportable_models() -> list[str]:
    """The registered models whose encoder another backend can run."""
    from intrabench import registry

    return sorted(
        name for name, cls in registry.models.items() if getattr(cls, "EXPORTABLE_ENCODER", False)
    )


# --------------------------------------------------------------------------------------
# The base adapter
# --------------------------------------------------------------------------------------


@dataclass
class EncoderStats:
    """Work counters of one adapter (since construction or :meth:`SamFamilyModel.reset_stats`)."""

    slices_encoded: int = 0
    encoder_batches: int = 0
    encoder_seconds: float = 0.0
    decoder_calls: int = 0
    decoder_seconds: float = 0.0
    preprocess_seconds: float = 0.0


#: the most slices one encoder pass may take (``batch_size``): a block's activations grow
#: with it (SAM ViT-H's global attention alone: 1 GiB per slice in float32), and a block far
#: beyond what the machine holds was killed by the system, not refused (batch_size 1000:
#: MobileSAM's OpenVINO encoder took 23 GB on the CPU, and the kernel ended the run)
MAX_BATCH_SIZE = 64


class SamFamilyModel(SliceModel):
    """Base of the 2D SAM-family adapters: lazy network, batched encodes, embedding cache.

    Parameters shared by all four adapters:

    * ``variant``: architecture/checkpoint variant (model specific).
    * ``checkpoint``: explicit checkpoint file (wins over ``checkpoint_dir``).
    * ``checkpoint_dir``: directory holding the expected file names of
      :data:`intrabench.io.checkpoints.CHECKPOINTS` (default ``$INTRABENCH_CHECKPOINTS`` or
      ``~/.intrabench/checkpoints``).
    * ``device``: 'auto' (CUDA > MPS > CPU), 'cpu', 'cuda', 'cuda:1', 'mps'.
    * ``precision``: 'auto' (bf16 autocast on CUDA, float32 elsewhere), 'fp32', 'bf16' or
      'fp16' (not on the CPU): autocast around the encoder and decoder forward passes only
      (see :mod:`intrabench.models.runtime._precision`); masks are bool and fed-back logits float32.
    * ``batch_size``: slices per encoder forward pass, 'auto' (default: 4 on CUDA, 1
      elsewhere) or a number from 1 to 64. The volume is encoded in fixed blocks of that many consecutive
      axial slices (:meth:`encode_block`), so that a slice's embedding does not depend on the
      order in which episodes asked for slices. On a CPU every extra slice of a block costs
      nearly its full price (docs/performance.md, "Fixed encoder blocks").
    * ``cache_mb``: memory bound of the slice-embedding cache (MiB, on the model's device);
      ``cache_slices``: optional bound on the number of cached slices.
    * ``multimask``: 'auto' (the original model's rule, see each adapter), 'always' (three
      masks, keep the best predicted IoU) or 'never' (the single-mask output).
    * ``attention``: 'auto' (fused ``scaled_dot_product_attention`` on CUDA, upstream's code
      elsewhere), 'fused' or 'reference' (segment_anything encoders; see
      :mod:`intrabench.models.sam_family._encoder_speed`).
    * ``encoder_weights``: 'float32' (default) or 'bf16' (the image encoder's weights stored in
      bf16, run without autocast, embeddings handed on in float32).
    * ``compile``: ``torch.compile`` the image encoder (the first encode compiles it).
    * ``backend``: who runs the image encoder, for adapters that declare
      ``EXPORTABLE_ENCODER``: 'auto' (default: for adapters whose exported speed was measured,
      ``AUTO_EXPORT``, on the CPU in float32 the fastest installed and verified of OpenVINO
      and ONNX Runtime; else torch), 'torch', 'onnxruntime', 'openvino' (see
      :mod:`intrabench.models.runtime._encoder_backends`).
    * ``weights``: 'checkpoint' (default) or 'random'. **'random' and ``tiny=True`` are for tests
      and timing only**: random weights produce meaningless masks; ``tiny`` builds a small
      configuration of the same architecture (seeded by ``seed``). A tiny model may load a
      checkpoint saved from a tiny model by passing ``checkpoint`` explicitly.

    A missing checkpoint raises :class:`~intrabench.io.checkpoints.CheckpointError` **at
    construction** (naming the file and where to get it); the weights themselves are read
    lazily, at the first encode.
    """

    @classmethod
    def forward_frees_cpu(cls, params: dict[str, Any]) -> bool:
        """Off the CPU on a GPU: from the ``device`` parameter (default ``auto``)."""
        from intrabench.device import computes_off_cpu

        return computes_off_cpu(params.get("device", "auto"))

    #: the image encoder can be exported to ONNX and run by another backend (``backend``)
    EXPORTABLE_ENCODER: ClassVar[bool] = False
    #: ``backend: auto`` tries the exported backends (only where their speed was measured)
    AUTO_EXPORT: ClassVar[bool] = False
    #: the box decoder (:meth:`decoder_module`) runs on the exported encoder's backend too
    EXPORTABLE_DECODER: ClassVar[bool] = False
    #: the name of :meth:`decoder_module`'s graph, in its export's file name (a new name when
    #: the graph changes, so that an export of the old graph is not reused)
    DECODER_GRAPH: ClassVar[str] = ""
    #: the same for :meth:`encoder_export_module`'s graph ("": the network's own encoder)
    ENCODER_GRAPH: ClassVar[str] = ""
    #: variant -> CHECKPOINTS key; first entry is documentation only, DEFAULT_VARIANT decides
    VARIANTS: ClassVar[dict[str, str]] = {}
    DEFAULT_VARIANT: ClassVar[str] = ""
    #: default 'auto' multimask rule of the original model: 'single-point', 'always', 'never'
    AUTO_MULTIMASK: ClassVar[str] = "single-point"

    def __init__(
        self,
        variant: str | None = None,
        checkpoint: str | None = None,
        checkpoint_dir: str | None = None,
        device: str = "auto",
        batch_size: int | str = "auto",
        cache_mb: float = 2048.0,
        cache_slices: int | None = None,
        multimask: str = "auto",
        weights: str = "checkpoint",
        tiny: bool = False,
        seed: int = 0,
        precision: str = "auto",
        attention: str = "auto",
        encoder_weights: str = "float32",
        compile: bool = False,
        backend: str = "auto",
        accept_other_weights: bool = False,
    ) -> None:
        super().__init__()
        variant = variant or self.DEFAULT_VARIANT
        if variant not in self.VARIANTS:
            raise ValueError(f"unknown variant '{variant}'; valid: {', '.join(self.VARIANTS)}")
        if weights not in ("checkpoint", "random"):
            raise ValueError(f"weights must be 'checkpoint' or 'random', not '{weights}'")
        if multimask not in ("auto", "always", "never"):
            raise ValueError(f"multimask must be 'auto', 'always' or 'never', not '{multimask}'")
        if batch_size != "auto" and (
            isinstance(batch_size, bool)
            or not isinstance(batch_size, int)
            or not 1 <= batch_size <= MAX_BATCH_SIZE
        ):
            raise ValueError(
                f"batch_size must be 'auto' or a whole number from 1 to "
                f"{MAX_BATCH_SIZE} (slices per encoder pass), not {batch_size!r}"
            )
        self.variant = variant
        self.weights = weights
        self.tiny = bool(tiny)
        self.seed = int(seed)
        self.batch_size = batch_size
        self.multimask = multimask
        self.requested_device = device
        if device not in (None, "auto", "cpu"):  # a device this machine lacks: said now, once
            from intrabench.device import check_device_request

            check_device_request(device)
        self._device: Any = None
        #: :attr:`device_type`, once known (asked per forward pass: no device files read again)
        self._device_type: str | None = None
        self.precision = check_precision(precision)
        self.attention = check_choice("attention", attention, ATTENTIONS)
        self.encoder_weights = check_choice("encoder_weights", encoder_weights, ENCODER_WEIGHTS)
        self.compile = bool(compile)
        self.backend = check_choice("backend", backend, BACKENDS)
        if backend not in ("auto", "torch") and not self.EXPORTABLE_ENCODER:
            raise ValueError(
                f"backend '{backend}' is offered for the encoders of "
                f"{', '.join(exportable_models())}; use 'torch' or 'auto'"
            )
        self.checkpoint_directory = checkpoint_dir
        self._exported: Any = _UNRESOLVED
        self._exported_decoder: Any = _UNRESOLVED
        if precision == "fp16":  # refuse fp16 on the CPU now, not at the first encode
            resolve_precision(precision, self.device_type)
        self.checkpoint_file: Path | None = None
        #: the checkpoint table's key of the file to load, when it is the table's own file
        #: (not an explicit ``checkpoint``): its pinned size and hash are checked before loading
        self._table_key: str | None = None
        #: an explicit ``checkpoint`` is compared with the variant's published file where the
        #: table pins it: a different file is refused unless ``accept_other_weights``
        self._published_key: str | None = None
        self.accept_other_weights = bool(accept_other_weights)
        if weights == "checkpoint":
            if self.tiny and not checkpoint:
                raise ValueError(
                    "tiny=True with weights='checkpoint' needs an explicit "
                    "checkpoint file saved from a tiny model"
                )
            if self.tiny:
                self.checkpoint_file = Path(checkpoint).expanduser()
                if not self.checkpoint_file.is_file():
                    raise CheckpointError(f"checkpoint file {self.checkpoint_file} not found")
            else:
                self.checkpoint_file = checkpoint_path(
                    self.VARIANTS[variant], checkpoint_dir, checkpoint
                )
                self._table_key = None if checkpoint else self.VARIANTS[variant]
                self._published_key = self.VARIANTS[variant] if checkpoint else None
        self.cache = EmbeddingCache(int(cache_mb * 2**20), cache_slices)
        self.stats = EncoderStats()
        self._net: Any = None
        self._case_state: dict[str, Any] = {}
        self._checkpoint_digests: dict[str, str] | None = None
        self._checkpoint_sha256: str | None = None
        self._checked_files: set[Path] = set()
        self._block_size: int | None = None

    # -- listing --------------------------------------------------------------------------
    @classmethod
    def availability(cls, directory: str | None = None) -> str:
        """'ready' when the default variant's checkpoint is present, else what is missing."""
        key = cls.VARIANTS[cls.DEFAULT_VARIANT]
        others = [
            v
            for v, k in cls.VARIANTS.items()
            if v != cls.DEFAULT_VARIANT and is_present(k, directory)
        ]
        status = readiness(key, directory)  # ready only once its hash is known to match
        if is_present(key, directory):
            return status + (f" (also: {', '.join(others)})" if others else "")
        missing = f"checkpoint missing: {CHECKPOINTS[key].filename} in {checkpoint_dir(directory)}"
        return missing + (f" (present: {', '.join(others)})" if others else "")

    # -- network ----------------------------------------------------------------------------
    @property
    def device(self) -> Any:
        if self._device is None:
            from intrabench.device import select_device

            self._device = select_device(self.requested_device)
        return self._device

    @property
    def device_type(self) -> str:
        """'cpu', 'cuda', 'mps': the type of :attr:`device`. Told without importing torch where
        that can be known (:func:`intrabench.device.device_type_without_torch`) while torch is
        not imported yet, so that a model whose passes all run in an exported backend
        (:attr:`runs_without_torch`) never imports it."""
        if self._device_type is None:
            if self._device is None and "torch" not in sys.modules:
                from intrabench.device import device_type_without_torch

                self._device_type = device_type_without_torch(self.requested_device)
            if self._device_type is None:
                self._device_type = device_type(self.device)
        return self._device_type

    @property
    def active_precision(self) -> str:
        """The precision the forward passes run in on this device: 'fp32', 'bf16' or 'fp16'."""
        return resolve_precision(self.precision, self.device_type)

    #: the adapter's hooks work in NumPy, without torch, where the networks run in an
    #: exported backend: :meth:`preprocess` gives NumPy batches (and the embeddings are NumPy)
    #: when the encoder is exported, :meth:`decode` post-processes in NumPy when the decoder is
    NUMPY_WHEN_EXPORTED: ClassVar[bool] = False

    @property
    def encodes_without_torch(self) -> bool:
        """Whether a slice's pre-processing and encoder pass run without torch (NumPy batches
        and embeddings): :attr:`NUMPY_WHEN_EXPORTED` and an exported encoder."""
        return self.NUMPY_WHEN_EXPORTED and self.exported_encoder is not None

    @property
    def decodes_without_torch(self) -> bool:
        """Whether the decoder pass and its post-processing run without torch too: the decoder
        is exported as well (one that failed its export decodes in torch, from the NumPy
        embedding)."""
        return self.encodes_without_torch and self.exported_decoder is not None

    @property
    def runs_without_torch(self) -> bool:
        """Whether every step of a slice runs without torch (:attr:`encodes_without_torch`,
        :attr:`decodes_without_torch`). A run of such a model on the CPU, whose exports are
        recorded, never imports torch (docs/performance.md)."""
        return self.decodes_without_torch

    def forward_passes(self, precision: str, without_torch: bool) -> Any:
        """The context of forward passes: torch's inference mode and autocast
        (:func:`forward_context`), or nothing for passes that run ``without_torch``."""
        if without_torch:
            return contextlib.nullcontext()
        return forward_context(self.device, precision)

    def backend_threads(self) -> int:
        """Threads of an exported backend: torch's intra-op count, read without importing
        torch while it is not imported (:func:`._exports_ahead.torch_threads_guess`, where it
        can be told), so a torch-free run uses the count a torch run would."""
        if "torch" not in sys.modules:
            from intrabench.models.runtime._exports_ahead import torch_threads_guess

            guess = torch_threads_guess()
            if guess is not None:
                return guess
        import torch

        return int(torch.get_num_threads())

    @property
    def net(self) -> Any:
        """The torch module, built (and its weights loaded) on first use."""
        if self._net is None:
            import torch

            # Random weights are drawn on the CPU from the seed, then moved: CUDA's generator
            # draws other numbers from the same seed, so a network built on the card would
            # differ from the CPU's (measured: Dice 0.04-0.80 between their masks). Weights
            # that a checkpoint replaces whole are built on the target device directly.
            build_on = "cpu" if self.checkpoint_file is None else self.device
            with torch.random.fork_rng(devices=[]), torch.device(build_on):
                torch.manual_seed(self.seed)
                net = self.build_network(tiny=self.tiny)
            if self.checkpoint_file is not None:
                self.load_weights(net, self.checkpoint_file)
            self.keep_float32_parts(net)
            net = net.to(self.device).eval()
            self.speed_up_encoder(net.image_encoder)
            self._net = net
        return self._net

    def prepare(self) -> None:
        """Build the network, load its weights and resolve the encoder's backend (export,
        check, compile) now, not in the first case's group (see :meth:`Model.prepare`).
        Recorded exports start compiling first, beside torch's import (:meth:`open_exports_ahead`)."""
        self.open_exports_ahead()
        if self.exported_encoder is None or self.exported_decoder is None:
            self.net  # noqa: B018 - the property builds it (not needed when both are exported)

    def speed_up_encoder(self, encoder: Any) -> None:
        """Apply ``attention``, ``encoder_weights`` and ``compile`` to the image encoder."""
        if resolve_attention(self.attention, getattr(self.device, "type", "cpu")) == "fused":
            use_fused_attention(encoder)
        if self.encoder_weights == "bf16":
            use_bf16_weights(encoder)
        if self.compile:
            compile_in_place(encoder)

    @classmethod
    def check_checkpoint(cls, path: Path, key: str) -> None:
        """CheckpointError unless ``path`` loads (``weights_only``) and fits the full-size
        network of the variant whose checkpoint is ``key`` (built on the meta device)."""
        import torch

        state = cls.extract_state_dict(load_checkpoint(path))  # garbage fails here, fast
        variant = next(v for v, k in cls.VARIANTS.items() if k == key)
        adapter = cls(variant=variant, weights="random", device="cpu")
        try:
            with torch.device("meta"):
                net = adapter.build_network(tiny=False)
        except RuntimeError:  # SAM2's Hiera reads values while it is built: build on the CPU
            net = adapter.build_network(tiny=False)
        check_fits(net, state, str(path), cls.IGNORED_CHECKPOINT_KEYS)

    def checked_state_dict(self, path: Path) -> dict[str, Any]:
        """The state dict in ``path``, after checking the table's file against its pinned size
        and hash (where the table pins them) or an explicit file against the published one."""
        self.check_checkpoint_file(path)
        return self.extract_state_dict(load_checkpoint(path))

    def check_checkpoint_file(self, path: Path) -> None:
        """:meth:`checked_state_dict`'s checks of ``path`` (a hash of the whole file where one
        is pinned), made once per model and file: the digests' book and the weights' load
        share them."""
        if path in self._checked_files:
            return
        if self._table_key is not None:
            check_pinned(self._table_key, path)
        elif self._published_key is not None and is_pinned(self._published_key):
            self.check_explicit_checkpoint(self._published_key, path)
        self._checked_files.add(path)

    def load_weights(self, net: Any, path: Path) -> None:
        """Load ``path`` strictly into ``net`` (readable key diff on mismatch), after
        :meth:`checked_state_dict`'s checks."""
        state = self.checked_state_dict(path)
        load_state_dict_strict(
            net, state, source=str(path), ignore_unexpected=self.IGNORED_CHECKPOINT_KEYS
        )

    def check_explicit_checkpoint(self, key: str, path: Path) -> None:
        """An explicit checkpoint that is not the variant's published file (a one-bit change
        took a Dice of 0.71 to 0.26 without a word) is refused, or used with a warning when
        ``accept_other_weights`` says the user means it (fine-tuned weights)."""
        difference = pinned_difference(key, path)
        if difference is None:
            return
        if not self.accept_other_weights:
            raise CheckpointError(
                f"checkpoint {path} is not the published {key} file ({difference}): if these "
                f"are other weights on purpose (fine-tuned), set the model's "
                "accept_other_weights: true; else reinstall it (intrabench models download "
                f"{key})"
            )
        log.warning(
            "%s: checkpoint %s differs from the published %s file (%s); used as "
            "accept_other_weights says",
            self.name,
            path,
            key,
            difference,
        )

    #: checkpoint entries known to be harmless extras (non-persistent buffers in this code)
    IGNORED_CHECKPOINT_KEYS: ClassVar[tuple[str, ...]] = ()

    @staticmethod
    def extract_state_dict(loaded: Any) -> dict[str, Any]:
        """The state dict inside a loaded checkpoint: the dict itself or its 'model' entry,
        with a DataParallel 'module.' prefix removed."""
        if isinstance(loaded, dict) and "model" in loaded and isinstance(loaded["model"], dict):
            loaded = loaded["model"]
        if not isinstance(loaded, dict):
            raise CheckpointError(f"checkpoint holds a {type(loaded).__name__}, not a state dict")
        return strip_prefix(loaded, "module.")

    def keep_float32_parts(self, net: Any) -> None:
        """Pin the numerically sensitive parts of ``net`` to float32 under autocast: the
        prompt encoder's random-Fourier positional encoding (segment_anything, sam2)."""
        for name in ("prompt_encoder", "sam_prompt_encoder"):  # segment_anything, sam2
            pe_layer = getattr(getattr(net, name, None), "pe_layer", None)
            if pe_layer is not None:
                keep_float32(pe_layer, "_pe_encoding")

    # -- hooks for subclasses ----------------------------------------------------------------
    @abstractmethod
    def build_network(self, tiny: bool) -> Any:
        """The torch module with random weights (full-size, or a tiny test configuration)."""

    @abstractmethod
    def preprocess(self, zs: list[int]) -> Any:
        """Encoder input for axial slices ``zs``: a float tensor (B, 3, S, S) on the device."""

    @abstractmethod
    def encode(self, batch: Any) -> list[Any]:
        """Run the image encoder on a preprocessed batch; one embedding per slice."""

    @abstractmethod
    def decode(self, embedding: Any, prompt: SlicePrompt, feedback: Any) -> SliceOutput:
        """Mask (y, x) bool and low-res logits feedback for one slice prompt."""

    def embedding_nbytes(self) -> int:
        """Bytes of one slice embedding (float32), known from the architecture before any
        encode; 0 if unknown. Used to size batches to the cache bound."""
        return 0

    # -- case and cache ----------------------------------------------------------------------
    def on_new_case(self, image: Volume) -> None:
        self.cache.clear()
        self._case_state = {}

    @property
    def view(self) -> Any:
        """How this model sees the case's slices in-plane (:mod:`intrabench.models.sam_family._slice_view`):
        the adapter's ``slice_view`` ('canonical' when it has none), once per case."""
        from intrabench.models.sam_family._slice_view import SliceView

        return self.case_value(
            "view", lambda: SliceView.of(self.image, getattr(self, "slice_view", "canonical"))
        )

    def case_value(self, key: str, compute: Any) -> Any:
        """Per-case memo for values such as the volume's percentile window."""
        if key not in self._case_state:
            self._case_state[key] = compute()
        return self._case_state[key]

    def reset_stats(self) -> None:
        self.stats = EncoderStats()

    @property
    def block_size(self) -> int:
        """Slices per encoder pass: ``batch_size`` ('auto': 4 on CUDA, 1 elsewhere), never more
        than the embedding cache holds. Fixed for the model's life (it depends on the device,
        the architecture and the cache bounds only)."""
        if self._block_size is None:
            self._block_size = self.block_size_on(self.device_type)
        return self._block_size

    def block_size_on(self, device_type: str) -> int:
        """:attr:`block_size` on a device of ``device_type`` ('cuda', 'cpu'), known without
        torch (:meth:`open_exports_ahead` needs the CPU's before torch is imported)."""
        wanted = self.batch_size
        if wanted == "auto":
            wanted = 4 if device_type == "cuda" else 1
        limit = int(wanted)
        if self.cache.max_entries is not None:
            limit = min(limit, self.cache.max_entries)
        entry = self.embedding_nbytes()
        if entry:
            limit = min(limit, self.cache.max_bytes // entry)
        return max(1, limit)

    def encode_block(self, z: int) -> list[int]:
        """The slices encoded together with slice ``z``: the block of ``block_size``
        consecutive slices that holds it, ``[k * B, (k + 1) * B)`` cut at the volume's end.

        A network's floating-point output for one image depends on the shape of the batch it
        is computed in (batch 1 and 4 differ by ~1e-6 in float32 on the CPU, more in bf16 on a
        GPU). Batching whichever slices an episode happens to need, minus those another
        episode already encoded, made a slice's embedding, and so a mask, depend on the order
        of episodes: on the prompters in the config and on how episodes interleave. A fixed
        block makes the batch a function of ``z`` alone.
        """
        size = self.block_size
        start = (int(z) // size) * size
        return list(range(start, min(start + size, int(self.image.shape[0]))))

    @property
    def exported_encoder(self) -> Any:
        """The exported encoder that runs instead of torch's (``backend``), or None; resolved
        (exported, checked) at the first encode or in :meth:`prepare`; one that fails is tried
        again at the next use (its error raised there too, never torch in silence)."""
        if self._exported is _UNRESOLVED:
            exported = None
            if self.wants_exported_encoder():
                exported = self._resolve_backend()
            self._exported = exported
        return self._exported

    def _resolve_backend(self) -> Any:
        from intrabench.models.runtime._encoder_backends import (
            EncoderExports,
            choose_backend,
            exports_dir,
            weights_digest,
        )

        usable = (
            self.device_type == "cpu"
            and self.active_precision == "fp32"
            and self.encoder_weights == "float32"
            and not self.compile
        )
        if not usable:
            if self.backend != "auto":
                raise CheckpointError(
                    f"backend '{self.backend}' runs the encoder on the CPU in "
                    "float32 only (without compile or bf16 weights)"
                )
            return None
        shape = (self.block_size, *self.encoder_input_shape())
        log = self.say
        digest = self.checkpoint_digests().get("encoder")
        exports = EncoderExports(
            None,
            self.name,
            shape,
            exports_dir(checkpoint_dir(self.checkpoint_directory)),
            self.backend_threads(),
            log,
            build=self.encoder_export_module,
            weights=digest or weights_digest(self.net.image_encoder),
            graph=self.ENCODER_GRAPH,
        )
        return choose_backend(self.backend, exports, log)

    def encoder_export_module(self) -> Any:
        """The torch module that the encoder's export runs: the network's image encoder, or a
        module computing the same (named by ``ENCODER_GRAPH``); its digest is the encoder's."""
        return self.net.image_encoder

    #: checkpoint prefixes of the exportable decoder's weights, as :meth:`decoder_module`'s
    #: state dict names them (its digest is then read from the checkpoint)
    DECODER_PREFIXES: ClassVar[tuple[str, ...]] = ()

    def wants_exported_encoder(self) -> bool:
        """Whether :attr:`backend` asks for an exported encoder (one named, or 'auto' on an
        adapter that exports by default); whether it gets one depends on the device too."""
        return self.EXPORTABLE_ENCODER and (
            self.backend not in ("auto", "torch") or (self.backend == "auto" and self.AUTO_EXPORT)
        )

    def open_exports_ahead(self) -> None:
        """Start compiling this model's recorded encoder and decoder exports in the background,
        before torch is imported (:mod:`._exports_ahead`): when the model will run them on the
        CPU as far as can be told without torch (device 'cpu' or 'auto', float32, no compile),
        the checkpoint's digests are in the book (:mod:`._checkpoint_digests`) and the backend
        is installed. Anything else (torch already imported, no record, a guessed thread count
        torch does not confirm) leaves the start as it was."""
        import sys

        from intrabench.models.runtime._checkpoint_digests import recorded_digests
        from intrabench.models.runtime._encoder_backends import (
            AUTO_ORDER,
            DecoderExports,
            EncoderExports,
            exports_dir,
            installed,
            open_ahead,
        )
        from intrabench.models.runtime._exports_ahead import torch_threads_guess

        if (
            "torch" in sys.modules
            or self._net is not None
            or self.checkpoint_file is None
            or not self.wants_exported_encoder()
            or self._exported is not _UNRESOLVED
            or str(self.requested_device or "auto") not in ("cpu", "auto")
            or self.precision not in ("auto", "fp32", "tf32")
            or self.encoder_weights != "float32"
            or self.compile
        ):
            return
        threads = torch_threads_guess()
        candidates = [
            b for b in (AUTO_ORDER if self.backend == "auto" else (self.backend,)) if installed(b)
        ]
        known_shape = self.encoder_input_shape_without_network()
        if threads is None or not candidates or known_shape is None:
            return
        directory = exports_dir(checkpoint_dir(self.checkpoint_directory))
        try:
            digests = recorded_digests(directory, self.checkpoint_sha256())
        except CheckpointError:
            return  # said where the checkpoint is read
        if not digests or "encoder" not in digests:
            return
        shape = (self.block_size_on("cpu"), *known_shape)
        exports: list[EncoderExports] = [
            EncoderExports(
                None,
                self.name,
                shape,
                directory,
                threads,
                build=lambda: None,
                weights=digests["encoder"],
                graph=self.ENCODER_GRAPH,
            )
        ]
        if self.EXPORTABLE_DECODER and "decoder" in digests:
            exports.append(
                DecoderExports(
                    None,
                    self.name,
                    self.decoder_embedding_shape(),
                    directory,
                    threads,
                    build=lambda: None,
                    weights=digests["decoder"],
                    graph=self.DECODER_GRAPH,
                )
            )
        for export in exports:
            if export.path.is_file():
                open_ahead(candidates[0], export.path, threads, export.INPUT_NAMES)

    def checkpoint_sha256(self) -> str:
        """The SHA-256 of :attr:`checkpoint_file`, after the checks :meth:`checked_state_dict`
        makes (the table's pinned hash, or an explicit file against the published one); once
        per model."""
        if self._checkpoint_sha256 is None:
            path = self.checkpoint_file
            if path is None:
                raise CheckpointError(f"{self.name} has no checkpoint file")
            self.check_checkpoint_file(path)
            pinned = CHECKPOINTS[self._table_key].sha256 if self._table_key else None
            if pinned is None:
                from intrabench.io.file_digests import remembered_sha256

                pinned = remembered_sha256(path)
            self._checkpoint_sha256 = pinned
        return self._checkpoint_sha256

    def checkpoint_digests(self) -> dict[str, str]:
        """The SHA-256 (:func:`._encoder_backends.weights_digest`) of the image encoder's
        weights (``'encoder'``) and of the exportable decoder's (``'decoder'``), read from the
        checked checkpoint without building the network (a recorded export then opens in a
        second: no network built, no timm imported); {} when the network is built already or
        the weights are not a checkpoint's. Once per model."""
        if self._net is not None or self.checkpoint_file is None:
            return {}
        if self._checkpoint_digests is None:
            from intrabench.models.runtime._checkpoint_digests import (
                record_digests,
                recorded_digests,
            )
            from intrabench.models.runtime._encoder_backends import exports_dir, tensors_digest

            directory = exports_dir(checkpoint_dir(self.checkpoint_directory))
            sha = self.checkpoint_sha256()
            wanted = {"encoder", "decoder"} if self.DECODER_PREFIXES else {"encoder"}
            digests = recorded_digests(directory, sha)
            if digests is None or not wanted <= set(digests):
                state = self.checked_state_dict(self.checkpoint_file)
                prefix = "image_encoder."
                digests = {
                    "encoder": tensors_digest(
                        {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
                    )
                }
                if self.DECODER_PREFIXES:
                    digests["decoder"] = tensors_digest(
                        {k: v for k, v in state.items() if k.startswith(self.DECODER_PREFIXES)}
                    )
                record_digests(directory, sha, digests)
            self._checkpoint_digests = {k: digests[k] for k in wanted}
        return self._checkpoint_digests

    @property
    def exported_decoder(self) -> Any:
        """The exported box decoder that runs instead of torch's, or None: for adapters that
        declare ``EXPORTABLE_DECODER``, on the exported encoder's backend (none when the
        encoder runs in torch). Resolved at the first decode or in :meth:`prepare`; a decoder
        that fails its export or check is said in one line and torch's is used."""
        if self._exported_decoder is _UNRESOLVED:
            encoder = self.exported_encoder
            self._exported_decoder = (
                None
                if encoder is None or not self.EXPORTABLE_DECODER
                else self._resolve_decoder(encoder.backend)
            )
        return self._exported_decoder

    def _resolve_decoder(self, backend: str) -> Any:
        from intrabench.models.runtime._encoder_backends import DecoderExports, exports_dir

        log = self.say
        digest = self.checkpoint_digests().get("decoder")
        exports = DecoderExports(
            None if digest else self.decoder_module(),
            self.name,
            self.decoder_embedding_shape(),
            exports_dir(checkpoint_dir(self.checkpoint_directory)),
            self.backend_threads(),
            log,
            build=self.decoder_module,
            weights=digest,
            graph=self.DECODER_GRAPH,
        )
        try:
            return exports.load(backend)
        except Exception as error:  # noqa: BLE001 - an export or a backend can fail many ways
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            log(f"the box decoder stays in torch: {reason}")
            return None

    def decoder_module(self) -> Any:
        """For ``EXPORTABLE_DECODER`` adapters: a torch module mapping a (1, C, h, w) slice
        embedding and a (1, 1, 4) box in the network's input pixels to low-resolution logits."""
        raise NotImplementedError(f"{self.name} has no exportable decoder")

    def decoder_embedding_shape(self) -> tuple[int, int, int, int]:
        """(1, C, h, w): the slice embedding :meth:`decoder_module` takes."""
        raise NotImplementedError(f"{self.name} has no exportable decoder")

    def say(self, message: str) -> None:
        """One line on stderr about this model's backends (an export, a failed check)."""
        import sys

        print(f"intrabench: {self.name}: {message}", file=sys.stderr)

    def encoder_input_shape_without_network(self) -> tuple[int, int, int] | None:
        """:meth:`encoder_input_shape` where the adapter knows it without building the
        network (for :meth:`open_exports_ahead`), else None."""
        return None

    def encoder_input_shape(self) -> tuple[int, int, int]:
        """(3, S, S): what :meth:`preprocess` gives per slice (for the export)."""
        size = int(self.net.image_encoder.img_size)
        return (3, size, size)

    @property
    def encoder_backend(self) -> str:
        """Who runs the image encoder: 'torch', 'onnxruntime' or 'openvino'."""
        exported = self.exported_encoder
        return "torch" if exported is None else exported.backend

    def _encode_slices(self, zs: list[int]) -> list[Any]:
        exported = self.exported_encoder  # exported and checked before the clock starts
        if exported is None:
            _ = self.net  # build and load before the clock starts
        started = time.perf_counter()
        with self.forward_passes("fp32", self.encodes_without_torch):  # intensities: float32
            batch = self.preprocess(zs)
        prepared = time.perf_counter()
        if exported is not None:
            embeddings = list(exported(batch))
        else:
            with forward_context(self.device, self.active_precision):
                embeddings = self.encode(batch)
        self._sync()
        self.stats.preprocess_seconds += prepared - started
        self.stats.encoder_seconds += time.perf_counter() - prepared
        self.stats.slices_encoded += len(zs)
        self.stats.encoder_batches += 1
        for z, embedding in zip(zs, embeddings):
            self.cache.put(z, embedding)
        return embeddings

    def embedding(self, z: int) -> Any:
        """The cached embedding of slice ``z``, or its block's encoded now (:meth:`encode_block`)."""
        cached = self.cache.get(int(z))
        if cached is None:
            block = self.encode_block(int(z))
            cached = self._encode_slices(block)[block.index(int(z))]
        return cached

    def _sync(self) -> None:
        if self.device_type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    # -- prediction ---------------------------------------------------------------------------
    def predict_slice(self, prompt: SlicePrompt, feedback: Any = None) -> SliceOutput:
        height, width = self.image.shape[1:]
        if prompt.is_empty:
            return SliceOutput(np.zeros((height, width), dtype=bool), None)
        embedding = self.embedding(prompt.z)
        started = time.perf_counter()
        with self.forward_passes(self.active_precision, self.decodes_without_torch):
            output = self.decode(embedding, prompt, feedback)
        self._sync()
        self.stats.decoder_seconds += time.perf_counter() - started
        self.stats.decoder_calls += 1
        return output

    def use_multimask(self, prompt: SlicePrompt, has_mask_input: bool) -> bool:
        """Whether to take the three-mask output (then the best predicted IoU is kept).

        'auto' follows the original model: 'single-point' models (SAM, SAM2) use the
        multimask output only for the ambiguous single click without box or mask input (SAM
        paper section 3; SAM2's ``multimask_max_pt_num=1``); 'always' models (SAM-Med2D's
        ``test.py``) always do; 'never' models (MedSAM) never do.
        """
        rule = self.AUTO_MULTIMASK if self.multimask == "auto" else self.multimask
        if rule == "always":
            return True
        if rule == "never":
            return False
        return len(prompt.points) == 1 and prompt.box is None and not has_mask_input


class TinyViTExport:
    """For adapters whose image encoder is TinyViT (LiteMedSAM, MobileSAM): the encoder's export
    runs :func:`._tinyvit_export.with_split_qkv` (each attention's query, key and value projected
    apart: the same embeddings to the bit, 2-6% faster a pass in OpenVINO), named ``qkv3`` in
    the export's file name. Listed before :class:`SamFamilyModel` among the adapter's bases."""

    ENCODER_GRAPH: ClassVar[str] = "qkv3"

    def encoder_export_module(self) -> Any:
        from intrabench.models.runtime._tinyvit_export import with_split_qkv

        return with_split_qkv(self.net.image_encoder)  # type: ignore[attr-defined]
