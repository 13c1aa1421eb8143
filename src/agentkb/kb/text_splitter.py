"""MindsDB's own `TextSplitter` (`interfaces/knowledge_base/preprocessing/text_splitter.py`), used when a
knowledge base's `text_chunking_config` gives `separators`: the same pieces, with their offsets.

MindsDB's rule: take `chunk_size` characters and look for the first separator (in the given order) whose last
occurrence lies close enough to the end — within `k_range · chunk_size / (i · k_ratio + 1)` characters for
the i-th separator. The chunk ends before it and the next starts after it. When that separator is blank
(`" "`, `""`: the chunk ends mid-sentence), a stronger separator further back (the search repeated with a
range 1.5 times wider, all separators alike) starts the next chunk instead, if that is less than
`chunk_overlap` characters back: the chunks then overlap. A text shorter than `chunk_size` is the last piece.

Two guards MindsDB lacks: the widening search stops after `MAX_WIDENINGS` (MindsDB recurses until Python's
limit when only blank separators are given), and every step moves at least one character (MindsDB can loop
forever when the stronger separator is found at the chunk's very start).
"""

from __future__ import annotations

from agentkb.errors import BadRequest

K_RANGE = 0.5
K_RATIO = 1.0
MAX_WIDENINGS = 32


class CannotSplit(BadRequest):
    """No separator falls within the allowed range of a piece (MindsDB: `RuntimeError("Cannot split text")`)."""


def _blank(separator: str) -> bool:
    return separator.strip(" ") == ""


def _next(
    text: str,
    size: int,
    overlap: int,
    separators: tuple[str, ...],
    k_range: float,
    k_ratio: float,
    depth: int,
) -> tuple[str, int, int]:
    """(separator, chunk length, shift to the next chunk) for the piece at the start of `text`."""
    chunk = text[:size]
    for i, separator in enumerate(separators):
        pos = chunk.rfind(separator)
        if size - pos < k_range * size / (i * k_ratio + 1):
            shift = len(separator) + pos
            if _blank(separator) and depth < MAX_WIDENINGS:
                stronger, _, back = _next(text, size, overlap, separators, k_range * 1.5, 0, depth + 1)
                if not _blank(stronger) and shift - back < overlap and back > 0:
                    shift = back
            return separator, pos, shift
    raise CannotSplit(
        f"Cannot split text: none of the separators {list(separators)} occurs near the end of a "
        f"{size}-character piece; add \"\" to 'text_chunking_config.separators' to split anywhere",
        title="Invalid preprocessing configuration",
    )


def split(text: str, size: int, overlap: int, separators: tuple[str, ...]) -> list[tuple[int, str]]:
    """MindsDB's pieces of `text` as (offset in `text`, piece), blank ones included (MindsDB counts them in
    a chunk's `<i>of<n>` and then skips them)."""
    pieces: list[tuple[int, str]] = []
    offset = 0
    rest = text
    while True:
        if len(rest) < size:
            pieces.append((offset, rest))
            return pieces
        _, length, shift = _next(rest, size, overlap, separators, K_RANGE, K_RATIO, 0)
        pieces.append((offset, rest[:length]))
        shift = max(shift, 1)
        offset += shift
        rest = rest[shift:]
