"""all-MiniLM-L6-v2 on ONNX Runtime, without torch: the int8 ONNX file in minilm/ (model.onnx, its sha256
checked before it is loaded; bench/minilm_onnx.py rebuilds it from the float32 model), the model's own
WordPiece tokenizer (`tokenizers`, tokenizer.json beside it), and sentence-transformers' pooling: the mean of
the token vectors under the attention mask, L2-normalised. Other models: a directory with `model.onnx`
(inputs input_ids, attention_mask and optionally token_type_ids; output 0 the token vectors) and
`tokenizer.json`.

The bundled file is ONNX Runtime's fused BERT graph (one Attention operator per layer, SkipLayerNormalization,
BiasGelu) quantised dynamically: signed int8 weights per output channel, activations quantised per batch at
run time, matrix products in int8 with int32 sums (the FFN down-projections of the first three layers stay
float32, see bench/minilm_onnx.py). ONNX Runtime picks the kernels for this CPU when the
session starts: VNNI (AVX512-VNNI, AVX-VNNI) or AMX where the CPU has them, else AVX2's
multiply-add of byte pairs, whose 16-bit intermediate sums can saturate on large products (the vectors stay
at cosine >= 0.99 to float32 there too; `kernels()` names the path)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

from agentkb.errors import BadRequest
from agentkb.kb.embedders import cpu
from agentkb.kb.embedders.base import Vectors, l2_normalize

BUNDLED_DIR = Path(__file__).parent / "minilm"
BUNDLED_MODEL = BUNDLED_DIR / "model.onnx"
BUNDLED_TOKENIZER = BUNDLED_DIR / "tokenizer.json"
BUNDLED_SHA256 = "372c7cc7675366ca9c9cb0a1e786a221125292708a0feb899735af4178f71ed6"
MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json)


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def bundled_files(model: Path = BUNDLED_MODEL) -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) of the bundled all-MiniLM-L6-v2; RuntimeError unless the ONNX file's
    sha256 is BUNDLED_SHA256 (a changed or truncated file is never loaded)."""
    digest = _sha256(model) if model.is_file() else "missing"
    if digest != BUNDLED_SHA256:
        raise RuntimeError(f"{model}: sha256 {digest}, expected {BUNDLED_SHA256}; refusing to load it")
    return model, BUNDLED_TOKENIZER


def kernels(cpuinfo: Path = cpu.CPUINFO) -> str:
    """The int8 kernels ONNX Runtime runs the bundled model with on this CPU: `vnni` (AVX512-VNNI,
    AVX-VNNI or AMX-INT8) or `avx2` (no int8 dot-product instructions)."""
    return "vnni" if cpu.has_vnni(cpuinfo) else "avx2"


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
        # all of ONNX Runtime's graph rewrites, the layout ones too (int8 matrix products fused with their
        # activation quantisation and rescaling)
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads or 0  # 0: ONNX Runtime's default (the physical cores)
        options.inter_op_num_threads = 1
        # idle worker threads sleep instead of spinning between operators and batches: the embedding
        # thread shares the CPU with the server's event loop and the database
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
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
