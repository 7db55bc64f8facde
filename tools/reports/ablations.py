"""Ablation report: run the evaluation tasks over encoder variants, write docs/ablations.md + plots.

Variants (each group is skipped with a note where it cannot be built):
- pooling: the five poolings on one LLM (``--checkpoint``: an LLM folder or a model folder);
- look-ahead length at inference: L in 0, 1, 4, 8 (lengths above the trained one are skipped);
- named LLM folders in ``--checkpoints-dir`` (trained runs' folders, named by
  scripts/train_ablations.sh): sub-folders ``loss-mse`` / ``loss-kl`` (distillation
  loss), ``views-*`` (contrastive-view ablation), ``targets-*`` (teacher targets with the
  answer's stopwords removed, compared against ``loss-mse``, which keeps them) and ``negatives-*``
  (the pooled retrieval loss with in-batch negatives vs a memory of recent documents); any other
  LLM folder is listed as "other";
- trained vs untrained: the untrained backbone (InputLast, and DAAP with fresh look-ahead tokens)
  against the trained LLM.

The option and field names ``checkpoint``, ``checkpoints_dir`` and ``checkpoint_tasks`` are kept as
they were (recorded in docs/ablations.md's command and scripts/train_ablations.sh): they name LLM
folders, not a trainer's ``checkpoint-<step>/`` (issue 68 names round 2).

The report opens with the paper's findings checked against these results (findings.py).

Run small first (CPU embeds ~400 tokens/s)::

    python -m tools.reports.ablations --tasks scifact-stance --tasks stsb --max-queries 20 --max-docs 200
"""

from __future__ import annotations

import gc
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import typer

from instemb_rag.encoder.modules.pooling import POOLING_MODES
from instemb_rag.eval.results import write_results_json
from instemb_rag.eval.seen import SeenTexts
from instemb_rag.eval.shared_forward import SharedForward
from instemb_rag.eval.tasks import TASKS, evaluate

from .findings import findings_markdown

DEFAULT_LOOKAHEAD_LENGTHS = (0, 1, 4, 8)
CHECKPOINT_GROUPS = (
    ("loss-", "distillation loss (MSE vs KL)"),
    ("views-", "contrastive views"),
    ("targets-", "distillation targets (content words)"),
    ("negatives-", "retrieval negatives (in-batch vs memory)"),
)


@dataclass
class AblationArgs:
    checkpoint: str | None = None  # None: the shipped LLM (a two-space folder: its documents' LLM)
    checkpoints_dir: Path | None = None
    tasks: list[str] = field(default_factory=lambda: ["scifact", "scifact-stance", "vaswani", "stsb"])
    max_queries: int | None = 50
    max_docs: int | None = 500
    seed: int = 0
    data_root: Path | None = None
    output: Path = Path("docs/ablations.md")
    img_dir: Path = Path("docs/img")
    results_json: Path | None = None
    device: str = "auto"
    lookahead_lengths: tuple[int, ...] = DEFAULT_LOOKAHEAD_LENGTHS
    poolings: tuple[str, ...] = POOLING_MODES
    cache: bool = True
    exclude_seen: Path | None = None  # training records: leave out queries the model read
    sts_pairs: int | None = 500  # STS tasks use this limit instead of max_queries
    checkpoint_tasks: list[str] | None = None  # tasks for the named LLM folders (None: all tasks)
    task_limits: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)  # task -> (queries, docs)

    def limits_for(self, task: str) -> tuple[int | None, int | None]:
        """(max_queries, max_docs) of one task: its own limits, else the run's."""
        if task in self.task_limits:
            return self.task_limits[task]
        if task in TASKS and TASKS[task].kind == "sts":
            return self.sts_pairs, None
        return self.max_queries, self.max_docs


