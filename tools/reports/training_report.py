"""The training report of a run: what was trained, how the loss went, and dev figures of the
untrained backbone against the trained model.

The figures come from the ablation results JSON (its "trained vs untrained" group), so one
evaluation pass serves both reports::

    python -m tools.reports.ablations ... --results-json docs/ablations.json
    python -m tools.reports.training_report --run runs/default --results docs/ablations.json
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import typer

from instemb_rag.jsonl import read_jsonl_objects

HEADLINE_GROUP = "trained vs untrained"
# (task, metric, label, kind) in report order. Instruction and generic figures get a verdict
# (trained vs best untrained); diagnostic ones explain the others and get none.
FIGURES = (
    ("scifact", "ndcg@10", "SciFact train claims nDCG@10", "instruction"),
    ("scifact-stance", "p-mrr", "SciFact stance p-MRR", "instruction"),
    ("scifact-stance", "pairwise_accuracy", "SciFact stance pairwise accuracy", "instruction"),
    ("scifact-stance", "pairwise_accuracy_support", "  of which SUPPORT records", "diagnostic"),
    ("scifact-stance", "pairwise_accuracy_contradict", "  of which CONTRADICT records", "diagnostic"),
    ("scifact-stance", "mrr_matching", "SciFact stance MRR under the matching instruction", "diagnostic"),
    ("vaswani", "ndcg@10", "Vaswani nDCG@10", "instruction"),
    ("stsb", "spearman", "STS-B test Spearman", "generic"),
)


def headline_rows(results: list[dict]) -> dict[str, dict[str, dict]]:
    """label -> task -> result, for the results of the headline group."""
    rows: dict[str, dict[str, dict]] = {}
    for result in results:
        if result.get("group") == HEADLINE_GROUP:
            rows.setdefault(result["encoder"]["label"], {})[result["task"]] = result
    return rows


def figures_table(rows: dict[str, dict[str, dict]]) -> tuple[list[str], list[str]]:
    """Markdown table lines and a verdict line per instruction figure (trained vs best untrained)."""
    labels = list(rows)
    trained = next((label for label in labels if label.startswith("trained")), None)
    lines = ["| figure | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    verdicts = []
    for task, metric, name, kind in FIGURES:
        values = {label: rows[label][task]["metrics"].get(metric) for label in labels if task in rows[label]}
        if all(value is None for value in values.values()):
            continue
        lines.append(
            f"| {name} | "
            + " | ".join(f"{values[label]:.4f}" if values.get(label) is not None else "–" for label in labels)
            + " |"
        )
        untrained = [value for label, value in values.items() if label != trained and value is not None]
        if trained in values and untrained and kind != "diagnostic":
            best = max(untrained)
            beats = values[trained] > best
            verdicts.append(
                f"- {name} ({kind} figure): trained {values[trained]:.4f} vs best untrained {best:.4f}: "
                + ("**better**" if beats else "**not better**")
            )
    return lines, verdicts + stance_bias_notes(rows)


def stance_bias_notes(rows: dict[str, dict[str, dict]], threshold: float = 0.9) -> list[str]:
    """One line per encoder that prefers one stance wording for nearly every claim, whatever
    the label: its pairwise accuracy is then that label's share, not instruction following."""
    notes = []
    for label, per_task in rows.items():
        metrics = per_task.get("scifact-stance", {}).get("metrics", {})
        support, contradict = metrics.get("pairwise_accuracy_support"), metrics.get("pairwise_accuracy_contradict")
        if support is None or contradict is None:
            continue
        for preferred, right, wrong in (("support", support, contradict), ("contradict", contradict, support)):
            if right >= threshold and wrong <= 1 - threshold:
                notes.append(
                    f"- {label} scores the '{preferred}' instruction higher on {right:.0%} of the "
                    f"{preferred.upper()} records and on {1 - wrong:.0%} of the others: it does not tell "
                    "the stance instructions apart, so its stance pairwise accuracy is the share of "
                    f"{preferred.upper()} records and its p-MRR moves with rank noise."
                )
    return notes


