"""Shared machinery of the 2D SAM-family adapters (SAM, SAM2, MedSAM, SAM-Med2D).

What lives here:

* :class:`EmbeddingCache`: slice embeddings keyed by axial slice index, least-recently-used
  eviction by bytes (and optionally by entry count). It is cleared when the case changes.
* :class:`SamFamilyModel`: a :class:`~intrabench.protocols.SliceModel` that encodes the slices
  it is asked to predict in fixed blocks of ``batch_size`` consecutive slices (see
  :meth:`SamFamilyModel.encode_block`), caches their embeddings for every target, prompter and
  refinement step of the case, and counts encoder/decoder work
  (:attr:`SamFamilyModel.stats`). Subclasses implement four small hooks: build the network,
  turn slices into the encoder's input batch, run the encoder, decode one prompt.
* Intensity helpers (percentile window, 8-bit scaling) and the prompt/mask geometry shared by
  the ``segment_anything``-based models.

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

import time
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from intrabench.io.checkpoints import (
    CHECKPOINTS,
    CheckpointError,
    check_fits,
    checkpoint_dir,
    checkpoint_path,
    is_present,
    load_checkpoint,
    load_state_dict_strict,
    strip_prefix,
)
from intrabench.io.volume import Volume
from intrabench.protocols import SliceModel, SliceOutput
from intrabench.types import SlicePrompt

from ._encoder_backends import BACKENDS
from ._encoder_speed import (
    ATTENTIONS,
    ENCODER_WEIGHTS,
    compile_in_place,
    resolve_attention,
    use_bf16_weights,
    use_fused_attention,
)
from ._precision import (
    check_choice,
    check_precision,
    forward_context,
    keep_float32,
    resolve_precision,
)

#: percentile window of Appendix A (0.5th and 99.5th percentiles)
PERCENTILES = (0.5, 99.5)

_UNRESOLVED = object()


def exportable_models() -> list[str]:
    """The registered models whose encoder another backend can run."""
    from intrabench import registry

    return sorted(name for name, cls in registry.models.items()
                  if getattr(cls, "EXPORTABLE_ENCODER", False))


# --------------------------------------------------------------------------------------
# Intensities
# --------------------------------------------------------------------------------------


def percentile_window(values: np.ndarray, low: float = PERCENTILES[0],
                      high: float = PERCENTILES[1]) -> tuple[float, float]:
    """The (low, high) percentiles of ``values`` (all voxels), never degenerate."""
    lo, hi = np.percentile(np.asarray(values, dtype=np.float32), [low, high])
    lo, hi = float(lo), float(hi)
    if not hi > lo:
        hi = lo + 1.0
    return lo, hi


def to_uint8(image: np.ndarray, window: tuple[float, float]) -> np.ndarray:
    """Clip ``image`` to ``window`` and scale it linearly to 0..255, rounded to uint8.

    All four models were trained on 8-bit images, so the adapters quantise like their
    pipelines do (rounded here; the reference truncates).
    """
    lo, hi = window
    scaled = (np.clip(image.astype(np.float32), lo, hi) - lo) * (255.0 / (hi - lo))
    return np.rint(scaled).astype(np.uint8)


# --------------------------------------------------------------------------------------
# Embedding cache
# --------------------------------------------------------------------------------------


def tensor_bytes(value: Any) -> int:
    """Bytes held by a tensor or a (nested) tuple/list/dict of tensors."""
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return sum(tensor_bytes(v) for v in value)
    if hasattr(value, "element_size") and hasattr(value, "nelement"):
        return int(value.element_size() * value.nelement())
    return 0


class EmbeddingCache:
    """Slice embeddings (any tensor structure) keyed by slice, LRU-evicted by bytes.

    ``max_bytes`` bounds the memory held (an entry larger than the bound is not kept);
    ``max_entries`` optionally bounds the number of slices.
    """

    def __init__(self, max_bytes: int, max_entries: int | None = None) -> None:
        self.max_bytes = int(max_bytes)
        self.max_entries = None if max_entries is None else int(max_entries)
        self._items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self.bytes = 0
        self.evictions = 0

    def __contains__(self, key: Any) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Any) -> Any | None:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: Any, value: Any) -> None:
        size = tensor_bytes(value)
        if key in self._items:
            self.bytes -= self._items.pop(key)[1]
        if size > self.max_bytes or self.max_entries == 0:
            return
        self._items[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes or (
            self.max_entries is not None and len(self._items) > self.max_entries
        ):
            _, (_, evicted) = self._items.popitem(last=False)
            self.bytes -= evicted
            self.evictions += 1

    def clear(self) -> None:
        self._items.clear()
        self.bytes = 0


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
      (see :mod:`intrabench.models._precision`); masks are bool and fed-back logits float32.
    * ``batch_size``: slices per encoder forward pass, 'auto' (default: 4 on CUDA, 1
      elsewhere) or a number. The volume is encoded in fixed blocks of that many consecutive
      axial slices (:meth:`encode_block`), so that a slice's embedding does not depend on the
      order in which episodes asked for slices. On a CPU every extra slice of a block costs
      nearly its full price (docs/performance.md, "Fixed encoder blocks").
    * ``cache_mb``: memory bound of the slice-embedding cache (MiB, on the model's device);
      ``cache_slices``: optional bound on the number of cached slices.
    * ``multimask``: 'auto' (the original model's rule, see each adapter), 'always' (three
      masks, keep the best predicted IoU) or 'never' (the single-mask output).
    * ``attention``: 'auto' (fused ``scaled_dot_product_attention`` on CUDA, upstream's code
      elsewhere), 'fused' or 'reference' (segment_anything encoders; see
      :mod:`intrabench.models._encoder_speed`).
    * ``encoder_weights``: 'float32' (default) or 'bf16' (the image encoder's weights stored in
      bf16, run without autocast, embeddings handed on in float32).
    * ``compile``: ``torch.compile`` the image encoder (the first encode compiles it).
    * ``backend``: who runs the image encoder, for adapters that declare
      ``EXPORTABLE_ENCODER``: 'auto' (default: for adapters whose exported speed was measured,
      ``AUTO_EXPORT``, on the CPU in float32 the fastest installed and verified of OpenVINO
      and ONNX Runtime; else torch), 'torch', 'onnxruntime', 'openvino' (see
      :mod:`intrabench.models._encoder_backends`).
    * ``weights``: 'checkpoint' (default) or 'random'. **'random' and ``tiny=True`` are for tests
      and timing only**: random weights produce meaningless masks; ``tiny`` builds a small
      configuration of the same architecture (seeded by ``seed``). A tiny model may load a
      checkpoint saved from a tiny model by passing ``checkpoint`` explicitly.

    A missing checkpoint raises :class:`~intrabench.io.checkpoints.CheckpointError` **at
    construction** (naming the file and where to get it); the weights themselves are read
    lazily, at the first encode.
    """

    #: the image encoder can be exported to ONNX and run by another backend (``backend``)
    EXPORTABLE_ENCODER: ClassVar[bool] = False
    #: ``backend: auto`` tries the exported backends (only where their speed was measured)
    AUTO_EXPORT: ClassVar[bool] = False
    #: variant -> CHECKPOINTS key; first entry is documentation only, DEFAULT_VARIANT decides
    VARIANTS: ClassVar[dict[str, str]] = {}
    DEFAULT_VARIANT: ClassVar[str] = ""
    #: default 'auto' multimask rule of the original model: 'single-point', 'always', 'never'
    AUTO_MULTIMASK: ClassVar[str] = "single-point"

    def __init__(self, variant: str | None = None, checkpoint: str | None = None,
                 checkpoint_dir: str | None = None, device: str = "auto", batch_size: int | str = "auto",
                 cache_mb: float = 2048.0, cache_slices: int | None = None,
                 multimask: str = "auto", weights: str = "checkpoint", tiny: bool = False,
                 seed: int = 0, precision: str = "auto", attention: str = "auto",
                 encoder_weights: str = "float32", compile: bool = False,
                 backend: str = "auto") -> None:
        super().__init__()
        variant = variant or self.DEFAULT_VARIANT
        if variant not in self.VARIANTS:
            raise ValueError(f"unknown variant '{variant}'; valid: {', '.join(self.VARIANTS)}")
        if weights not in ("checkpoint", "random"):
            raise ValueError(f"weights must be 'checkpoint' or 'random', not '{weights}'")
        if multimask not in ("auto", "always", "never"):
            raise ValueError(f"multimask must be 'auto', 'always' or 'never', not '{multimask}'")
        if batch_size != "auto" and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                     or batch_size < 1):
            raise ValueError(f"batch_size must be 'auto' or a whole number >= 1, not {batch_size!r}")
        self.variant = variant
        self.weights = weights
        self.tiny = bool(tiny)
        self.seed = int(seed)
        self.batch_size = batch_size
        self.multimask = multimask
        self.requested_device = device
        self._device: Any = None
        self.precision = check_precision(precision)
        self.attention = check_choice("attention", attention, ATTENTIONS)
        self.encoder_weights = check_choice("encoder_weights", encoder_weights, ENCODER_WEIGHTS)
        self.compile = bool(compile)
        self.backend = check_choice("backend", backend, BACKENDS)
        if backend not in ("auto", "torch") and not self.EXPORTABLE_ENCODER:
            raise ValueError(f"backend '{backend}' is offered for the encoders of "
                             f"{', '.join(exportable_models())}; use 'torch' or 'auto'")
        self.checkpoint_directory = checkpoint_dir
        self._exported: Any = _UNRESOLVED
        if precision == "fp16":  # refuse fp16 on the CPU now, not at the first encode
            resolve_precision(precision, self.device)
        self.checkpoint_file: Path | None = None
        if weights == "checkpoint":
            if self.tiny and not checkpoint:
                raise ValueError("tiny=True with weights='checkpoint' needs an explicit "
                                 "checkpoint file saved from a tiny model")
            if self.tiny:
                self.checkpoint_file = Path(checkpoint).expanduser()
                if not self.checkpoint_file.is_file():
                    raise CheckpointError(f"checkpoint file {self.checkpoint_file} not found")
            else:
                self.checkpoint_file = checkpoint_path(self.VARIANTS[variant], checkpoint_dir,
                                                       checkpoint)
        self.cache = EmbeddingCache(int(cache_mb * 2**20), cache_slices)
        self.stats = EncoderStats()
        self._net: Any = None
        self._case_state: dict[str, Any] = {}
        self._block_size: int | None = None

    # -- listing --------------------------------------------------------------------------
    @classmethod
    def availability(cls, directory: str | None = None) -> str:
        """'ready' when the default variant's checkpoint is present, else what is missing."""
        key = cls.VARIANTS[cls.DEFAULT_VARIANT]
        others = [v for v, k in cls.VARIANTS.items()
                  if v != cls.DEFAULT_VARIANT and is_present(k, directory)]
        if is_present(key, directory):
            return "ready" + (f" (also: {', '.join(others)})" if others else "")
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
    def active_precision(self) -> str:
        """The precision the forward passes run in on this device: 'fp32', 'bf16' or 'fp16'."""
        return resolve_precision(self.precision, self.device)

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
        """Build the network and load its weights now (see :meth:`Model.prepare`)."""
        self.net  # noqa: B018 - the property builds it

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

    def load_weights(self, net: Any, path: Path) -> None:
        """Load ``path`` strictly into ``net`` (readable key diff on mismatch)."""
        state = self.extract_state_dict(load_checkpoint(path))
        load_state_dict_strict(net, state, source=str(path),
                               ignore_unexpected=self.IGNORED_CHECKPOINT_KEYS)

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
        """How this model sees the case's slices in-plane (:mod:`intrabench.io.slice_view`):
        the adapter's ``slice_view`` ('canonical' when it has none), once per case."""
        from intrabench.io.slice_view import SliceView

        return self.case_value("view", lambda: SliceView.of(
            self.image, getattr(self, "slice_view", "canonical")))

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
            wanted = self.batch_size
            if wanted == "auto":
                wanted = 4 if getattr(self.device, "type", "") == "cuda" else 1
            limit = int(wanted)
            if self.cache.max_entries is not None:
                limit = min(limit, self.cache.max_entries)
            entry = self.embedding_nbytes()
            if entry:
                limit = min(limit, self.cache.max_bytes // entry)
            self._block_size = max(1, limit)
        return self._block_size

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
        (exported, checked) at the first encode."""
        if self._exported is _UNRESOLVED:
            self._exported = None
            if self.EXPORTABLE_ENCODER and (self.backend not in ("auto", "torch")
                                            or (self.backend == "auto" and self.AUTO_EXPORT)):
                self._exported = self._resolve_backend()
        return self._exported

    def _resolve_backend(self) -> Any:
        import sys

        import torch

        from ._encoder_backends import EncoderExports, choose_backend, exports_dir

        usable = (getattr(self.device, "type", "") == "cpu" and self.active_precision == "fp32"
                  and self.encoder_weights == "float32" and not self.compile)
        if not usable:
            if self.backend != "auto":
                raise CheckpointError(f"backend '{self.backend}' runs the encoder on the CPU in "
                                      "float32 only (without compile or bf16 weights)")
            return None
        shape = (self.block_size, *self.encoder_input_shape())
        exports = EncoderExports(self.net.image_encoder, self.name, shape,
                                 exports_dir(checkpoint_dir(self.checkpoint_directory)),
                                 torch.get_num_threads())
        return choose_backend(self.backend, exports,
                              lambda message: print(f"intrabench: {self.name}: {message}",
                                                    file=sys.stderr))

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
        _ = self.net  # build and load before the clock starts
        exported = self.exported_encoder  # exported and checked before the clock starts
        started = time.perf_counter()
        with forward_context(self.device, "fp32"):  # intensities in float32
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
        if getattr(self.device, "type", "") == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    # -- prediction ---------------------------------------------------------------------------
    def predict_slice(self, prompt: SlicePrompt, feedback: Any = None) -> SliceOutput:
        height, width = self.image.shape[1:]
        if prompt.is_empty:
            return SliceOutput(np.zeros((height, width), dtype=bool), None)
        embedding = self.embedding(prompt.z)
        started = time.perf_counter()
        with forward_context(self.device, self.active_precision):
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


# --------------------------------------------------------------------------------------
# segment_anything helpers (SAM, MedSAM, SAM-Med2D)
# --------------------------------------------------------------------------------------

#: SAM's pixel statistics (0..255 RGB), also used by SAM-Med2D
SAM_PIXEL_MEAN = (123.675, 116.28, 103.53)
SAM_PIXEL_STD = (58.395, 57.12, 57.375)


@dataclass(frozen=True)
class SamConfig:
    """Hyper-parameters of a segment_anything ``Sam`` (full-size or tiny)."""

    embed_dim: int
    depth: int
    num_heads: int
    global_attn_indexes: tuple[int, ...]
    image_size: int = 1024
    patch_size: int = 16
    window_size: int = 14
    prompt_dim: int = 256
    decoder_mlp_dim: int = 2048
    decoder_heads: int = 8
    iou_hidden_dim: int = 256
    adapter: bool = False


SAM_CONFIGS: dict[str, SamConfig] = {
    "vit_h": SamConfig(1280, 32, 16, (7, 15, 23, 31)),
    "vit_l": SamConfig(1024, 24, 16, (5, 11, 17, 23)),
    "vit_b": SamConfig(768, 12, 12, (2, 5, 8, 11)),
}

#: a small configuration of the same architecture, for tests and timing only
TINY_SAM = SamConfig(embed_dim=64, depth=2, num_heads=2, global_attn_indexes=(1,),
                     image_size=256, window_size=8, prompt_dim=32, decoder_mlp_dim=64,
                     decoder_heads=2, iou_hidden_dim=32)


def build_sam(config: SamConfig) -> Any:
    """A segment_anything ``Sam`` for ``config`` (random weights); with ``config.adapter`` every
    encoder block is a SAM-Med2D :class:`~intrabench.models.sam_med2d.AdapterBlock`."""
    from functools import partial

    import torch

    from ._segment_anything import modeling

    # the network's modules only: segment_anything's own __init__ imports torchvision (1.4 s)
    sam_modules = modeling()
    ImageEncoderViT, MaskDecoder = sam_modules.ImageEncoderViT, sam_modules.MaskDecoder  # noqa: N806
    PromptEncoder, Sam = sam_modules.PromptEncoder, sam_modules.Sam  # noqa: N806
    TwoWayTransformer = sam_modules.TwoWayTransformer  # noqa: N806

    grid = config.image_size // config.patch_size
    norm = partial(torch.nn.LayerNorm, eps=1e-6)
    encoder = ImageEncoderViT(
        depth=0 if config.adapter else config.depth,
        embed_dim=config.embed_dim, img_size=config.image_size, mlp_ratio=4, norm_layer=norm,
        num_heads=config.num_heads, patch_size=config.patch_size, qkv_bias=True,
        use_rel_pos=True, global_attn_indexes=config.global_attn_indexes,
        window_size=config.window_size, out_chans=config.prompt_dim,
    )
    if config.adapter:
        from ._sam_med2d_adapter import adapter_classes

        AdapterBlock = adapter_classes()[1]  # noqa: N806 - a class
        for index in range(config.depth):
            window = 0 if index in config.global_attn_indexes else config.window_size
            encoder.blocks.append(AdapterBlock(
                dim=config.embed_dim, num_heads=config.num_heads, mlp_ratio=4, qkv_bias=True,
                norm_layer=norm, use_rel_pos=True, window_size=window, input_size=(grid, grid)))
    return Sam(
        image_encoder=encoder,
        prompt_encoder=PromptEncoder(
            embed_dim=config.prompt_dim, image_embedding_size=(grid, grid),
            input_image_size=(config.image_size, config.image_size), mask_in_chans=16),
        mask_decoder=MaskDecoder(
            num_multimask_outputs=3,
            transformer=TwoWayTransformer(depth=2, embedding_dim=config.prompt_dim,
                                          mlp_dim=config.decoder_mlp_dim,
                                          num_heads=config.decoder_heads),
            transformer_dim=config.prompt_dim, iou_head_depth=3,
            iou_head_hidden_dim=config.iou_hidden_dim),
        pixel_mean=list(SAM_PIXEL_MEAN), pixel_std=list(SAM_PIXEL_STD),
    )


def sam_embedding_nbytes(net: Any) -> int:
    """Bytes of one float32 segment_anything image embedding (C, h, w)."""
    height, width = net.prompt_encoder.image_embedding_size
    return 4 * net.prompt_encoder.embed_dim * height * width


def slice_batch(images: Iterable[np.ndarray], device: Any) -> Any:
    """Stack 8-bit (y, x) slices into a float tensor (B, 3, y, x) of 0..255 (RGB replicated)."""
    import torch

    stacked = np.stack([np.asarray(image) for image in images]).astype(np.float32)
    tensor = torch.from_numpy(stacked).to(device)
    return tensor[:, None].expand(-1, 3, -1, -1).contiguous()


def prompt_tensors(prompt: SlicePrompt, scale_y: float, scale_x: float, device: Any
                   ) -> tuple[Any, Any, Any]:
    """(coords (1, N, 2) as (x, y), labels (1, N), box (1, 4) as x0, y0, x1, y1) in the network
    input frame (per-axis scale factors); None where the prompt has no points / no box."""
    import torch

    coords = labels = box = None
    if len(prompt.points):
        xy = prompt.points[:, ::-1].astype(np.float32) * np.array([scale_x, scale_y], np.float32)
        coords = torch.as_tensor(xy, device=device)[None]
        labels = torch.as_tensor(prompt.labels.astype(np.int64), device=device)[None].int()
    if prompt.box is not None:
        b = prompt.box
        values = np.array([b.x_min * scale_x, b.y_min * scale_y, b.x_max * scale_x,
                           b.y_max * scale_y], dtype=np.float32)
        box = torch.as_tensor(values, device=device)[None]
    return coords, labels, box


def feedback_tensor(feedback: Any, device: Any) -> Any:
    """Low-res logits (h, w) from the previous step as the (1, 1, h, w) mask input, or None."""
    import torch

    if feedback is None:
        return None
    return torch.as_tensor(np.asarray(feedback, dtype=np.float32), device=device)[None, None]


def sam_decode(net: Any, embedding: Any, coords: Any, labels: Any, box: Any, mask_input: Any,
               multimask: bool) -> tuple[Any, Any]:
    """segment_anything prompt encoder + mask decoder on one cached embedding (C, h, w).

    Returns the chosen low-res logits (1, 1, h_low, w_low) and its predicted IoU: the single
    output, or with ``multimask`` the best predicted IoU of the three.
    """
    points = (coords, labels) if coords is not None else None
    sparse, dense = net.prompt_encoder(points=points, boxes=box, masks=mask_input)
    low_res, iou = net.mask_decoder(
        image_embeddings=embedding[None], image_pe=net.prompt_encoder.get_dense_pe(),
        sparse_prompt_embeddings=sparse, dense_prompt_embeddings=dense,
        multimask_output=multimask)
    best = int(iou[0].float().argmax()) if multimask else 0
    return low_res[:, best:best + 1], iou[0, best]


def logits_feedback(low_res: Any) -> np.ndarray:
    """The (h_low, w_low) float32 numpy logits handed back at the next refinement step."""
    return low_res[0, 0].float().cpu().numpy().astype(np.float32)