def parse_task_limit(text: str) -> tuple[str, tuple[int | None, int | None]]:
    """``vaswani=25:400`` -> ("vaswani", (25, 400)); ``stsb=500`` -> ("stsb", (500, None)); 0 = all."""
    task, _, value = text.partition("=")
    queries, _, docs = value.partition(":")
    try:
        return task.strip(), (int(queries) or None, int(docs) or None if docs else None)
    except ValueError:
        raise typer.BadParameter(
            f"--task-limit expects TASK=QUERIES[:DOCS], e.g. vaswani=25:400; got '{text}'"
        ) from None


@dataclass
class Variant:
    group: str
    label: str
    load: Callable[[], object]
    tasks: list[str] | None = None  # None: every task of the run


def build_variants(args: AblationArgs) -> tuple[list[Variant], list[str]]:
    """Every variant to evaluate. The pooling and look-ahead-length variants of the LLM
    share one forward pass (shared_forward.py), as do the two untrained variants."""
    from instemb_rag.encoder import InstEmbEncoder, shipped_llm_folder
    from instemb_rag.encoder.composed import llm_folder_of

    notes: list[str] = []
    device = args.device
    # The pooling and look-ahead ablations are the LLM's: the shipped LLM, whichever layout ships.
    llm = llm_folder_of(args.checkpoint) if args.checkpoint else shipped_llm_folder()
    trained = InstEmbEncoder.from_pretrained(llm, device=device)
    trained_length = trained.lookahead.length
    lengths = []
    for length in args.lookahead_lengths:
        if length > trained_length:
            notes.append(f"look-ahead L={length} skipped: the LLM has {trained_length} look-ahead vectors")
        else:
            lengths.append(length)
    shared = SharedForward(
        trained,
        [(mode, trained_length) for mode in args.poolings]
        + [("daap", length) for length in lengths]
        + [("daap", trained_length)],
    )
    untrained = _lazy(
        lambda: SharedForward(
            InstEmbEncoder.from_backbone(trained.backbone.reference, lookahead_length=trained_length, device=device),
            [("input_last", 0), ("daap", trained_length)],
        )
    )
    variants = [
        Variant("trained vs untrained", "untrained (input_last)", lambda: untrained().view("input_last", 0)),
        Variant(
            "trained vs untrained",
            f"untrained (daap, L={trained_length})",
            lambda: untrained().view("daap", trained_length),
        ),
    ]
    variants.append(
        Variant(
            "trained vs untrained", f"trained (daap, L={trained_length})", lambda: shared.view("daap", trained_length)
        )
    )
    variants += [
        Variant("pooling", mode, lambda mode=mode: shared.view(mode, trained_length)) for mode in args.poolings
    ]
    variants += [
        Variant("look-ahead length", f"L={length}", lambda length=length: shared.view("daap", length))
        for length in lengths
    ]
    variants += _checkpoint_variants(args, notes)
    return variants, notes


def _lazy(build):
    """``build()`` on first call, the same object afterwards."""
    made: list = []

    def get():
        if not made:
            made.append(build())
        return made[0]

    return get


def _checkpoint_variants(args: AblationArgs, notes: list[str]) -> list[Variant]:
    from instemb_rag.encoder.llm_folder import is_llm_folder

    folder = args.checkpoints_dir
    if folder is None or not Path(folder).is_dir():
        notes.append(f"named LLM folder ablations skipped: no folder of them ({folder or 'not given'})")
        return []
    found = sorted(path for path in Path(folder).iterdir() if is_llm_folder(path))
    variants = []
    for prefix, group in CHECKPOINT_GROUPS:
        members = [path for path in found if path.name.startswith(prefix)]
        if not members:
            notes.append(f"'{group}' skipped: no LLM folder named {prefix}* in {folder}")
        variants += [
            Variant(group, path.name, _checkpoint_loader(path, args.device), args.checkpoint_tasks) for path in members
        ]
    others = [path for path in found if not path.name.startswith(tuple(p for p, _ in CHECKPOINT_GROUPS))]
    variants += [
        Variant("other LLM folders", path.name, _checkpoint_loader(path, args.device), args.checkpoint_tasks)
        for path in others
    ]
    return variants


