"""One small file per supported format, made at test time (fpdf2, python-docx, python-pptx, openpyxl), plus a
truncated PDF and an unsupported `.exe`. `make_all(dir)` returns `{file name: path}`."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

PDF_PAGES = ["Alpha page talks about the solar system.", "Beta page covers ocean tides."]
DOCX_SECTIONS = {"Introduction": "Cats are small carnivorous mammals.", "Usage": "Feed them twice a day."}
PPTX_SLIDES = [("Quarterly review", "Revenue grew 12 percent."), ("Next steps", "Hire two engineers.")]
ROWS = [
    {"id": 1, "name": "apple", "price": 1.5, "note": "red fruit"},
    {"id": 2, "name": "banana", "price": 0.25, "note": None},
    {"id": 3, "name": "cherry", "price": 3.0, "note": "small, sweet"},
]
HTML = """<!DOCTYPE html><html><head><title>Guide</title><style>p {color: red}</style></head>
<body><nav>Home | About</nav><p>Preface text.</p>
<h1>Install <small>v2</small></h1><p>Run the <b>installer</b>.</p><script>alert(1)</script>
<h2>Configure</h2><ul><li>Set the port</li><li>Set the host</li></ul><!-- a comment -->
<h4>Deep note</h4><p>Only for experts.</p><h5>Minor</h5><p>Stays in the same section.</p></body></html>
"""
MARKDOWN = """Intro line before any heading.

# Title

Body of the title section.

```python
# not a heading, inside a fence
```

## Part two ##

Second body.

#### Level four stays inside part two
"""
TEXT = "Plain text file.\nSecond line with Unicode: café ☕.\n"


def make_pdf(path: Path) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=14)
    for text in PDF_PAGES:
        pdf.add_page()
        pdf.cell(text=text)
    pdf.output(str(path))
    return path


def make_docx(path: Path) -> Path:
    import docx

    document = docx.Document()
    document.add_paragraph("Front matter before headings.")
    for heading, body in DOCX_SECTIONS.items():
        document.add_heading(heading, level=1)
        document.add_paragraph(body)
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "dose", "50g"
    document.save(str(path))
    return path


def make_pptx(path: Path) -> Path:
    import pptx

    presentation = pptx.Presentation()
    for title, body in PPTX_SLIDES:
        slide = presentation.slides.add_slide(presentation.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    presentation.save(str(path))
    return path


def make_xlsx(path: Path) -> Path:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(list(ROWS[0]))
    for row in ROWS:
        sheet.append(list(row.values()))
    book.create_sheet("ignored").append(["other", "sheet"])
    book.save(str(path))
    return path


def make_csv(path: Path) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(ROWS[0]))
        writer.writeheader()
        writer.writerows(ROWS)
    return path


def _writer(text: str) -> Callable[[Path], Path]:
    def write(path: Path) -> Path:
        path.write_text(text, encoding="utf-8")
        return path

    return write


def make_corrupt_pdf(path: Path) -> Path:
    whole = make_pdf(path.with_name("whole.pdf.tmp")).read_bytes()
    path.write_bytes(whole[: len(whole) // 3])
    path.with_name("whole.pdf.tmp").unlink()
    return path


def make_exe(path: Path) -> Path:
    path.write_bytes(b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff" + bytes(range(256)) * 4)
    return path


MAKERS: dict[str, Callable[[Path], Path]] = {
    "report.pdf": make_pdf,
    "handbook.docx": make_docx,
    "deck.pptx": make_pptx,
    "prices.xlsx": make_xlsx,
    "guide.html": _writer(HTML),
    "notes.md": _writer(MARKDOWN),
    "plain.txt": _writer(TEXT),
    "prices.csv": make_csv,
    "prices.json": _writer(json.dumps(ROWS)),
    "prices.jsonl": _writer("\n".join(json.dumps(row) for row in ROWS) + "\n"),
}
BROKEN: dict[str, Callable[[Path], Path]] = {"broken.pdf": make_corrupt_pdf, "tool.exe": make_exe}


def make_all(directory: Path, makers: dict[str, Callable[[Path], Path]] = MAKERS) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    return {name: make(directory / name) for name, make in makers.items()}
