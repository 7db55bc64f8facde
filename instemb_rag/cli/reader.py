"""`instemb-rag build-reader-data` and `instemb-rag train-reader`: the reader's data and training (issue 67)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import fail


def build_reader_data_command(
    out: Path = typer.Option(Path("runs/reader/records.jsonl"), "--out", help="The reader records file (JSONL)."),
    facet_groups: Path = typer.Option(
        Path("runs/facets/train.jsonl"),
        "--facet-groups",
        help="Training facet groups (instemb-rag build-facet-groups).",
    ),
    written_groups: Path | None = typer.Option(
        None,
        "--written-groups",
        help="Hand-written training groups (the facet-groups format) for the aspect and choice records; none by default.",
    ),
    data_root: Path | None = typer.Option(
        None, "--data-root", help="Folder of the public data sets; default: $INSTEMB_DATA_ROOT, else ../shared/data."
    ),
    scientific: bool = typer.Option(
        False,
        "--scientific-plain",
        help="Add PubMedQA and COVID-QA questions as plain-search records (scientific text).",
    ),
    varied_stance: float = typer.Option(
        0.0, "--varied-stance", min=0.0, max=1.0, help="Share of stance and negation records asked in other wordings."
    ),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Build the reader's training records: aspects with rule-built traps, choices, stance, negation, plain search."""
    import collections
    import json

    from ..datasets.reader_records import ReaderDataPlan, build_reader_records, seen_records, write_reader_records
    from ..errors import InstEmbError
    from ..paths import data_root as default_data_root
    from ..teachers import load_teacher

    if not facet_groups.is_file():
        fail(f"{facet_groups} not found: run `instemb-rag build-facet-groups --out {facet_groups.parent}` first.", 2)
    if written_groups is not None and not written_groups.is_file():
        fail(f"--written-groups {written_groups} not found.", 2)
    try:
        teacher = load_teacher("minilm")
        plan = ReaderDataPlan(
            facet_groups,
            written_groups,
            data_root or default_data_root(),
            seed,
            scientific_plain=scientific,
            varied_stance_share=varied_stance,
        )
        records = build_reader_records(plan, encode=lambda texts: teacher.encode(list(texts), batch_size=64))
    except InstEmbError as exc:
        fail(exc)
    write_reader_records(records, out)
    seen = out.with_name(out.stem + ".seen.jsonl")
    with open(seen, "w", encoding="utf-8") as stream:
        stream.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in seen_records(records))
    kinds = collections.Counter(record.kind for record in records)
    typer.echo(f"Wrote {len(records)} records to {out} ({dict(kinds)}); their texts for --exclude-seen: {seen}")


def train_reader_command(
    recipe: Path = typer.Argument(
        ..., help="A YAML recipe with a `reader:` section (the ReaderTrainingArguments keys)."
    ),
    overrides: list[str] = typer.Argument(None, help="key=value settings over the recipe's (max_steps=200)."),
) -> None:
    """Train the reader (resumes from the run's last checkpoint); writes final/ with its fusion weight."""
    import yaml

    from ..training.reader import ReaderTrainingArguments, train_reader

    if not recipe.is_file():
        fail(f"recipe {recipe} not found.", 2)
    values = (yaml.safe_load(recipe.read_text(encoding="utf-8")) or {}).get("reader")
    if not isinstance(values, dict):
        fail(f"{recipe}: no `reader:` section (a mapping of the ReaderTrainingArguments keys).", 2)
    for override in overrides or []:
        key, sep, value = override.partition("=")
        if not sep:
            fail(f"override {override!r} is not key=value.", 2)
        values[key] = yaml.safe_load(value)
    try:
        final = train_reader(
            ReaderTrainingArguments.from_mapping(values, str(recipe)), log=lambda line: typer.echo(line, err=True)
        )
    except (ValueError, OSError) as exc:
        fail(exc, 2)
    typer.echo(f"reader: {final}")


def register(app: typer.Typer) -> None:
    app.command("build-reader-data")(build_reader_data_command)
    app.command("train-reader")(train_reader_command)