def _checkpoint_loader(path: Path, device: str):
    from instemb_rag.encoder import InstEmbEncoder

    return lambda: InstEmbEncoder.from_pretrained(path, device=device)


def run_ablations(args: AblationArgs, variants: list[Variant], echo=print) -> list[dict]:
    results = []
    seen = SeenTexts(args.exclude_seen) if args.exclude_seen else None
    for variant in variants:
        encoder = variant.load()
        for task in variant.tasks or args.tasks:
            echo(f"{variant.group} / {variant.label} / {task}")
            max_queries, max_docs = args.limits_for(task)
            result = evaluate(
                encoder,
                task,
                max_queries=max_queries,
                max_docs=max_docs,
                seed=args.seed,
                data_root=args.data_root,
                cache=args.cache,
                label=variant.label,
                exclude_seen=seen,
            )
            result["group"] = variant.group
            results.append(result)
        del encoder
        gc.collect()  # one ~0.5 GB model at a time
    return results


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def plot_group(group: str, results: list[dict], tasks: list[str], img_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(result["encoder"]["label"] for result in results))
    figure, axes = plt.subplots(1, len(tasks), figsize=(3.2 * len(tasks) + 1, 3.2), squeeze=False)
    for axis, task in zip(axes[0], tasks):
        by_label = {r["encoder"]["label"]: r for r in results if r["task"] == task}
        values = [
            by_label[label]["metrics"][by_label[label]["main_metric"]] if label in by_label else 0.0 for label in labels
        ]
        axis.bar(range(len(labels)), values, color="tab:blue")
        axis.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8)
        metric = next((r["main_metric"] for r in by_label.values()), "")
        axis.set_title(f"{task} ({metric})", fontsize=9)
        axis.axhline(0, color="black", linewidth=0.5)
    figure.suptitle(group)
    figure.tight_layout()
    img_dir.mkdir(parents=True, exist_ok=True)
    path = img_dir / f"ablation_{_slug(group)}.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def render_markdown(
    results: list[dict], notes: list[str], args: AblationArgs, image_paths: dict[str, Path], command: str
) -> str:
    lines = [
        "# Ablations",
        "",
        f"Generated by `{command}`.",
        "",
        f"Limits: max_queries={args.max_queries}, max_docs={args.max_docs}, STS pairs={args.sts_pairs}, "
        + "".join(
            f"{task}: {queries} queries / {docs} documents, " for task, (queries, docs) in args.task_limits.items()
        )
        + f"seed={args.seed}. "
        + (
            f"Queries whose text occurs in the training records `{args.exclude_seen}` are left out "
            "(every encoder is scored on the same held-out queries). "
            if args.exclude_seen
            else ""
        )
        + "With a limited corpus every judged document is kept plus a seeded sample of the rest, so "
        "absolute scores are higher than on the full corpus; compare rows, not papers. Brackets: bootstrap "
        "95 % intervals over the evaluated items; rows whose intervals overlap are not told apart.",
        "",
    ]
    lines += findings_markdown(results)
    for group in dict.fromkeys(result["group"] for result in results):
        rows = [result for result in results if result["group"] == group]
        tasks = list(dict.fromkeys(result["task"] for result in rows))
        metric_names = {result["task"]: result["main_metric"] for result in rows}
        lines += [
            f"## {group}",
            "",
            "| variant | " + " | ".join(f"{t} ({metric_names[t]})" for t in tasks) + " |",
            "|---|" + "---:|" * len(tasks),
        ]
        for label in dict.fromkeys(result["encoder"]["label"] for result in rows):
            cells = []
            for task in tasks:
                match = next((r for r in rows if r["task"] == task and r["encoder"]["label"] == label), None)
                cells.append(_cell(match) if match else "–")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        if group in image_paths:
            relative = os.path.relpath(image_paths[group], args.output.parent)
            lines += ["", f"![{group}]({Path(relative).as_posix()})"]
        lines.append("")
    if notes:
        lines += ["## Notes", ""] + [f"- {note}" for note in notes] + [""]
    return "\n".join(lines)


