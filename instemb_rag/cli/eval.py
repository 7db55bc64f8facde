"""`instemb-rag eval`: evaluate any encoder on built-in tasks or a BEIR folder."""

from __future__ import annotations

from pathlib import Path

import typer

from ..choices import FacetBaseline, HybridMode, PoolingMode, Precision, SteeringSplit
from .common import (
    compile_option,
    device_option,
    fail,
    load_encoder,
    precision_option,
    say,
    strict_precision_option,
)

DEFAULT_TASKS = ["scifact", "scifact-stance", "vaswani", "stsb"]


def eval_command(
    tasks: list[str] = typer.Argument(
        None,
        help="Task names (scifact, scifact-stance, vaswani, stsb, medquad-facets, climate-fever-stance, "
        "perspectrum-stance, nli-stance, stance-pooled, facet-groups) or BEIR folder paths. "
        "Default: scifact, scifact-stance, vaswani, stsb.",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        "-m",
        help="Model folder (an LLM folder or a composed folder) or Hugging Face folder; default (or 'default'): the shipped one; "
        "pasted:NAME: the sentence encoder NAME (minilm, or a folder) on both sides, the instruction pasted "
        "before the query (the two-tower anchor); concat:[W:]A,B: A's and B's embeddings side by side.",
    ),
    untrained: bool = typer.Option(
        False, "--untrained", help="Evaluate the untrained backbone (fresh look-ahead tokens) instead of a trained one."
    ),
    pooling: PoolingMode | None = typer.Option(None, help="Override the model's pooling."),
    lookahead: int | None = typer.Option(
        None, "--lookahead", help="Look-ahead tokens used at inference (0..trained length)."
    ),
    max_queries: int | None = typer.Option(
        50, help="Queries (stance records, STS pairs) per task; stance-pooled: items per set; 0 = all."
    ),
    max_docs: int | None = typer.Option(
        500, help="Corpus size: every judged document + a seeded sample of the rest; 0 = all."
    ),
    seed: int = typer.Option(0, help="Seed for sub-sampling."),
    instruction: str | None = typer.Option(None, help="Query instruction for every query without its own ('' = none)."),
    data_root: Path | None = typer.Option(
        None,
        help="Folder with the evaluation sets; default: $INSTEMB_DATA_ROOT, else ../shared/data beside the checkout.",
    ),
    output: Path = typer.Option(
        Path("eval_results.json"), "--output", "-o", "--json", help="Where to write the JSON results."
    ),
    groups: Path | None = typer.Option(
        None, help="facet-groups: the groups file; default: eval_sets/facet_groups_dev.jsonl of the checkout."
    ),
    baseline: list[FacetBaseline] = typer.Option(
        [], help="facet-groups: also score this ranker (bm25: the instruction pasted before the query)."
    ),
    teacher: list[str] = typer.Option(
        [],
        help="facet-groups: also score this sentence encoder (minilm, mpnet or a sentence-transformers folder) "
        "reading instruction + ' ' + query. Repeatable.",
    ),
    against: list[str] = typer.Option(
        [],
        help="facet-groups: also score this InstEmb model folder ('default': the shipped one). The paired gains of "
        "--model over it and over every baseline are shown. Repeatable.",
    ),
    hybrid: HybridMode | None = typer.Option(
        None,
        help="Score retrieval, stance and facet-groups tasks as `query --hybrid` ranks: dense fused with the "
        "full-text (bm25) ranking of the query and the instruction's content words.",
    ),
    lexical_rerank: bool = typer.Option(
        False,
        "--lexical-rerank",
        help="Instead of fusing: the full-text side's best 100 re-ranked by the dense score (measured option).",
    ),
    hybrid_weight: float = typer.Option(
        0.5, min=0.0, max=1.0, help="With --hybrid: the full-text side's share (1.0: the full-text side alone)."
    ),
    lexical_words: str = typer.Option(
        "content",
        help="With --hybrid: the instruction words the full-text side reads: content (the search's rule), all, none.",
    ),
    lexical_engine: str = typer.Option(
        "fts5", help="With --hybrid: fts5 (the index's SQLite full-text index) or bm25s (to compare engines)."
    ),
    reader: Path | None = typer.Option(
        None,
        "--reader",
        help="Re-score each query's top hits with a reader, as `query --rerank` does: a model folder with a "
        "rerank route, or a trained reader's final/ folder. Facet groups then pair it with the model without it.",
    ),
    rerank_top: int | None = typer.Option(
        None, "--rerank-top", min=1, help="With --reader: hits it reads per query (default: its own)."
    ),
    batch_size: int = typer.Option(16, help="Texts per forward pass."),
    device: str = device_option(),
    precision: Precision = precision_option(),
    strict_precision: bool = strict_precision_option(),
    compile: bool = compile_option(),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the corpus embedding cache."),
    exclude_seen: Path | None = typer.Option(
        None, help="Training records (train.jsonl): leave out queries whose text the model read in training."
    ),
    split: SteeringSplit = typer.Option(
        SteeringSplit.heldout,
        help="Groups the steering tasks (medquad-facets, climate-fever-stance, perspectrum-stance, nli-stance) score: "
        "heldout (the dev figure) or train (can the model fit the task at all?).",
    ),
    progress: bool = typer.Option(True, help="Show progress bars."),
) -> None:
    """Evaluate an encoder; prints a table and writes JSON. Use small limits on CPU."""
    from rich.console import Console
    from rich.text import Text

    from ..errors import InstEmbError
    from ..eval import evaluate, write_results_json
    from ..eval.report import results_table
    from ..paths import data_root as default_data_root
    from .eval_facets import FACET_TASK, facet_groups_or_refuse, model_path, print_facet_tables, run_facet_groups

    console = Console()
    pooling = pooling.value if pooling else None
    model = model_path(model)

    task_names = list(tasks or DEFAULT_TASKS)
    try:
        hybrid_settings = None
        if hybrid is not None or lexical_rerank:
            from ..eval.hybrid import RERANK, HybridSettings

            mode = RERANK if lexical_rerank else hybrid.value
            hybrid_settings = HybridSettings(mode, hybrid_weight, lexical_words, lexical_engine)
        reranker = None
        if reader is not None:
            import dataclasses

            from ..reader.reranker import Reranker

            reranker = Reranker.from_pretrained(reader)
            if rerank_top is not None:
                reranker = Reranker(
                    reranker.model, dataclasses.replace(reranker.route, top=rerank_top), reranker.source
                )
        facet_groups = facet_groups_or_refuse(
            task_names, {"--groups": groups, "--baseline": baseline, "--teacher": teacher, "--against": against}
        )
        # Every reference (a folder, concat:, pasted:, the default) is resolved by encoder.load_model.
        encoder = load_encoder(
            model, device, precision, compile, strict_precision, pooling, lookahead, untrained=untrained
        )
        results, extra = [], {}
        for task in task_names:
            console.print(Text(f"{task} …", style="bold"))
            if task == FACET_TASK:
                settings = {
                    "device": device,
                    "precision": precision,
                    "batch_size": batch_size,
                    "progress": progress,
                    "hybrid": hybrid_settings,
                    "rerank": reranker,
                }
                run = run_facet_groups(encoder, model, facet_groups, (baseline, teacher, against), settings, seed)
                results.extend(run.results)
                extra["facet_groups"] = run.to_dict()
            else:
                results.append(
                    evaluate(
                        encoder,
                        task,
                        max_queries=max_queries or None,
                        max_docs=max_docs or None,
                        seed=seed,
                        data_root=data_root or default_data_root(),
                        instruction=instruction,
                        cache=not no_cache,
                        batch_size=batch_size,
                        show_progress=progress,
                        exclude_seen=exclude_seen,
                        steering_split=split.value,
                        hybrid=hybrid_settings,
                        rerank=reranker,
                    )
                )
            for note in results[-1]["notes"]:
                say(console, "note", note, indent="  ")
    except InstEmbError as error:
        fail(error)
    precision_report = getattr(encoder, "quantization_report", None)
    for result in results if precision_report is not None else ():
        result["encoder"]["precision"] = precision_report  # int8: what ran (layers in int8 / kept float)
    console.print(results_table(results))
    print_facet_tables(console, extra)
    write_results_json(results, output, extra)
    console.print(Text(f"results written to {output}"))


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