# The goals for instruction steering, checked on held-out groups: (task, metric, goal, label).
GOALS = (
    ("medquad-facets", "steering_accuracy", 0.80, "MedQuAD facets: asked facet ranked first"),
    ("medquad-facets", "pairwise_accuracy", 0.80, "MedQuAD facets: pairwise over the focus's other facets"),
    ("climate-fever-stance", "pairwise_accuracy_supports", 0.70, "Climate-FEVER, SUPPORTS asked"),
    ("climate-fever-stance", "pairwise_accuracy_refutes", 0.70, "Climate-FEVER, REFUTES asked"),
    ("scifact-stance", "pairwise_accuracy_support", 0.50, "SciFact stance pairwise, SUPPORT records (> 0.5)"),
    ("scifact-stance", "pairwise_accuracy_contradict", 0.50, "SciFact stance pairwise, CONTRADICT records (> 0.5)"),
    ("scifact-stance", "p-mrr", 0.05, "SciFact stance p-MRR (> 0.05)"),
    ("scifact", "ndcg@10", 0.50, "SciFact nDCG@10"),
    ("vaswani", "ndcg@10", 0.55, "Vaswani nDCG@10"),
    ("stsb", "spearman", 0.70, "STS-B Spearman"),
)
COMPARED = (
    ("medquad-facets", ("steering_accuracy", "pairwise_accuracy", "random_steering_accuracy")),
    (
        "climate-fever-stance",
        ("pairwise_accuracy", "pairwise_accuracy_supports", "pairwise_accuracy_refutes", "instruction_effect"),
    ),
    ("nli-stance", ("pairwise_accuracy_supports", "pairwise_accuracy_refutes", "instruction_effect")),
    (
        "scifact-stance",
        ("p-mrr", "pairwise_accuracy", "pairwise_accuracy_support", "pairwise_accuracy_contradict", "mrr_matching"),
    ),
    ("scifact", ("ndcg@10",)),
    ("vaswani", ("ndcg@10",)),
    ("stsb", ("spearman",)),
)


def _figure(result: dict | None, metric: str) -> str:
    if not result or metric not in result["metrics"]:
        return "–"
    interval = result.get("intervals", {}).get(metric)
    value = f"{result['metrics'][metric]:.3f}"
    return value + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")


def comparison_lines(columns: dict[str, dict[str, dict]]) -> list[str]:
    """Markdown table: one row per (task, metric), one column per encoder, with 95 % intervals."""
    labels = list(columns)
    lines = ["| task | metric | " + " | ".join(labels) + " |", "|---|---|" + "---:|" * len(labels)]
    for task, metrics in COMPARED:
        if not any(task in per_task for per_task in columns.values()):
            continue
        for metric in metrics:
            lines.append(
                f"| {task} | {metric} | "
                + " | ".join(_figure(columns[label].get(task), metric) for label in labels)
                + " |"
            )
    return lines


def goal_lines(results: dict[str, dict]) -> list[str]:
    """Met / not met (and by how much) for each goal the results cover."""
    lines = []
    for task, metric, goal, label in GOALS:
        result = results.get(task)
        if not result or metric not in result["metrics"]:
            continue
        value = result["metrics"][metric]
        met = value > goal if "(> " in label else value >= goal
        lines.append(
            f"- {label}: {value:.3f} vs goal {goal:.2f}: "
            + ("**met**" if met else f"**not met** (short by {goal - value:.3f})")
        )
    return lines


def by_task(path: Path) -> dict[str, dict]:
    return {result["task"]: result for result in json.loads(Path(path).read_text())["results"]}


def _teacher_time(info: dict) -> str:
    """Teacher-target time summed over the run's invocations (a resumed run reuses the cache)."""
    parts = [session.get("teacher_cache") for session in [*info.get("sessions", []), info]]
    parts = [part for part in parts if part]
    skipped = [part["skipped"] for part in parts if "skipped" in part]
    parts = [part for part in parts if "seconds" in part]
    if not parts:
        return f"; no teacher pass ({skipped[0]})" if skipped else ""
    seconds = sum(part["seconds"] for part in parts)
    records = sum(part["computed_records"] for part in parts)
    return f", plus {seconds / 60:.1f} min computing teacher targets ({records} records)"


def _loss_terms(t: dict) -> str:
    """The loss terms the run trained with; a term whose weight is 0 is not named (weights
    missing from older configs count as on, the trainer's defaults then)."""
    terms = []
    if t.get("distill_weight", 1.0):
        words = " on content words" if t.get("distill_content_words") else ""
        only = f" of the {', '.join(t['distill_sets'])} records only" if t.get("distill_sets") else ""
        terms.append(f"distillation {t['distill_loss']}{words}{only}")
    if t.get("contrastive_weight", 1.0):
        terms.append(f"contrastive views {', '.join(t['views'])}, tau = {t['temperature']}")
    if t.get("retrieval_weight"):
        terms.append(f"pooled retrieval loss weight {t['retrieval_weight']} (tau {t['retrieval_temperature']})")
    return "; ".join(terms) if terms else "no loss term"


