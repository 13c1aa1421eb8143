"""`agentkb evaluate`: score a knowledge base's retrieval on a running agentkb server (MindsDB's `EVALUATE
KNOWLEDGE_BASE`, through `POST /api/projects/{p}/knowledge_bases/{kb}/evaluate`).

    agentkb evaluate docs_kb --test-table files.docs_qa --generate --count 50 --llm '{"provider": "openai", ...}'
    agentkb evaluate docs_kb --test-table files.docs_qa --questions qa.csv     # upload your own, then score
    agentkb evaluate docs_kb --list                                           # the stored runs
    agentkb evaluate docs_kb --show 12                                        # one run, per question

The test table has `question` and `doc_id` columns (`doc_id` may be a list of relevant ids). Exit status: 0
done, 1 refused or failed. Imports of httpx and rich happen inside the command, so `agentkb --help` stays
fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentkb.cli.ingest import DEFAULT_SERVER
from agentkb.cli.ingest_job import problem

if TYPE_CHECKING:
    import httpx
    from rich.console import Console

SHOWN_QUESTIONS = 50


class EvaluateError(Exception):
    """A refusal to report and exit 1 on."""


def _checked(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise EvaluateError(problem(response))
    return response.json()


def _upload(client: httpx.Client, path: Path, test_table: str) -> None:
    """`path` as the table file `files.<name>` of `test_table` (replacing one of that name)."""
    database, _, name = test_table.partition(".")
    if database.lower() != "files" or not name:
        raise EvaluateError("--questions uploads to files.<name>: give --test-table files.<name>")
    if client.get(f"/api/files/{name}").status_code == 200:
        client.delete(f"/api/files/{name}")
    with path.open("rb") as content:
        _checked(client.put(f"/api/files/{name}", files={"file": (path.name, content)}))


def _metrics_table(run: dict[str, Any], console: Console) -> None:
    from rich.table import Table

    metrics = dict(run["metrics"])
    title = (
        f"evaluation {run['id']} of {run['knowledge_base']} ({run['version']}), {run['created_at'][:19]} UTC"
    )
    by_k = {
        key: json.loads(metrics.pop(key)) for key in ("hit_at_k", "recall_at_k", "mrr_at_k") if key in metrics
    }
    console.print(title)
    summary = Table(show_header=False)
    for key, value in metrics.items():
        if key == "cumulative_recall":
            continue
        summary.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    console.print(summary)
    if by_k and all(isinstance(v, dict) for v in by_k.values()):
        table = Table("k", *by_k)
        for k in next(iter(by_k.values())):
            table.add_row(k, *(f"{by_k[name].get(k, 0):.4f}" for name in by_k))
        console.print(table)


def _questions_table(run: dict[str, Any], console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    results = run.get("results") or []
    table = Table("question", "doc_id", "found at", "seconds", title=f"{len(results)} questions")
    for item in results[:SHOWN_QUESTIONS]:
        position = item.get("doc_position", item.get("first_relevant_position"))
        found = "-" if position is None or position < 0 else str(position + 1)
        table.add_row(
            escape(str(item["question"])[:80]),
            escape(str(item.get("doc_id", item.get("ground_truth", "")))[:30]),
            found,
            f"{item.get('query_time', 0):.3f}",
        )
    console.print(table)
    if len(results) > SHOWN_QUESTIONS:
        console.print(f"… and {len(results) - SHOWN_QUESTIONS} more (--json prints them all)")


def evaluate(
    kb: Annotated[str, typer.Argument(help="The knowledge base to evaluate.")],
    test_table: Annotated[
        str | None,
        typer.Option(help="The test data: files.<name> (or <datasource>.<table> to read only)."),
    ] = None,
    questions: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            dir_okay=False,
            readable=True,
            help="A CSV/JSON/JSONL file of test data to upload first.",
        ),
    ] = None,
    generate: Annotated[
        bool,
        typer.Option(
            "--generate", help="Have the LLM write the test questions (no LLM: a sentence of each chunk)."
        ),
    ] = False,
    count: Annotated[int | None, typer.Option(min=1, help="Questions to generate (default 20).")] = None,
    from_sql: Annotated[
        str | None, typer.Option(help="Generate from this SELECT's `content` and `id` (default: the KB).")
    ] = None,
    llm: Annotated[
        str | None, typer.Option(help="The LLM as JSON: {provider, model_name, api_key, …}.")
    ] = None,
    no_evaluate: Annotated[bool, typer.Option("--no-evaluate", help="Only generate the test data.")] = False,
    save_to: Annotated[str | None, typer.Option(help="files.<name> to append the result row to.")] = None,
    version: Annotated[str, typer.Option(help="doc_id or llm_relevancy.")] = "doc_id",
    top_k: Annotated[int | None, typer.Option(min=1, max=100, help="Rows searched per question.")] = None,
    list_runs: Annotated[bool, typer.Option("--list", help="List the stored runs and exit.")] = False,
    show: Annotated[int | None, typer.Option(help="Show the stored run with this id and exit.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the server's JSON answer.")] = False,
    project: Annotated[str, typer.Option(help="Project of the knowledge base.")] = "mindsdb",
    server: Annotated[str, typer.Option(help="Base URL of the agentkb server.")] = DEFAULT_SERVER,
    api_key: Annotated[
        str | None,
        typer.Option(envvar="AGENTKB_API_KEY", help="API key for a server with authentication on."),
    ] = None,
) -> None:
    """Score a knowledge base's retrieval (hit@k, MRR, recall) on test questions, generated by an LLM or
    given; every run is stored on the server (--list, --show)."""
    import httpx
    from rich.console import Console

    console = Console(highlight=False)
    base = f"/api/projects/{project}/knowledge_bases/{kb}"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(
            base_url=server.rstrip("/"), timeout=httpx.Timeout(60, read=3600), headers=headers
        ) as c:
            if list_runs or show is not None:
                answer = _checked(
                    c.get(f"{base}/evaluations/{show}" if show is not None else f"{base}/evaluations")
                )
                runs = [answer] if show is not None else answer
                if as_json:
                    typer.echo(json.dumps(answer, indent=2))
                for run in [] if as_json else runs:
                    _metrics_table(run, console)
                    if show is not None:
                        _questions_table(run, console)
                if not runs and not as_json:
                    console.print(f"no evaluations of {kb} yet")
                return
            if test_table is None:
                raise typer.BadParameter("give --test-table files.<name> (or --list / --show ID)")
            if questions is not None:
                _upload(c, questions, test_table)
            body: dict[str, Any] = {"test_table": test_table, "version": version, "evaluate": not no_evaluate}
            if generate or count is not None or from_sql is not None:
                body["generate_data"] = {
                    k: v for k, v in (("count", count), ("from_sql", from_sql)) if v is not None
                }
            if llm is not None:
                try:
                    body["llm"] = json.loads(llm)
                except json.JSONDecodeError as exc:
                    raise typer.BadParameter(f"not JSON: {exc}", param_hint="--llm") from exc
            for key, value in (("save_to", save_to), ("top_k", top_k)):
                if value is not None:
                    body[key] = value
            answer = _checked(c.post(f"{base}/evaluate", json=body))
    except (EvaluateError, httpx.HTTPError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    if as_json:
        typer.echo(json.dumps(answer, indent=2))
        return
    if answer.get("generated") is not None:
        console.print(f"{answer['generated']} questions written to {answer['test_table']}")
    if answer.get("evaluation") is not None:
        _metrics_table(answer["evaluation"], console)
