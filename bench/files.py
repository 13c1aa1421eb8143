"""File parsing throughput: `agentkb.ingest.files.parse.parse_file` (what an upload and a KB insert of `files` run)
on a generated multi-page PDF (fpdf2, ~3,000 characters of text a page) and a generated DOCX (python-docx,
a Heading 1 every 10 paragraphs of ~600 characters), each about `--mb` MB: MB/s, pages/s (PDF) or
sections/s (DOCX: a section per heading), and characters of text/s. The files are kept in
bench/.cache/files/ and reused.

    python -m bench files [--mb 2] [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import CACHE, TextGenerator, print_table, rate, write_result

PAGE_CHARS = 3000
PARAGRAPH_CHARS = 600
PARAGRAPHS_PER_SECTION = 10


def make_pdf(path: Path, pages: int) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    for number, text in enumerate(TextGenerator(seed=11).texts(pages, chars=PAGE_CHARS), 1):
        pdf.add_page()
        y = 15.0
        for line in [f"Page {number}", *textwrap.wrap(text, 95)]:  # pdf.text: 40x faster than multi_cell
            pdf.text(10, y, line)
            y += 5
    pdf.output(str(path))


def make_docx(path: Path, paragraphs: int) -> None:
    import docx

    document = docx.Document()
    for i, text in enumerate(TextGenerator(seed=12).texts(paragraphs, chars=PARAGRAPH_CHARS)):
        if i % PARAGRAPHS_PER_SECTION == 0:
            document.add_heading(f"Section {i // PARAGRAPHS_PER_SECTION + 1}", level=1)
        document.add_paragraph(text)
    document.save(str(path))


def sized(kind: str, make: Callable[[Path, int], None], units: int, target_bytes: int) -> tuple[Path, Path]:
    """(a file of about `target_bytes` made by `make(path, n)`, a small one of `units`): n from the sizes
    of `units` and `2 * units` (a linear fit, so fixed overhead such as DOCX's styles does not skew it)."""
    directory = CACHE / "files"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"bench-{target_bytes // 1000}k.{kind}"
    small = directory / f"small-{units}.{kind}"
    if not small.exists():
        make(small, units)
    if path.exists():
        return path, small
    double = directory / f"trial.{kind}"
    make(double, 2 * units)
    per_unit = (double.stat().st_size - small.stat().st_size) / units
    double.unlink()
    n = max(1, round(units + (target_bytes - small.stat().st_size) / per_unit))
    started = time.perf_counter()
    make(path, n)
    print(f"made {path} ({path.stat().st_size / 1e6:.2f} MB) in {time.perf_counter() - started:.1f}s")
    return path, small


def time_parse(files: tuple[Path, Path], repeat: int) -> dict[str, Any]:
    from agentkb.ingest.files.parse import TextDocument, parse_file

    path, small = files
    ext = path.suffix.lstrip(".")
    parse_file(small, small.name, ext)  # imports the parser library: not timed
    runs = []
    parsed: Any = None
    for _ in range(repeat):
        started = time.perf_counter()
        parsed = parse_file(path, path.name, ext)
        runs.append(time.perf_counter() - started)
    assert isinstance(parsed, TextDocument)
    seconds = statistics.median(runs)
    size = path.stat().st_size
    chars = sum(len(s.text) for s in parsed.sections)
    return {
        "file": path.name,
        "bytes": size,
        "pages": parsed.page_count,
        "sections": len(parsed.sections),
        "text_chars": chars,
        "seconds": seconds,
        "runs_s": [round(r, 3) for r in runs],
        "mb_per_s": round(size / 1e6 / seconds, 2),
        "units_per_s": rate(parsed.page_count, seconds),
        "chars_per_s": round(chars / seconds),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench files", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=2.0, help="size of each generated file (MB)")
    parser.add_argument(
        "--repeat", type=int, help="parses of each file, the median kept; default 3 (--quick: 1)"
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    repeat = args.repeat or (1 if args.quick else 3)
    target = int(args.mb * 1e6)

    pdf = time_parse(sized("pdf", make_pdf, 40, target), repeat)
    print(f"pdf: {pdf['pages']} pages in {pdf['seconds']:.2f}s")
    docx = time_parse(sized("docx", make_docx, 200, target), repeat)
    print(f"docx: {docx['sections']} sections in {docx['seconds']:.2f}s")

    table = [
        {
            "file": f"PDF (fpdf2, text), {pdf['bytes'] / 1e6:.2f} MB",
            "units": f"{pdf['pages']:,} pages",
            "seconds": round(pdf["seconds"], 2),
            "MB/s": pdf["mb_per_s"],
            "units/s": f"{pdf['units_per_s']} pages/s",
            "text chars/s": f"{pdf['chars_per_s']:,}",
        },
        {
            "file": f"DOCX (python-docx), {docx['bytes'] / 1e6:.2f} MB",
            "units": f"{docx['sections']:,} sections",
            "seconds": round(docx["seconds"], 2),
            "MB/s": docx["mb_per_s"],
            "units/s": f"{docx['units_per_s']} sections/s",
            "text chars/s": f"{docx['chars_per_s']:,}",
        },
    ]
    print_table(f"files: agentkb.ingest.files.parse.parse_file, median of {repeat}", table)
    write_result(
        "files",
        {
            "quick": args.quick,
            "target_mb": args.mb,
            "median_of": repeat,
            "pdf": pdf,
            "docx": docx,
            "table": table,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
