"""Evaluating a knowledge base's retrieval: MindsDB's `EVALUATE KNOWLEDGE_BASE` (its
`mindsdb/interfaces/knowledge_base/evaluate.py` @v26.1.0), the parts without I/O: the question-generation
prompt and the parsing of its answer, and the metrics of the two versions.

`doc_id` (the default): each test row names the document (`doc_id`) its question was written from; the
search (`content = question`, `top_k` rows, MindsDB: 20) finds it at a position or not. MindsDB's answer:
total, total_found, retrieved_in_top_10, cumulative_recall (JSON text {position: share of questions whose
document came at or before it}, positions 0..top_k-1), avg_query_time. Added here, after those: mrr (over
the top_k rows), hit_at_k, recall_at_k and mrr_at_k (JSON text keyed by k). A `doc_id` may also be a list
of relevant documents (BEIR's qrels): a question is found when any of them is, at the first one's
position, and recall@k is the share of its documents in the first k rows. Positions count result rows
(chunks), as MindsDB's do.

Without an LLM (the keyless `extractive` default model) a question is a sentence of the passage
(`extractive_question`).

`llm_relevancy`: an LLM scores each of the top 10 passages from 0 to 1 (relevant from 0.5): MindsDB's
avg_relevancy, avg_relevance_score_by_k, avg_first_relevant_position, mean_mrr, hit_at_k,
bin_precision_at_k, avg_entropy, avg_ndcg, avg_query_time.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

DOC_ID = "doc_id"
LLM_RELEVANCY = "llm_relevancy"
VERSIONS = (DOC_ID, LLM_RELEVANCY)
TOP_K = {DOC_ID: 20, LLM_RELEVANCY: 10}  # MindsDB's EvaluateDocID.TOP_K, EvaluateRerank.TOP_K
MAX_TOP_K = 100
KS = (1, 3, 5, 10, 20, 50, 100)
RELEVANT_SCORE = 0.5  # MindsDB: binary relevance from the LLM's score
DEFAULT_QUESTION_COUNT = 20
DEFAULT_SAMPLE_SIZE = 10_000
MAX_GENERATION_ERRORS = 5  # answers that do not parse, tolerated before the generation fails

GENERATE_QA_SYSTEM_PROMPT = """
Your task is to generate question and answer pairs for a search engine.
The search engine will take your query and return a list of documents.
You will be given a text and you need to generate a question that can be answered using the information in the text.
Your questions will be used to evaluate the search engine.
Question should always have enough clues to identify the specific text that this question is generated from.
Never ask questions like "What license number is associated with Amend 6" because Amend 6 could be found in many documents and the question is not specific enough.
Example output 1:  {\"query\": \"What processor does the HP 2023 14\" FHD IPS Laptop use?\", \"reference_answer\": \"Ryzen 3 5300U\"}
Example output 2: {\"query\": \"What is the name of the river in Paris?\", \"reference_answer\": \"Seine\"}
Don't generate questions like "What is being amended in the application?" because these questions cannot be answered using the text and without knowing which document it refers to.
The question should be answerable without the text, but the answer should be present in the text.
Return ONLY a json response. No other text.
"""  # noqa: E501  (MindsDB's prompt, verbatim)


def qa_user_message(text: str) -> str:
    return f"\n\nText:\n{text}\n\n"


def parse_question_answer(answer: str) -> tuple[str, str]:
    """(query, reference_answer) from the LLM's answer: the first JSON object in it, code fences allowed.
    ValueError when there is none or it lacks either key (MindsDB's `sanitize_json_response`)."""
    response = (answer or "").strip()
    if not response:
        raise ValueError("Empty response provided.")
    response = re.sub(r"^```(?:json|JSON)?\s*", "", response, flags=re.MULTILINE)
    response = re.sub(r"\s*```$", "", response, flags=re.MULTILINE).strip()
    start = response.find("{")
    if start == -1:
        raise ValueError("No JSON object found in the response.")
    parsed: Any = None
    decoder = json.JSONDecoder()
    try:
        parsed, _ = decoder.raw_decode(response[start:])
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ValueError(f"Could not parse response from LLM: {answer[:200]}")
    if "query" not in parsed or "reference_answer" not in parsed:
        raise ValueError("Cant find question/answer in LLM response")
    return str(parsed["query"]), str(parsed["reference_answer"])


_SENTENCE_BREAK = re.compile(r"\n\s*\n|(?<=[.!?…])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])")
_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
MAX_QUESTION_CHARS = 300


def extractive_question(text: str) -> tuple[str, str] | None:
    """A test question without an LLM (the keyless `extractive` default): the sentence of `text` with the
    most distinct words of three letters or more (the first of equals), whitespace collapsed, as both the
    question and its reference answer — the search should find the passage it was taken from. None for a
    text with no word. Deterministic: the same text gives the same question."""
    best, best_words = "", 0
    for part in _SENTENCE_BREAK.split(text or ""):
        sentence = " ".join(part.split())
        words = len({w.lower() for w in _WORD.findall(sentence)})
        if words > best_words:
            best, best_words = sentence, words
    if not best_words:
        return None
    if len(best) > MAX_QUESTION_CHARS:
        best = best[:MAX_QUESTION_CHARS].rsplit(" ", 1)[0]
    return best, best


def relevant_ids(value: Any) -> list[str]:
    """A test row's `doc_id` as the list of relevant document ids: a scalar, a list, or a JSON array text."""
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(value)
    if isinstance(value, list | tuple):
        return [_id_text(v) for v in value if v is not None]
    return [] if value is None else [_id_text(value)]


def _id_text(value: Any) -> str:
    """Ids compare as text (a file's `1000` matches a KB's "1000"); integral floats lose their `.0`."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --- doc_id --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class DocResult:
    """One test question: its relevant documents and the ids of the rows the search returned, best first."""

    question: str
    doc_ids: list[str]
    retrieved: list[str]
    query_time: float
    answer: str | None = None

    @property
    def position(self) -> int:
        wanted = set(self.doc_ids)
        return next((i for i, d in enumerate(self.retrieved) if d in wanted), -1)

    def recall_at(self, k: int) -> float:
        wanted = set(self.doc_ids)
        return len(wanted & set(self.retrieved[:k])) / len(wanted) if wanted else 0.0

    def record(self) -> dict[str, Any]:
        position = self.position
        doc_id: Any = self.doc_ids[0] if len(self.doc_ids) == 1 else self.doc_ids
        return {
            "question": self.question,
            "doc_id": doc_id,
            "doc_found": position >= 0,
            "doc_position": position,
            "query_time": self.query_time,
            "retrieved": self.retrieved,
        }


def _keyed(values: dict[int, float]) -> str:
    return json.dumps({str(k): round(v, 4) for k, v in values.items()})


def summarize_doc_id(results: Sequence[DocResult], top_k: int) -> dict[str, Any]:
    """MindsDB's `EvaluateDocID.summarize_results`, then mrr, hit_at_k, recall_at_k, mrr_at_k."""
    total = len(results)
    if total == 0:
        raise ValueError("The test table has no questions")
    positions = [r.position for r in results]
    found = sum(1 for p in positions if p >= 0)
    at_position = [sum(1 for p in positions if p == i) / total for i in range(top_k)]
    cumulative = {i: sum(at_position[: i + 1]) for i in range(top_k)}
    ks = [k for k in KS if k <= top_k]

    def mrr(k: int) -> float:
        return sum(1 / (p + 1) for p in positions if 0 <= p < k) / total

    return {
        "total": total,
        "total_found": found,
        "retrieved_in_top_10": sum(1 for p in positions if 0 <= p < 10),
        "cumulative_recall": json.dumps(cumulative),
        "avg_query_time": sum(r.query_time for r in results) / total,
        "mrr": round(mrr(top_k), 4),
        "hit_at_k": _keyed({k: sum(1 for p in positions if 0 <= p < k) / total for k in ks}),
        "recall_at_k": _keyed({k: sum(r.recall_at(k) for r in results) / total for k in ks}),
        "mrr_at_k": _keyed({k: mrr(k) for k in ks}),
    }


# --- llm_relevancy -------------------------------------------------------------------------------------


@dataclass(slots=True)
class RelevancyResult:
    """One test question: the LLM's score of each retrieved passage, in the search's order."""

    question: str
    ground_truth: str | None
    scores: list[float]
    query_time: float
    binary: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.binary = [1 if s >= RELEVANT_SCORE else 0 for s in self.scores]

    @property
    def first_relevant_position(self) -> int | None:
        return next((i for i, x in enumerate(self.binary) if x == 1), None)

    def record(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "ground_truth": self.ground_truth,
            "binary_relevancy_list": self.binary,
            "relevance_score_list": self.scores,
            "first_relevant_position": self.first_relevant_position,
            "query_time": self.query_time,
        }


def _entropy(values: list[float]) -> float:
    total = sum(values)
    if total <= 0:
        return 0.0
    shares = [v / total for v in values if v > 0]
    return -sum(p * math.log(p) for p in shares)


def _dcg(scores: list[float]) -> float:
    return sum(score / math.log2(i + 2) for i, score in enumerate(scores))


def summarize_relevancy(results: Sequence[RelevancyResult]) -> dict[str, Any]:
    """MindsDB's `EvaluateRerank.evaluate_retrieval_metrics`."""
    if not results:
        raise ValueError("The test table has no questions")
    scored = [r for r in results if r.scores]
    positions = [p for r in scored if (p := r.first_relevant_position) is not None]
    mrr = [1 / (p + 1) if (p := r.first_relevant_position) is not None else 0.0 for r in scored]
    hits = [[int(any(r.binary[:k])) for k in range(1, len(r.binary) + 1)] for r in scored]
    precision = [[sum(r.binary[:k]) / k for k in range(1, len(r.binary) + 1)] for r in scored]
    ndcg = []
    for r in scored:
        ideal = _dcg(sorted(r.scores, reverse=True))
        ndcg.append(_dcg(r.scores) / ideal if ideal > 0 else 0.0)

    def column_means(matrix: list[list[float]] | list[list[int]]) -> list[float]:
        return [round(sum(col) / len(col), 2) for col in zip(*matrix, strict=False)] if matrix else []

    entropy = [_entropy(r.scores) if len(r.scores) > 1 else 0.0 for r in scored]
    return {
        "avg_relevancy": sum(sum(r.scores) / len(r.scores) for r in scored) / len(results),
        "avg_relevance_score_by_k": column_means([r.scores for r in scored]),
        "avg_first_relevant_position": sum(positions) / len(positions) if positions else None,
        "mean_mrr": sum(mrr) / len(mrr) if mrr else 0,
        "hit_at_k": column_means(hits),
        "bin_precision_at_k": column_means(precision),
        "avg_entropy": sum(entropy) / len(entropy) if entropy else 0,
        "avg_ndcg": sum(ndcg) / len(ndcg) if ndcg else 0,
        "avg_query_time": sum(r.query_time for r in results) / len(results),
    }
