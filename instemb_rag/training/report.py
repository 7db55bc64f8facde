"""The training report of a run: what was trained, how the loss went, and dev figures of the
untrained backbone against the trained checkpoint.

The figures come from the ablation results JSON (its "trained vs untrained" group), so one
evaluation pass serves both reports::

    python -m instemb_rag.eval.ablations ... --results-json docs/ablations.json
    python -m instemb_rag.training.report --run runs/default --results docs/ablations.json
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import typer

from ..jsonl import read_jsonl_objects

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
        lines.append(f"| {name} | " + " | ".join(
            f"{values[label]:.4f}" if values.get(label) is not None else "–" for label in labels) + " |")
        untrained = [value for label, value in values.items() if label != trained and value is not None]
        if trained in values and untrained and kind != "diagnostic":
            best = max(untrained)
            beats = values[trained] > best
            verdicts.append(f"- {name} ({kind} figure): trained {values[trained]:.4f} vs best untrained {best:.4f}: "
                            + ("**better**" if beats else "**not better**"))
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
                notes.append(f"- {label} scores the '{preferred}' instruction higher on {right:.0%} of the "
                             f"{preferred.upper()} records and on {1 - wrong:.0%} of the others: it does not tell "
                             "the stance instructions apart, so its stance pairwise accuracy is the share of "
                             f"{preferred.upper()} records and its p-MRR moves with rank noise.")
    return notes


def run_summary(run_dir: Path) -> list[str]:
    config = json.loads((run_dir / "train_config.json").read_text())
    info = json.loads((run_dir / "run_info.json").read_text()) if (run_dir / "run_info.json").is_file() else {}
    metrics = read_jsonl_objects(run_dir / "metrics.jsonl")
    t, m = config["training"], config["model"]
    first, last = metrics[0], metrics[-1]
    window = metrics[-10:]
    mean_last = {key: sum(row[key] for row in window) / len(window) for key in ("loss", "distill", "contrastive")
                 if key in last}
    final = run_dir / "final"
    size = sum(path.stat().st_size for path in final.rglob("*") if path.is_file()) if final.is_dir() else 0
    return [
        f"- Records: {info.get('records', '?')} training records built from `{', '.join(config['data']['build_sets'])}` "
        f"(held-out slice {config['data']['heldout_fraction']:.0%} by group).",
        f"- Steps: {last['step']} optimizer steps of {t['batch_size'] * t['gradient_accumulation_steps']} examples; "
        f"L = {m['lookahead_length']}, LoRA rank {m['lora_rank']} on the top {m['trainable_top_layers']} layers"
        f"{' + final norm' if m['train_final_norm'] else ''}; distillation {t['distill_loss']}, views {', '.join(t['views'])}, "
        f"tau = {t['temperature']}.",
        f"- Time: {last['elapsed_s'] / 60:.1f} min of training on {info.get('device', '?')}"
        + (f", plus {info['teacher_cache']['seconds'] / 60:.1f} min computing teacher targets "
           f"({info['teacher_cache']['computed_records']} records)" if info.get("teacher_cache") else "") + ".",
        f"- Loss: {first['loss']:.4f} at step {first['step']} -> mean of the last {len(window)} steps "
        + ", ".join(f"{key} {value:.4f}" for key, value in mean_last.items()) + ".",
        f"- Checkpoint: {size / 1e6:.1f} MB (look-ahead vectors, final norm and LoRA weights; the base is not copied).",
    ]


def write_training_report(run_dir: Path, results_json: Path, output: Path, img_dir: Path, command: str) -> Path:
    results = json.loads(results_json.read_text())["results"]
    rows = headline_rows(results)
    if not rows:
        raise typer.BadParameter(f"{results_json} has no '{HEADLINE_GROUP}' results; run the ablation script first.")
    img_dir.mkdir(parents=True, exist_ok=True)
    curve = img_dir / "training_loss_curve.png"
    shutil.copyfile(run_dir / "loss_curve.png", curve)
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
        "python -m instemb_rag.eval.ablations --results-json docs/ablations.json ...  # full command: top of docs/ablations.md",
        "python -m instemb_rag.training.report --run runs/default --results docs/ablations.json",
        "```",
        "",
        "## Run",
        "",
        *run_summary(run_dir),
        "",
        f"![loss curve]({curve.relative_to(output.parent).as_posix() if curve.is_relative_to(output.parent) else curve})",
        "",
        "## Dev figures: untrained backbone vs trained default",
        "",
        f"Limits: {limits}. Every encoder is scored on the same queries and documents.",
        "",
        *table,
        "",
        *verdicts,
        "",
        "Notes from the evaluation:",
        "",
        *[f"- {note}" for note in notes],
        "",
    ]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(lines))
    return output


def main(
    run: Path = typer.Option(Path("runs/default"), help="The training run folder (metrics.jsonl, loss_curve.png)."),
    results: Path = typer.Option(Path("docs/ablations.json"), help="Results JSON of the ablation script."),
    output: Path = typer.Option(Path("docs/training_report.md")),
    img_dir: Path = typer.Option(Path("docs/img")),
) -> None:
    """Write the training report of a run."""
    command = f"python -m instemb_rag.training.report --run {run} --results {results}"
    typer.echo(f"wrote {write_training_report(run, results, output, img_dir, command)}")


if __name__ == "__main__":
    typer.run(main)
