"""The local embedder's engines (torch, onnx) and precisions (float32, bfloat16): validation over HTTP,
ONNX vectors against torch float32 on real texts, bfloat16 where the CPU has it, `auto`, and a search on a
knowledge base embedded by the ONNX engine."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx
import numpy as np
import pytest

from agentkb.errors import BadRequest
from agentkb.kb.embedders import config as embedding_config
from agentkb.kb.embedders import cpu, local, onnx_model
from agentkb.kb.embedders.local import LocalEmbedder
from agentkb.kb.embedders.registry import EmbedderRegistry
from tests.helpers import assert_problem

SCIFACT = Path("/work/shared/data/scifact/corpus.jsonl.gz")
P = "/api/projects/mindsdb"
SENTENCES = [
    "A cat sits on the mat.",
    "Vector databases index embeddings for nearest-neighbour search.",
    "The mitochondria is the powerhouse of the cell, producing ATP through oxidative phosphorylation.",
    "x",
    "Quarterly tax filing deadlines are set by the revenue service. " * 12,  # past 256 tokens: truncated
]


def real_texts() -> list[str]:
    """Scientific abstracts (SciFact's first 24) where the data is present, else the sentences above."""
    if not SCIFACT.exists():
        return SENTENCES
    with gzip.open(SCIFACT, "rt") as handle:
        docs = [json.loads(next(handle)) for _ in range(24)]
    return SENTENCES + [f"{d['title']}. {d['text']}" for d in docs]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)))