def run_summary(run_dir: Path) -> list[str]:
    config = json.loads((run_dir / "train_config.json").read_text())
    info = json.loads((run_dir / "run_info.json").read_text()) if (run_dir / "run_info.json").is_file() else {}
    metrics = read_jsonl_objects(run_dir / "metrics.jsonl")
    t, m = config["training"], config["model"]
    first, last = metrics[0], metrics[-1]
    window = metrics[-10:]
    mean_last = {
        key: sum(row[key] for row in window) / len(window)
        for key in ("loss", "distill", "contrastive", "retrieval")
        if key in last
    }
    final = run_dir / "final"
    size = sum(path.stat().st_size for path in final.rglob("*") if path.is_file()) if final.is_dir() else 0
    return [
        f"- Records: {info.get('records', '?')} training records built from `{', '.join(config['data']['build_sets'])}` "
        f"(held-out slice {config['data']['heldout_fraction']:.0%} by group).",
        f"- Steps: {last['step']} optimizer steps of {t['batch_size'] * t['gradient_accumulation_steps']} examples; "
        f"L = {m['lookahead_length']}, LoRA rank {m['lora_rank']} on the top {m['trainable_top_layers']} layers"
        f"{' + final norm' if m['train_final_norm'] else ''}; {_loss_terms(t)}.",
        f"- Time: {last['elapsed_s'] / 60:.1f} min of training on {info.get('device', '?')}"
        + _teacher_time(info)
        + ".",
        f"- Loss: {first['loss']:.4f} at step {first['step']} -> mean of the last {len(window)} steps "
        + ", ".join(f"{key} {value:.4f}" for key, value in mean_last.items())
        + ".",
        f"- Checkpoint: {size / 1e6:.1f} MB (look-ahead vectors, final norm and LoRA weights; the base is not copied).",
    ]


def run_section(run_dir: Path, output: Path, img_dir: Path) -> list[str]:
    """The "## Run" section both report kinds share: the run's summary and its loss curve."""
    return ["## Run", "", *run_summary(run_dir), "", loss_curve_line(run_dir, output, img_dir), ""]


def loss_curve_line(run_dir: Path, output: Path, img_dir: Path) -> str:
    """Copy the run's loss curve next to the report and return its markdown image line. The file is
    named after the run, so reports of several runs can share one image folder."""
    img_dir.mkdir(parents=True, exist_ok=True)
    curve = img_dir / f"loss_curve_{run_dir.name}.png"
    shutil.copyfile(run_dir / "loss_curve.png", curve)
    shown = curve.relative_to(output.parent).as_posix() if curve.is_relative_to(output.parent) else curve
    return f"![loss curve]({shown})"


def write_report(output: Path, lines: list[str], notes: list[str]) -> Path:
    """The report's lines, then the evaluation's notes, written to ``output``."""
    lines = [*lines, "Notes from the evaluation:", "", *[f"- {note}" for note in notes], ""]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(lines))
    return output


def write_training_report(run_dir: Path, results_json: Path, output: Path, img_dir: Path, command: str) -> Path:
    results = json.loads(results_json.read_text())["results"]
    rows = headline_rows(results)
    if not rows:
        raise typer.BadParameter(f"{results_json} has no '{HEADLINE_GROUP}' results; run the ablation script first.")
    table, verdicts = figures_table(rows)
    limits = next(iter(next(iter(rows.values())).values()))["limits"]
    notes = sorted({note for per_task in rows.values() for result in per_task.values() for note in result["notes"]})
    lines = [
        "# Training report: the shipped default checkpoint",
        "",
        f"Generated by `{command}` from `{run_dir}` and `{results_json}`.",
        "",
        "Reproduce the checkpoint and this report (times on a 2-core CPU under Run below; the evaluation "
        "takes about as long again):",
        "",
        "```bash",
        "instemb-rag train --config instemb_rag/training/recipes/default.yaml --resume",
        "instemb-rag export runs/default/final instemb_rag/default_checkpoint --max-length 512",
        "python -m tools.reports.ablations --results-json docs/ablations.json ...  # full command: top of docs/ablations.md",
        "python -m tools.reports.training_report --run runs/default --results docs/ablations.json",
        "```",
        "",
        *run_section(run_dir, output, img_dir),
        "## Dev figures: untrained backbone vs trained default",
        "",
        f"Limits: {limits}. Every encoder is scored on the same queries and documents.",
        "",
        *table,
        "",
        *verdicts,
        "",
    ]
    return write_report(output, lines, notes)


