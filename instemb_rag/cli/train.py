"""`instemb-rag train` and `instemb-rag build-data`: thin wrappers over instemb_rag.training."""

from __future__ import annotations

from pathlib import Path

import typer

from ..choices import ExportFormat, ParallelMode, PoolingMode
from .common import ExitCode, device_option, fail


def train_command(
    config: Path | None = typer.Option(
        None, "--config", "-c", help="YAML or JSON config (model/data/training sections)."
    ),
    output_dir: str | None = typer.Option(None, "--output-dir", help="Overrides training.output_dir."),
    max_steps: int | None = typer.Option(None, "--max-steps", help="Overrides training.max_steps."),
    train_file: str | None = typer.Option(None, "--train-file", help="JSONL records; overrides data.train_file."),
    model: str | None = typer.Option(
        None,
        "--model",
        help="Backbone or model folder (an LLM folder or a run's checkpoint); overrides model.model_name_or_path.",
    ),
    device: str | None = device_option(None, "Overrides training.device: auto | cpu | cuda | cuda:N | mps."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint in the output dir."),
    set_: list[str] = typer.Option([], "--set", help="Any option as key=value (e.g. training.batch_size=4)."),
    precision: str = typer.Option("fp32", "--precision", help="fp32 only: int8 is for inference (index/query/eval)."),
    parallel: ParallelMode | None = typer.Option(
        None,
        "--parallel",
        help="Under torchrun: ddp (replicated, default) or fsdp (decoder layers sharded); overrides training.parallel.",
    ),
    gradient_checkpointing: bool | None = typer.Option(
        None, "--gradient-checkpointing/--no-gradient-checkpointing", help="Overrides training.gradient_checkpointing."
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Print parameter counts, trainable share and memory per "
        "device from the model's config.json (no weights loaded, nothing written); exit.",
    ),
    world_size: int | None = typer.Option(
        None, "--world-size", min=1, help="Ranks --dry-run sizes for (default: $WORLD_SIZE, else 1)."
    ),
) -> None:
    """Train an InstEmb encoder (look-ahead distillation + multi-view contrastive loss).

    Runs unchanged under torchrun (multi-GPU, multi-node): see docs/training-at-scale.md."""
    from ..encoder.quantize import check_precision, refuse_training
    from ..errors import InstEmbError
    from ..training.args import load_config, parse_set_option

    try:
        refuse_training(check_precision(precision))
        overrides = dict(parse_set_option(item) for item in set_)
        flags = {
            "training.output_dir": output_dir,
            "training.max_steps": max_steps,
            "data.train_file": train_file,
            "model.model_name_or_path": model,
            "training.device": device,
            "training.parallel": parallel and parallel.value,
            "training.gradient_checkpointing": gradient_checkpointing,
        }
        overrides.update({key: value for key, value in flags.items() if value is not None})
        if resume:
            overrides["training.resume"] = True
        train_config = load_config(config, overrides)
        if dry_run:
            from ..training.parallel import detect_env
            from ..training.sizing import dry_run_report

            typer.echo(dry_run_report(train_config, world_size or detect_env().world_size))
            return
        from ..training.trainer import train  # the objective registry picks the recipe

        final = train(train_config, log=typer.echo)
    except InstEmbError as exc:
        fail(exc)
    from ..training.parallel import detect_env

    if detect_env().is_main:  # under torchrun, one line for the run, not one a rank
        typer.echo(f"Final checkpoint: {final}")


def build_data_command(
    out: Path = typer.Option(..., "--out", help="Folder for train.jsonl and heldout.jsonl."),
    data_root: Path | None = typer.Option(
        None,
        "--data-root",
        help="Folder holding the source sets; default: $INSTEMB_DATA_ROOT, else ../shared/data beside the checkout.",
    ),
    sets: list[str] = typer.Option([], "--set-name", help="Sets to use (repeatable); default all."),
    heldout_fraction: float = typer.Option(0.1, "--heldout-fraction"),
    seed: int = typer.Option(0, "--seed"),
    max_per_set: int | None = typer.Option(None, "--max-per-set", help="Cap on training records per set."),
) -> None:
    """Build (text, instruction, output) training records from the development sets."""
    from ..datasets.builders import build_data_folder
    from ..errors import InstEmbError
    from ..paths import data_root as default_data_root

    try:
        counts = build_data_folder(
            out, data_root or default_data_root(), sets or None, heldout_fraction, seed, max_per_set
        )
    except InstEmbError as exc:
        fail(exc)
    typer.echo(f"Wrote {counts['train']} training and {counts['heldout']} held-out records to {out}")


def build_distill_texts_command(
    out: Path = typer.Option(Path("runs/distill/texts.jsonl"), "--out", help="The JSON-lines file to write."),
    data_root: Path | None = typer.Option(
        None,
        "--data-root",
        help="Folder holding the source sets; default: $INSTEMB_DATA_ROOT, else ../shared/data beside the checkout.",
    ),
    sources: list[str] = typer.Option([], "--source", help="Sources to read (repeatable); default all."),
    groups: Path | None = typer.Option(
        None,
        "--groups",
        help="Hand-written facet groups for training (JSON lines, the facet-groups format); without it the "
        "facet_groups source is skipped.",
    ),
    dev_groups: Path | None = typer.Option(
        None,
        "--dev-groups",
        help="Dev facet groups whose subjects no item may name; default eval_sets/facet_groups_dev.jsonl.",
    ),
    max_items: int | None = typer.Option(None, "--max-items", min=1, help="Cap on items written (all sources)."),
    max_per_source: int | None = typer.Option(
        None, "--max-per-source", min=1, help="Cap on the queries and on the passages of each source."
    ),
    query_share: float = typer.Option(0.5, "--query-share", help="Share of --max-items given to queries."),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Build the texts a geometry-distillation run embeds (queries with instructions, passages)."""
    import time

    from ..datasets.facet_groups import DEV_GROUPS
    from ..datasets.geometry_texts import build_geometry_texts
    from ..errors import InstEmbError
    from ..paths import data_root as default_data_root

    started = time.perf_counter()
    try:
        summary = build_geometry_texts(
            out,
            data_root or default_data_root(),
            sources or None,
            groups,
            dev_groups or DEV_GROUPS,
            max_items,
            max_per_source,
            query_share,
            seed,
            log=lambda line: typer.echo(line, err=True),
        )
    except InstEmbError as exc:
        fail(exc)
    typer.echo(summary.table())
    typer.echo(f"Wrote {summary.total} items to {out} in {time.perf_counter() - started:.0f} s")


def build_facet_groups_command(
    out: Path = typer.Option(
        Path("runs/facets"), "--out", help="Folder for train.jsonl, dev_subjects.jsonl, dev_<source>.jsonl."
    ),
    data_root: Path | None = typer.Option(
        None,
        "--data-root",
        help="Folder holding facets_general/ and stance_args/; default: $INSTEMB_DATA_ROOT, else ../shared/data.",
    ),
    sources: list[str] = typer.Option([], "--source", help="Sources to read (repeatable); default all."),
    heldout_source: str = typer.Option(
        "factbook",
        "--heldout-source",
        help="One whole source kept out of training as a new-domain dev set ('' = none).",
    ),
    dev_fraction: float = typer.Option(
        0.1, "--dev-fraction", help="Share of each training source's subjects held out."
    ),
    max_groups_per_source: int | None = typer.Option(None, "--max-groups-per-source", min=1),
    max_dev_groups: int = typer.Option(80, "--max-dev-groups", min=1, help="Groups of the held-out source written."),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Build facet groups (a subject, a passage per aspect, an instruction per aspect) from general-domain data."""
    import json

    from ..datasets.facet_sources.build import build_facet_groups
    from ..errors import InstEmbError
    from ..paths import data_root as default_data_root

    try:
        summary = build_facet_groups(
            out, data_root or default_data_root(), sources or None, heldout_source or None, dev_fraction,
            max_groups_per_source, max_dev_groups, seed=seed, log=lambda line: typer.echo(line, err=True),
        )  # fmt: skip
    except InstEmbError as exc:
        fail(exc)
    typer.echo(json.dumps(summary.as_json(), indent=2))


def export_command(
    checkpoint: Path | None = typer.Argument(
        None,
        help="A model folder: an LLM folder, e.g. runs/default/final or a run's checkpoint runs/default/checkpoint-100 "
        "(with --format sentence-transformers also a composed folder); default: the shipped model.",
    ),
    target: Path | None = typer.Argument(None, help="Where the copy goes (replaced atomically); or --out."),
    out: Path | None = typer.Option(None, "--out", help="Where the copy goes (the TARGET argument's other spelling)."),
    export_format: ExportFormat = typer.Option(
        ExportFormat.instemb,
        "--format",
        help="instemb: the LLM folder's encoder files (no optimizer state); sentence-transformers: any model "
        "folder as a copy with a README, to load with SentenceTransformer(DIR, trust_remote_code=True) "
        "(docs/sentence-transformers.md). Both load with SentenceTransformer and with --model.",
    ),
    max_length: int | None = typer.Option(
        None, "--max-length", help="Tokens the exported encoder embeds (inputs are truncated)."
    ),
    pooling: PoolingMode | None = typer.Option(None, "--pooling", help="Default pooling of the exported encoder."),
    head_input_weight: float | None = typer.Option(
        None,
        "--head-input-weight",
        help="For an LLM folder with a projection head: the share (0-1) of its own pooled geometry "
        "the embedding keeps beside the head's (cosine = w * pooled + (1 - w) * head).",
    ),
    sentence_encoder: str | None = typer.Option(
        None,
        "--sentence-encoder",
        "--tower",  # its name before issue 62, still read
        help="Make the copy two-tower: this sentence encoder (a teacher name such as minilm, or a "
        "sentence-transformers folder) embeds documents, and the LLM folder's projection head, trained "
        "into its space, embeds queries there. Use the teacher the run was trained against. A folder "
        "is copied into the export (its own folder); a model with anchored queries keeps its anchor.",
    ),
) -> None:
    """Copy an LLM folder's encoder files (no optimizer state) with new inference settings, or any
    model folder as a sentence-transformers copy (--format sentence-transformers)."""
    from ..encoder.composed.export import export_model
    from ..errors import InstEmbError
    from ..interop import export_sentence_transformers

    if target is not None and out is not None and target != out:
        fail(f"Two targets: {target} and --out {out}. Give one.", code=ExitCode.BAD_INPUT)
    target = target or out
    if target is None:
        fail("Give where the copy goes: a TARGET argument or --out DIR.", code=ExitCode.BAD_INPUT)

    options = {
        key: value
        for key, value in {
            "max_length": max_length,
            "pooling": pooling and pooling.value,
            "head_input_weight": head_input_weight,
        }.items()
        if value is not None
    }
    try:
        if sentence_encoder is not None:  # --document-tower before issue 54, --tower before issue 62
            from ..encoder.modules.sentence_encoder import SentenceEncoder

            options["sentence_encoder"] = SentenceEncoder.load(
                SentenceEncoder.recorded_reference(sentence_encoder)
            ).get_config_dict()
        if export_format is ExportFormat.sentence_transformers:
            export_sentence_transformers(checkpoint, target, **options)
        else:
            if checkpoint is None:
                from ..encoder.model import SHIPPED_MODEL_FOLDER

                checkpoint = SHIPPED_MODEL_FOLDER
            export_model(checkpoint, target, **options)
    except (InstEmbError, ValueError) as exc:
        fail(exc)
    typer.echo(f"Exported {checkpoint or 'the shipped model'} to {target} ({export_format.value})")


def register(app: typer.Typer) -> None:
    app.command("train")(train_command)
    app.command("build-data")(build_data_command)
    app.command("build-distill-texts")(build_distill_texts_command)
    app.command("build-facet-groups")(build_facet_groups_command)
    app.command("export")(export_command)