async def test_onnx_vectors_match_torch_float32() -> None:
    texts = real_texts()
    reference = await LocalEmbedder(engine="torch", precision="float32", batch_size=8).embed_documents(texts)
    onnx = LocalEmbedder(engine="onnx", batch_size=8)
    assert (onnx.engine, onnx.precision) == ("onnx", "int8")
    vectors = await onnx.embed_documents(texts)
    assert vectors.shape == reference.shape == (len(texts), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = cosines(vectors, reference)
    # int8 activations are quantised per batch over every token: a one-character text (3 tokens, two of
    # them [CLS]/[SEP]) has the coarsest steps relative to its own values, and stays above 0.98
    assert similarity[3] >= 0.98 and np.delete(similarity, 3).min() >= 0.99, similarity
    assert await onnx.dimension() == 384
    # one text alone (no padding; its own activation ranges, so not the same bits) is as close to float32
    # as in a padded batch
    alone = await onnx.embed_query(texts[2])
    assert float(np.dot(alone, reference[2])) >= 0.99 and float(np.dot(alone, vectors[2])) >= 0.99


async def test_bfloat16_matches_float32_where_the_cpu_has_it() -> None:
    if not local.cpu_has_bf16():
        pytest.skip("this CPU has no hardware bfloat16 (avx512_bf16 / amx_bf16): precision auto is float32")
    texts = real_texts()
    reference = await LocalEmbedder(engine="torch", precision="float32").embed_documents(texts)
    auto = LocalEmbedder(engine="torch")
    assert auto.precision == "bfloat16"
    vectors = await auto.embed_documents(texts)
    assert vectors.dtype == np.float32 and cosines(vectors, reference).min() >= 0.99


async def test_bfloat16_runs_when_asked_for() -> None:
    vectors = await LocalEmbedder(engine="torch", precision="bfloat16").embed_documents(SENTENCES[:3])
    reference = await LocalEmbedder(engine="torch", precision="float32").embed_documents(SENTENCES[:3])
    assert vectors.dtype == np.float32 and cosines(vectors, reference).min() >= 0.99


def test_cpu_flags_decide_bfloat16(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n")
    assert not local.cpu_has_bf16(cpuinfo)
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16 amx_tile\n")
    assert local.cpu_has_bf16(cpuinfo)
    assert not local.cpu_has_bf16(tmp_path / "absent")
    expected = "bfloat16" if local.cpu_has_bf16() else "float32"
    assert local.cpu_has_bf16() == ("avx512_bf16" in cpu.cpu_flags() or "amx_bf16" in cpu.cpu_flags())
    assert local.resolve_precision("auto", "torch") == expected
    assert local.resolve_precision("float32", "torch") == "float32"


def test_cpu_flags_name_the_int8_kernels(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpus = {
        "fpu sse4_2 avx2 fma": "avx2",  # AMD Zen 3, Intel Skylake client: byte multiply-add (AVX2)
        "fpu avx2 avx512f avx512bw": "avx2",  # Intel Skylake-SP: AVX-512 without VNNI
        "fpu avx2 avx512f avx512_vnni avx512_bf16": "vnni",  # AMD Zen 4 / Zen 5, Intel Cascade Lake on
        "fpu avx2 avx_vnni": "vnni",  # Intel Alder Lake and later client cores
        "fpu avx512f amx_tile amx_int8 amx_bf16": "vnni",  # Intel Sapphire Rapids (AMX)
    }
    for flags, kernels in cpus.items():
        cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: x\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
        assert onnx_model.kernels(cpuinfo) == kernels, flags
        assert cpu.has_vnni(cpuinfo) == (kernels == "vnni")
    assert onnx_model.kernels(tmp_path / "absent") == "avx2" and cpu.cpu_flags(tmp_path / "absent") == set()
    assert onnx_model.kernels() == ("vnni" if cpu.VNNI_FLAGS & cpu.cpu_flags() else "avx2")


def test_auto_engine_is_torch_when_installed_else_onnx(monkeypatch: pytest.MonkeyPatch) -> None:
    assert embedding_config.torch_installed()  # the suite installs the torch extra ('.[dev]')
    assert LocalEmbedder().engine == "torch"
    monkeypatch.setattr(local, "torch_installed", lambda: False)
    monkeypatch.setattr(embedding_config, "torch_installed", lambda: False)
    assert LocalEmbedder().engine == "onnx"
    with pytest.raises(BadRequest, match=r"agentkb\[torch\]"):
        LocalEmbedder(engine="torch")
    with pytest.raises(BadRequest, match="engine"):
        embedding_config.normalize(
            {"engine": "torch"}, {"provider": "local", "model_name": "all-MiniLM-L6-v2"}
        )


def test_onnx_refuses_a_tampered_model_file(tmp_path: Path) -> None:
    bundled = onnx_model.BUNDLED_MODEL
    assert onnx_model.bundled_files() == (bundled, onnx_model.BUNDLED_TOKENIZER)
    tampered = tmp_path / "model.onnx"
    data = bytearray(bundled.read_bytes())
    data[len(data) // 2] ^= 1  # one bit of one weight
    tampered.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="sha256 [0-9a-f]{64}, expected"):
        onnx_model.bundled_files(tampered)
    tampered.write_bytes(bytes(data[: len(data) // 2]))  # a truncated copy
    with pytest.raises(RuntimeError, match="refusing to load it"):
        onnx_model.bundled_files(tampered)
    with pytest.raises(RuntimeError, match="sha256 missing"):
        onnx_model.bundled_files(tmp_path / "absent.onnx")
    # the model and its tokenizer ship in agentkb, with the model's licence (Apache-2.0) and notice
    folder = onnx_model.BUNDLED_DIR
    assert (
        "Apache License" in (folder / "NOTICE").read_text()
        and "model.onnx" in (folder / "NOTICE").read_text()
    )
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in (folder / "LICENSE").read_text()


def test_onnx_other_models_need_a_directory_with_both_files(tmp_path: Path) -> None:
    with pytest.raises(BadRequest, match="model.onnx and tokenizer.json"):
        onnx_model.directory_files(str(tmp_path))


def test_registry_keeps_engines_apart() -> None:
    registry = EmbedderRegistry()
    base = {"provider": "local", "model_name": "all-MiniLM-L6-v2"}
    onnx, torch = registry.get({**base, "engine": "onnx"}), registry.get({**base, "engine": "torch"})
    assert onnx is not torch and isinstance(onnx, LocalEmbedder) and onnx.engine == "onnx"
    assert registry.get({**base, "engine": "onnx"}) is onnx


def test_bad_engine_and_precision_are_400s(client: httpx.Client, unique: str) -> None:
    url = f"{P}/knowledge_bases"
    cases = [
        ({"engine": "tensorflow"}, "engine"),
        ({"engine": 3}, "engine"),
        ({"precision": "float16"}, "precision"),
        ({"engine": "onnx", "precision": "bfloat16"}, "bfloat16"),
    ]
    for options, field in cases:
        model = {"provider": "local", "model_name": "all-MiniLM-L6-v2", **options}
        body = {"knowledge_base": {"name": f"eng_{unique}", "embedding_model": model}}
        problem = assert_problem(client.post(url, json=body), 400)
        assert field in problem["detail"], (options, problem)
    assert_problem(client.get(f"{url}/eng_{unique}"), 404)  # nothing half-created


def test_search_on_a_kb_embedded_by_onnx(client: httpx.Client, unique: str) -> None:
    kb = f"onnx_{unique}"
    model = {"provider": "local", "model_name": "all-MiniLM-L6-v2", "engine": "onnx", "precision": "auto"}
    r = client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb, "embedding_model": model}})
    assert r.status_code == 201, r.text
    assert r.json()["embedding_model"]["engine"] == "onnx"
    rows = [
        {"id": 1, "content": "Otters hold hands while they sleep so they do not drift apart."},
        {"id": 2, "content": "The central bank raised interest rates by a quarter point."},
        {"id": 3, "content": "Compilers translate source code into machine instructions."},
    ]
    r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}})
    assert r.status_code == 200, r.text
    hits = client.post(
        f"{P}/knowledge_bases/{kb}/search",
        json={"query": "sea mammals sleeping together", "hybrid_search": False},
    )
    assert hits.status_code == 200, hits.text
    assert [str(h["id"]) for h in hits.json()][0] == "1", hits.json()
