"""The sentences of retrieved passages that answer a question: the extractive model's answer.

Passages are split into sentences (at `.`, `!`, `?` followed by a capital, a digit or a quote, and at line
breaks); each sentence is scored against the question with BM25 over this small pool of sentences (English
stop words and question words left out, Snowball stems, `k1` 1.2, `b` 0.75). The best few are kept, those
scoring at least `KEEP_RATIO` of the best, each sentence's passage retrieval relevance breaking ties. When no
sentence shares a term with the question, the best passage's opening sentence stands in (the passage was
retrieved by meaning). The answer gives the kept sentences passage by passage (best passage first), in
their order in the passage.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any

MAX_SENTENCES = 3
KEEP_RATIO = 0.5  # a sentence scoring below half the best one rarely answers the question
MAX_SENTENCE_CHARS = 400
K1, B = 1.2, 0.75

_BREAK = re.compile(
    r"\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)|(?:(?<=[.!?…])|(?<=[.!?…][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9])"
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP_WORDS = """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just let me more most my myself
    no nor not now of off on once only or other our ours ourselves out over own same shall she should so some
    such than that the their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you your yours
    yourself yourselves tell know explain please"""
STOP_WORDS = frozenset(_STOP_WORDS.split())


@dataclass(frozen=True, slots=True)
class Sentence:
    passage: int  # index of its passage
    position: int  # its place in the passage
    text: str
    score: float = 0.0


@cache
def _stemmer() -> Any:
    import Stemmer  # PyStemmer (Snowball), as the BM25 of the knowledge bases uses

    return Stemmer.Stemmer("english")


def terms(text: str) -> list[str]:
    """Lower-cased words without stop words, stemmed."""
    words = [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]
    return list(_stemmer().stemWords(words)) if words else []


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, whitespace collapsed, empty ones left out."""
    return [s for s in (" ".join(part.split()) for part in _BREAK.split(text)) if s]


def _clip(text: str) -> str:
    return text if len(text) <= MAX_SENTENCE_CHARS else text[: MAX_SENTENCE_CHARS - 1].rstrip() + "…"


def _bm25(question: list[str], documents: list[list[str]]) -> list[float]:
    n = len(documents)
    average = sum(map(len, documents)) / n if n else 0.0
    frequency: Counter[str] = Counter()
    for doc in documents:
        frequency.update(set(doc))
    wanted = set(question)
    idf = {t: math.log(1 + (n - frequency[t] + 0.5) / (frequency[t] + 0.5)) for t in wanted}
    scores = []
    for doc in documents:
        counts = Counter(t for t in doc if t in wanted)
        norm = K1 * (1 - B + B * len(doc) / average) if average else K1
        scores.append(sum(idf[t] * c * (K1 + 1) / (c + norm) for t, c in counts.items()))
    return scores


def select(question: str, passages: list[str], relevance: list[float]) -> list[Sentence]:
    """The sentences of `passages` (ordered best first; `relevance` their retrieval scores) that answer
    `question`, in answer order: by passage (best first), then by place in the passage."""
    sentences = [
        Sentence(i, j, _clip(text))
        for i, passage in enumerate(passages)
        for j, text in enumerate(split_sentences(passage))
    ]
    if not sentences:
        return []
    scores = _bm25(terms(question), [terms(s.text) for s in sentences])
    best = max(scores)
    if best <= 0:
        first = min(range(len(passages)), key=lambda i: (-relevance[i], i))
        return [s for s in sentences if s.passage == first][:1]
    ranked = sorted(
        (Sentence(s.passage, s.position, s.text, score) for s, score in zip(sentences, scores, strict=True)),
        key=lambda s: (-s.score, -relevance[s.passage], s.passage, s.position),
    )
    kept: list[Sentence] = []
    seen: set[str] = set()
    for sentence in ranked:
        if len(kept) == MAX_SENTENCES or sentence.score < KEEP_RATIO * best:
            break
        if sentence.text.casefold() not in seen:  # the same sentence in two passages is said once
            seen.add(sentence.text.casefold())
            kept.append(sentence)
    order = {p: i for i, p in enumerate(dict.fromkeys(s.passage for s in kept))}
    return sorted(kept, key=lambda s: (order[s.passage], s.position))
