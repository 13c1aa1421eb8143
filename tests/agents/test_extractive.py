"""The keyless `extractive` model answers with the sentences that answer the question, not whole documents,
and its `sources` are exactly the chunks it quotes (real KBs, the default local embedder, real HTTP)."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest

from agentkb.agents.providers import sentences

P = "/api/projects/mindsdb"

MANUAL = (
    "The X200 router ships with a quick-start card, a power adapter and a network cable. "
    "Its case is made of recycled plastic and comes in white or black.\n\n"
    "To reset the router to factory settings, hold the recessed button on the back for ten seconds. "
    "The status light blinks amber while the settings are erased.\n\n"
    "Warranty claims go through the shop where the device was bought. Keep the receipt: it is the proof "
    "of purchase for the two-year warranty."
)
BILLING = (
    "Invoices are emailed on the first working day of each month. "
    "Payment is due within thirty days; late payments incur a fee of two percent.\n\n"
    "Customers can download past invoices from the billing page of their account."
)
SHIPPING = (
    "Orders placed before noon are shipped the same day. Delivery takes two to four working days.\n\n"
    "Returns are free within thirty days of delivery."
)


@pytest.fixture(scope="module")
def manual_kb(base_url: str) -> str:
    name = f"extractive_kb_{uuid.uuid4().hex[:8]}"
    rows = [
        {"id": "manual", "content": MANUAL},
        {"id": "billing", "content": BILLING},
        {"id": "shipping", "content": SHIPPING},
    ]
    with httpx.Client(base_url=base_url, timeout=180) as c:
        created = c.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": name}})
        assert created.status_code == 201, created.text
        inserted = c.put(f"{P}/knowledge_bases/{name}", json={"knowledge_base": {"rows": rows}})
        assert inserted.status_code == 200, inserted.text
    return name


def _agent(client: httpx.Client, kb: str) -> str:
    name = f"ex_{uuid.uuid4().hex[:8]}"
    r = client.post(f"{P}/agents", json={"agent": {"name": name, "data": {"knowledge_bases": [kb]}}})
    assert r.status_code == 201, r.text
    return name


def _ask(client: httpx.Client, agent: str, question: str) -> dict[str, Any]:
    r = client.post(
        f"{P}/agents/{agent}/completions", json={"messages": [{"question": question, "answer": ""}]}
    )
    assert r.status_code == 200, r.text
    return r.json()["message"]  # type: ignore[no-any-return]


def _cited(content: str) -> list[str]:
    """The chunk ids the answer names in its `(source: <kb>, <chunk id>)` lines."""
    return re.findall(r"\(source: [^,]+, ([^)]+)\)$", content, re.MULTILINE)


def test_answer_is_the_answering_sentence_not_the_document(client: httpx.Client, manual_kb: str) -> None:
    message = _ask(
        client, _agent(client, f"mindsdb.{manual_kb}"), "How do I reset the router to factory settings?"
    )
    content = message["content"]
    assert content.startswith("Based on the knowledge base:\n\n1. ")
    assert "hold the recessed button on the back for ten seconds" in content
    # the rest of the document, and the other documents, are not in the answer
    for unrelated in (
        "quick-start card",
        "recycled plastic",
        "Warranty claims",
        "Keep the receipt",
        "Invoices",
    ):
        assert unrelated not in content, content
    # retrieval found several chunks (the context), the answer quotes one: the sources are that one
    assert len(message["context"]) > 1
    assert len(message["sources"]) == 1
    source = message["sources"][0]
    assert source["kind"] == "kb" and source["name"] == f"mindsdb.{manual_kb}"
    assert source["chunk_id"].startswith("manual:")
    assert _cited(content) == [source["chunk_id"]]


def test_sources_are_the_quoted_chunks_in_answer_order(client: httpx.Client, manual_kb: str) -> None:
    agent = _agent(client, f"mindsdb.{manual_kb}")
    message = _ask(
        client, agent, "Within how many days is payment due, and within how many days are returns free?"
    )
    content = message["content"]
    assert "Payment is due within thirty days" in content and "Returns are free within thirty days" in content
    assert "Invoices are emailed" not in content and "same day" not in content
    chunk_ids = [s["chunk_id"] for s in message["sources"]]
    assert sorted(c.split(":")[0] for c in chunk_ids) == ["billing", "shipping"]
    assert _cited(content) == chunk_ids  # one numbered line per quoted chunk, in the order of the sources

    # the streamed output carries the same answer and sources
    r = client.post(
        f"{P}/agents/{agent}/completions/stream",
        json={"messages": [{"question": "Within how many days are returns free?", "answer": ""}]},
    )
    assert r.status_code == 200, r.text
    output = next(line for line in r.text.splitlines() if line.startswith('data: {"output"'))
    assert "Returns are free within thirty days" in output and "Payment" not in output
    assert '"chunk_id": "shipping:' in output and '"chunk_id": "billing:' not in output


def test_no_matching_sentence_falls_back_to_the_best_passage_opening() -> None:
    chosen = sentences.select(
        "zebra migration", ["First sentence here. Second one.", "Other text."], [0.4, 0.9]
    )
    assert [(s.passage, s.text) for s in chosen] == [(1, "Other text.")]


def test_sentence_selection_keeps_few_in_passage_order() -> None:
    passage = (
        "Cats sleep a lot. Dogs bark at the mailman. Cats purr when content. Birds sing at dawn. "
        "Cats groom themselves daily. Cats climb trees. Fish swim."
    )
    chosen = sentences.select("Why do cats purr?", [passage], [1.0])
    assert [s.text for s in chosen] == ["Cats purr when content."]
    many = sentences.select("cats", [passage], [1.0])
    assert len(many) == sentences.MAX_SENTENCES
    assert [s.position for s in many] == sorted(s.position for s in many)
    assert all(s.text.startswith("Cats") for s in many)


def test_sentence_split() -> None:
    text = 'First line. Second line!\n\nA heading\n- a bullet point\n- 3.5 percent more. "Quoted" start? yes.'
    assert sentences.split_sentences(text) == [
        "First line.",
        "Second line!",
        "A heading",
        "- a bullet point",
        "- 3.5 percent more.",
        '"Quoted" start? yes.',
    ]