def _start_override(recipe: str, start_worktree: str | None) -> str:
    """A recipe that trains on from ``instemb_rag/default_checkpoint`` means the default *of its
    time*; once the candidate is exported over it, the reproduce command must name the worktree of
    the commit it trained on from instead."""
    from instemb_rag.training.args import load_config

    if start_worktree is None or not Path(recipe).is_file():
        return ""
    if load_config(recipe).model.model_name_or_path != "instemb_rag/default_checkpoint":
        return ""
    return f" --set model_name_or_path={start_worktree}/instemb_rag/default_checkpoint"


# Where the reproduce commands check out the commits they name.
PREVIOUS_WORKTREE = "/tmp/previous-default"
START_WORKTREE = "/tmp/start-checkpoint"


@dataclass(frozen=True)
class Candidate:
    """Where a candidate model comes from and what became of it: what its report's reproduce
    commands and its own regenerating command name."""

    recipe: str
    baseline_commit: str | None = None  # the commit whose default the candidate is compared with
    start_commit: str | None = None  # the commit whose default the run trained on from, where not the baseline's
    shipped: bool = True  # False: it stayed a candidate, and the baseline stayed the default
    tried: Path | None = None  # hand-written account of what was tried for the goals still missed

    def worktree_lines(self) -> tuple[list[str], str | None]:
        """The ``git worktree add`` lines of the reproduce commands, and the worktree the run starts
        from: the previous default's, unless the run trained on from another commit's default."""
        lines = []
        if self.baseline_commit:
            lines.append(
                f"git worktree add {PREVIOUS_WORKTREE} {self.baseline_commit}   # the default it is compared with"
            )
        if self.start_commit and self.start_commit != self.baseline_commit:
            lines.append(
                f"git worktree add {START_WORKTREE} {self.start_commit}   # the default the run trains on from"
            )
            return lines, START_WORKTREE
        return lines, PREVIOUS_WORKTREE if self.baseline_commit else None

    @property
    def baseline_model_folder(self) -> str:
        """The model folder the baseline's dev figures are computed from."""
        folder = "instemb_rag/default_checkpoint"
        return f"{PREVIOUS_WORKTREE}/{folder}" if self.baseline_commit else folder

    baseline_checkpoint = baseline_model_folder  # alias kept for compatibility (issue 68 names round 2)


def write_candidate_report(
    run_dir: Path,
    baseline_json: Path,
    candidate_json: Path,
    output: Path,
    img_dir: Path,
    command: str,
    about: Candidate,
) -> Path:
    """The report of a candidate default: its run, and its dev figures against the current default's
    on the same held-out items, with bootstrap intervals and the goals (``about``: see Candidate;
    the figures are generated, the account of what was tried is written by hand, next to the runs
    it cites)."""
    baseline, candidate = by_task(baseline_json), by_task(candidate_json)
    recipe, shipped = about.recipe, about.shipped
    notes = sorted(
        {note for results in (baseline, candidate) for result in results.values() for note in result["notes"]}
    )
    limits = sorted({json.dumps(result["limits"], sort_keys=True) for result in candidate.values()})
    baseline_role = "the previous default" if shipped else "the shipped default, which stayed"
    baseline_column = "previous default" if shipped else "shipped default"
    worktrees, start_worktree = about.worktree_lines()
    lines = [
        "# Training report: the shipped default checkpoint"
        if shipped
        else f"# Training report: a candidate that was not shipped ({recipe})",
        "",
        f"Generated by `{command}` from `{run_dir}`, `{baseline_json}` ({baseline_role}) and `{candidate_json}`.",
        "",
        "Shipping rule: a candidate replaces the default only when it is better on the instruction-steering "
        "figures it was trained for and no figure drops beyond its 95 % interval.",
        "",
        "Reproduce the checkpoint and this report:",
        "",
        "```bash",
        *worktrees,
        f"instemb-rag train --config {recipe}{_start_override(recipe, start_worktree)}        "
        "# add --resume after an interruption",
        f"bash scripts/dev_figures.sh {about.baseline_model_folder} {baseline_json}",
        f"bash scripts/dev_figures.sh {run_dir}/final {candidate_json}",
        f"{command}",
        *([f"instemb-rag export {run_dir}/final instemb_rag/default_checkpoint --max-length 512"] if shipped else []),
        "```",
        "",
        *run_section(run_dir, output, img_dir),
        f"## Dev figures: {baseline_column} vs this checkpoint",
        "",
        "Every figure is on groups no training record of either model read (held-out foci, claims and "
        "premises of the builders' split; SciFact claims read in training are left out). Brackets: "
        "bootstrap 95 % intervals over the evaluated items. Instruction wordings of the steering tasks "
        "are ones training never used.",
        "",
        *comparison_lines({baseline_column: baseline, "this checkpoint": candidate}),
        "",
        "## Goals (this checkpoint)",
        "",
        *goal_lines(candidate),
        "",
        "Limits: " + "; ".join(f"`{limit}`" for limit in limits) + ".",
        "",
        *tried_section(about.tried),
    ]
    return write_report(output, lines, notes)