def _cell(result: dict) -> str:
    """The main metric with its bootstrap 95 % interval, where the task computed one."""
    name = result["main_metric"]
    interval = (result.get("intervals") or {}).get(name)
    value = f"{result['metrics'][name]:.4f}"
    return f"{value} [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else value


def write_report(results: list[dict], notes: list[str], args: AblationArgs, command: str) -> Path:
    images = {}
    for group in dict.fromkeys(result["group"] for result in results):
        rows = [r for r in results if r["group"] == group]
        images[group] = plot_group(group, rows, list(dict.fromkeys(r["task"] for r in rows)), args.img_dir)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    temporary = args.output.with_name(f".{args.output.name}.tmp")
    temporary.write_text(render_markdown(results, notes, args, images, command))
    temporary.replace(args.output)
    if args.results_json:
        write_results_json(results, args.results_json)
    return args.output


def main(
    checkpoint: str | None = typer.Option(
        None, help="LLM folder or model folder for the pooling / L ablations (default: the shipped default's LLM)."
    ),
    checkpoints_dir: Path | None = typer.Option(None, help="Folder of named LLM folders: loss-mse, loss-kl, views-*."),
    tasks: list[str] = typer.Option(
        ["scifact", "scifact-stance", "vaswani", "stsb"], "--tasks", help="Repeat for several."
    ),
    max_queries: int = typer.Option(50, help="0 = all."),
    max_docs: int = typer.Option(500, help="0 = all."),
    seed: int = 0,
    data_root: Path | None = None,
    output: Path = Path("docs/ablations.md"),
    img_dir: Path = Path("docs/img"),
    results_json: Path | None = typer.Option(None, help="Also write the raw results here."),
    device: str = "auto",
    lookahead_lengths: str = typer.Option("0,1,4,8", help="Comma-separated inference look-ahead lengths."),
    poolings: str = typer.Option(",".join(POOLING_MODES), help="Comma-separated pooling modes."),
    exclude_seen: Path | None = typer.Option(
        None, help="Training records (train.jsonl): leave out queries the model read in training."
    ),
    sts_pairs: int = typer.Option(500, help="STS pairs per STS task (max_queries is for retrieval/stance); 0 = all."),
    checkpoint_tasks: list[str] = typer.Option(
        [], "--checkpoint-tasks", help="Tasks for the named LLM folders (repeat; default: --tasks)."
    ),
    task_limit: list[str] = typer.Option(
        [], "--task-limit", help="Per-task limits TASK=QUERIES[:DOCS] (repeat), e.g. vaswani=25:400."
    ),
) -> None:
    """Run every variant on the chosen tasks and write the ablation report."""
    args = AblationArgs(
        checkpoint,
        checkpoints_dir,
        tasks,
        max_queries or None,
        max_docs or None,
        seed,
        data_root,
        output,
        img_dir,
        results_json,
        device,
        tuple(int(v) for v in lookahead_lengths.split(",") if v.strip()),
        tuple(v.strip() for v in poolings.split(",") if v.strip()),
        exclude_seen=exclude_seen,
        sts_pairs=sts_pairs or None,
        checkpoint_tasks=checkpoint_tasks or None,
        task_limits=dict(parse_task_limit(item) for item in task_limit),
    )
    variants, notes = build_variants(args)
    results = run_ablations(args, variants, echo=typer.echo)
    command = "python -m tools.reports.ablations " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    typer.echo(f"wrote {write_report(results, notes, args, command)}")


if __name__ == "__main__":
    typer.run(main)
