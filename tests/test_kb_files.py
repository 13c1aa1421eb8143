"""KB insert `files`: every supported format, uploaded like the MindsDB SDK does, then searchable."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.helpers import assert_problem
from tests.ingest.fixtures import make_all

P = "/api/projects/mindsdb"
QUESTIONS = {  # file -> (question, text the best hit must contain)
    "report.pdf": ("ocean tides", "Beta page covers ocean tides."),
    "handbook.docx": ("how often to feed the cat", "Feed them twice a day."),
    "deck.pptx": ("hiring plans", "Hire two engineers."),
    "guide.html": ("installing the software", "installer"),
    "notes.md": ("second body", "Second body."),
    "plain.txt": ("coffee unicode", "café"),
    "prices.csv": ("sweet small cherry", "small, sweet"),
    "prices.xlsx": ("red fruit", "red fruit"),
    "prices.json": ("red fruit", "red fruit"),
    "prices.jsonl": ("red fruit", "red fruit"),
}


def test_every_format_is_searchable_after_insert(client: httpx.Client, unique: str, tmp_path: Path) -> None:
    made = make_all(tmp_path)
    for file_name, path in made.items():
        stem = f"{file_name.replace('.', '_')}_{unique}"
        r = client.put(
            f"/api/files/{stem}",
            data={"original_file_name": file_name, "name": stem, "source_type": "file"},
            files={"file": (file_name, path.read_bytes())},
        )
        assert r.status_code == 200, (file_name, r.text)
        kb = f"kb_{stem}"
        tabular = file_name.startswith("prices")
        body = (
            {"name": kb, "content_columns": ["note"], "metadata_columns": ["name", "price"]}
            if tabular
            else {"name": kb}
        )
        assert client.post(f"{P}/knowledge_bases", json={"knowledge_base": body}).status_code == 201
        r = client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"files": [stem]}})
        assert r.status_code == 200, (file_name, r.text)
        question, expected = QUESTIONS[file_name]
        hits = client.post(f"{P}/knowledge_bases/{kb}/search", json={"query": question, "limit": 3}).json()
        assert hits and expected in hits[0]["chunk_content"], (file_name, hits)
        assert hits[0]["metadata"]["_source"] == stem
        if file_name == "report.pdf":
            assert hits[0]["metadata"]["page"] == 2


def test_missing_file_is_400_and_nothing_inserted(client: httpx.Client, unique: str) -> None:
    kb = f"kb_missing_{unique}"
    client.post(f"{P}/knowledge_bases", json={"knowledge_base": {"name": kb}})
    problem = assert_problem(
        client.put(
            f"{P}/knowledge_bases/{kb}",
            json={"knowledge_base": {"rows": [{"id": 1, "content": "row"}], "files": [f"nope_{unique}"]}},
        ),
        400,
    )
    assert f"nope_{unique}" in problem["detail"]
    assert client.get(f"{P}/knowledge_bases/{kb}").json()["document_count"] == 0
