"""The peer benchmark's interleaving of two servers' searches and completions (`bench.peer_phases`)."""

from __future__ import annotations

from bench.peer_phases import Side, interleaved


def test_blocks_alternate_which_server_goes_first() -> None:
    a, b = Side("agentkb", "http://a", {}), Side("peer", "http://b", {})
    try:
        order = [(side.name, q) for side, q in interleaved([a, b], [1, 2, 3, 4, 5], block=2)]
        assert order == [
            ("agentkb", 1), ("agentkb", 2), ("peer", 1), ("peer", 2),
            ("peer", 3), ("peer", 4), ("agentkb", 3), ("agentkb", 4),
            ("agentkb", 5), ("peer", 5),
        ]  # fmt: skip
        assert [(s.name, q) for s, q in interleaved([a], [1, 2, 3], block=2)] == [
            ("agentkb", i) for i in (1, 2, 3)
        ]
        runs = [s.name for s, _ in interleaved([a, b], ["q1", "q2"])]
        assert runs == ["agentkb", "peer", "peer", "agentkb"]
    finally:
        a.close()
        b.close()