def tried_section(tried: Path | None) -> list[str]:
    """The hand-written account of what was tried for the missed goals, with where it comes from."""
    if tried is None:
        return []
    return [
        "## Missed goals: what was tried",
        "",
        f"From `{tried}`.",
        "",
        tried.read_text(encoding="utf-8").strip(),
        "",
    ]


# The options' defaults, named once: the regenerating command leaves out exactly these values.
DEFAULT_RECIPE = "instemb_rag/training/recipes/instruction-steering.yaml"
DEFAULT_OUTPUT = Path("docs/training_report.md")
DEFAULT_IMG_DIR = Path("docs/img")


def _non_default_options(about: Candidate, output: Path, img_dir: Path) -> str:
    """The options that must appear in the report's own command for it to regenerate the same file."""
    options = [
        ("--recipe", about.recipe, DEFAULT_RECIPE),
        ("--baseline-commit", about.baseline_commit, None),
        ("--start-commit", about.start_commit, None),
        ("--tried", str(about.tried) if about.tried else None, None),
        ("--output", str(output), str(DEFAULT_OUTPUT)),
        ("--img-dir", str(img_dir), str(DEFAULT_IMG_DIR)),
    ]
    text = "".join(f" {flag} {value}" for flag, value, default in options if value is not None and value != default)
    return text + ("" if about.shipped else " --not-shipped")


def main(
    run: Path = typer.Option(Path("runs/default"), help="The training run folder (metrics.jsonl, loss_curve.png)."),
    results: Path = typer.Option(Path("docs/ablations.json"), help="Results JSON of the ablation script."),
    baseline: Path | None = typer.Option(
        None,
        help="`instemb-rag eval` JSON of the current default; with --candidate, writes the candidate report instead.",
    ),
    candidate: Path | None = typer.Option(None, help="`instemb-rag eval` JSON of the run's final model folder."),
    recipe: str = typer.Option(DEFAULT_RECIPE, help="Recipe of the run."),
    baseline_commit: str | None = typer.Option(
        None,
        help="Git commit whose instemb_rag/default_checkpoint is "
        "the previous default (named in the reproduce commands).",
    ),
    start_commit: str | None = typer.Option(
        None,
        help="Git commit whose instemb_rag/default_checkpoint the run trained on from, where that is not "
        "the previous default (--baseline-commit).",
    ),
    output: Path = typer.Option(DEFAULT_OUTPUT),
    img_dir: Path = typer.Option(DEFAULT_IMG_DIR),
    shipped: bool = typer.Option(
        True,
        "--shipped/--not-shipped",
        help="Whether the candidate became the default (--not-shipped: a report of a candidate that stayed one).",
    ),
    tried: Path | None = typer.Option(
        None,
        exists=True,
        dir_okay=False,
        help="Markdown of what was tried for the goals still missed, quoted under the goals.",
    ),
) -> None:
    """Write the training report of a run."""
    if baseline is not None and candidate is not None:
        about = Candidate(recipe, baseline_commit, start_commit, shipped, tried)
        command = (
            f"python -m tools.reports.training_report --run {run} --baseline {baseline} "
            f"--candidate {candidate}" + _non_default_options(about, output, img_dir)
        )
        written = write_candidate_report(run, baseline, candidate, output, img_dir, command, about)
        typer.echo(f"wrote {written}")
        return
    command = f"python -m tools.reports.training_report --run {run} --results {results}"
    typer.echo(f"wrote {write_training_report(run, results, output, img_dir, command)}")


if __name__ == "__main__":
    typer.run(main)
