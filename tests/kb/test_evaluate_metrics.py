"""kb/evaluate.py: the answers MindsDB 26.1's own evaluator code gives for the same inputs
(`EvaluateRerank.evaluate_retrieval_metrics`, `EvaluateDocID.summarize_results`, run once on these inputs
in MindsDB's environment), the parsing of the LLM's question/answer, and the added hit/recall/MRR at k."""

from __future__ import annotations

import json

import pytest

from agentkb.kb.evaluate import (
    DocResult,
    RelevancyResult,
    parse_question_answer,
    relevant_ids,
    summarize_doc_id,
    summarize_relevancy,
)

SCORES = [
    [],
    [],
    [],
    [0.47, 0.38, 0.21],
    [],
    [0.61, 0.77, 0.7],
    [0.8, 0.59, 0.1, 0.32, 0.02, 0.65, 0.01, 0.88, 0.69, 0.97],
]
POSITIONS = [19, 3, 12, 12, 12, 3, -1]


def test_relevancy_metrics_as_mindsdb() -> None:
    results = [RelevancyResult(f"q{i}", "a", s, 0.1 * i) for i, s in enumerate(SCORES)]
    summary = summarize_relevancy(results)
    assert {k: summary.pop(k) for k in ("avg_relevance_score_by_k", "hit_at_k", "bin_precision_at_k")} == {
        "avg_relevance_score_by_k": [0.63, 0.58, 0.34],
        "hit_at_k": [0.67, 0.67, 0.67],
        "bin_precision_at_k": [0.67, 0.67, 0.56],
    }
    assert summary == pytest.approx(
        {
            "avg_relevancy": 0.22138095238095237,
            "avg_first_relevant_position": 0.0,
            "mean_mrr": 0.6666666666666666,
            "avg_entropy": 1.3779335002718731,
            "avg_ndcg": 0.9299489024825817,
            "avg_query_time": 0.3,
        }
    )


def _doc(position: int) -> DocResult:
    retrieved = ["x"] * position + ["d"] if position >= 0 else ["x"] * 20
    return DocResult("q", ["d"], retrieved, 0.2)


def test_doc_id_metrics_as_mindsdb_then_ours() -> None:
    summary = summarize_doc_id([_doc(p) for p in POSITIONS], 20)
    assert (summary["total"], summary["total_found"], summary["retrieved_in_top_10"]) == (7, 6, 2)
    assert summary["avg_query_time"] == pytest.approx(0.2)
    recall = json.loads(summary["cumulative_recall"])
    assert list(recall) == [str(i) for i in range(20)]
    assert recall["2"] == 0 and recall["3"] == pytest.approx(2 / 7) and recall["12"] == pytest.approx(5 / 7)
    assert recall["19"] == pytest.approx(6 / 7)
    assert json.loads(summary["hit_at_k"]) == {"1": 0.0, "3": 0.0, "5": 0.2857, "10": 0.2857, "20": 0.8571}
    assert json.loads(summary["recall_at_k"]) == json.loads(summary["hit_at_k"])  # one document each
    assert summary["mrr"] == round((2 / 4 + 3 / 13 + 1 / 20) / 7, 4)
    assert json.loads(summary["mrr_at_k"])["5"] == round(2 / 4 / 7, 4)


def test_several_relevant_documents() -> None:
    result = DocResult("q", ["a", "b", "c"], ["z", "b", "y", "a"], 0.1)
    assert result.position == 1 and result.recall_at(1) == 0 and result.recall_at(4) == pytest.approx(2 / 3)
    record = result.record()
    assert record["doc_id"] == ["a", "b", "c"] and record["doc_found"] and record["doc_position"] == 1
    assert DocResult("q", ["a"], [], 0.1).record() | {"retrieved": None} == {
        "question": "q",
        "doc_id": "a",
        "doc_found": False,
        "doc_position": -1,
        "query_time": 0.1,
        "retrieved": None,
    }
    with pytest.raises(ValueError):
        summarize_doc_id([], 20)


def test_relevant_ids() -> None:
    assert relevant_ids(1000) == ["1000"] and relevant_ids(7.0) == ["7"] and relevant_ids("a") == ["a"]
    assert relevant_ids(["a", 2]) == ["a", "2"] and relevant_ids('["a", "b"]') == ["a", "b"]
    assert relevant_ids("[not json") == ["[not json"] and relevant_ids(None) == []


@pytest.mark.parametrize(
    "answer",
    [
        '{"query": "Q?", "reference_answer": "A"}',
        '```json\n{"query": "Q?", "reference_answer": "A"}\n```',
        'Sure: {"query": "Q?", "reference_answer": "A"} and {"more": 1}',
    ],
)
def test_parse_question_answer(answer: str) -> None:
    assert parse_question_answer(answer) == ("Q?", "A")


@pytest.mark.parametrize("answer", ["", "no json", '{"query": "Q?"}', "{broken", '["query"]'])
def test_parse_question_answer_refuses(answer: str) -> None:
    with pytest.raises(ValueError):
        parse_question_answer(answer)
