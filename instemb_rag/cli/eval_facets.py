"""`instemb-rag eval facet-groups`: the parts of the eval command that only the facet-groups task
uses (its groups file, the baselines scored beside the model, the paired-gain tables)."""

from __future__ import annotations

from pathlib import Path

from ..choices import FacetBaseline, Precision

FACET_TASK = "facet-groups"


def model_path(model: str | None) -> str | None:
    """``--model default`` names the shipped default (None), unless a folder of that name is here."""
    return None if model == "default" and not Path(model).exists() else model


def facet_groups_or_refuse(task_names: list[str], facet_options: dict):
    """(path, groups) to score, loaded and checked before any model loads; None when
    facet-groups is not asked. Facet-only options without the task are bad input (exit 2)."""
    from ..eval.data import EvalDataError

    if FACET_TASK not in task_names:
        given = [name for name, value in facet_options.items() if value]
        if given:
            raise EvalDataError(f"{', '.join(given)} only apply to the {FACET_TASK} task; add it to the task list.")
        return None
    from ..eval.facet_groups import load_facet_groups, resolve_groups_path

    path = resolve_groups_path(facet_options["--groups"])
    return path, load_facet_groups(path)


def run_facet_groups(encoder, model: str | None, facet_groups, others, settings: dict, seed: int):
    """--model first, then every --against checkpoint, --baseline and --teacher, in one harness.

    ``others`` = (baselines, teachers, against); ``settings``: device, precision, batch_size, progress
    and hybrid (HybridSettings or None: then --model is scored fused first, then dense, then the
    lexical side alone, from one dense pass)."""
    from ..encoder import load_model
    from ..eval.facet_runs import bm25_ranker, instemb_ranker, teacher_ranker
    from ..eval.facet_runs import run_facet_groups as run

    path, groups = facet_groups
    baselines, teachers, against = others
    batch, progress = settings["batch_size"], settings["progress"]
    rankers = [instemb_ranker(encoder, f"instemb {model or 'default'}", batch, progress)]
    if settings.get("rerank") is not None:  # the model with its reader first, paired with the model alone
        rankers.insert(
            0, instemb_ranker(encoder, f"instemb {model or 'default'}", batch, progress, rerank=settings["rerank"])
        )
    hybrid = settings.get("hybrid")
    if hybrid is not None:
        import dataclasses

        from ..eval.facet_runs import hybrid_rankers

        lexical_only = dataclasses.replace(hybrid, mode="rrf", weight=1.0)
        rankers = hybrid_rankers(rankers[0].identity, rankers[0].scores, [hybrid, None, lexical_only])
    for other in against:
        other_encoder = load_model(
            model_path(other), device=settings["device"], precision=Precision(settings["precision"]).value
        )
        rankers.append(instemb_ranker(other_encoder, f"instemb {other}", batch, progress))
    rankers += [bm25_ranker() for choice in baselines if FacetBaseline(choice) is FacetBaseline.bm25]
    rankers += [teacher_ranker(name, settings["device"], show_progress=progress) for name in teachers]
    return run(groups, rankers, path, seed)


def print_facet_tables(console, extra: dict) -> None:
    """The per-domain split and, when more than one embedder ran, the paired gains."""
    if "facet_groups" not in extra:
        return
    from ..eval.report import facet_comparison_table, facet_split_table

    console.print(facet_split_table(extra["facet_groups"]["details"]))
    if extra["facet_groups"]["comparisons"]:
        console.print(facet_comparison_table(extra["facet_groups"]["comparisons"]))
