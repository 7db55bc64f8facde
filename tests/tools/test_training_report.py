"""The training report: figures table and the trained-vs-untrained verdicts."""

from __future__ import annotations

import json

from tools.reports.training_report import (
    HEADLINE_GROUP,
    figures_table,
    headline_rows,
    write_training_report,
)


def result(label: str, task: str, metrics: dict) -> dict:
    return {
        "group": HEADLINE_GROUP,
        "task": task,
        "metrics": metrics,
        "encoder": {"label": label},
        "limits": {"max_queries": 5},
        "notes": [f"note on {task}"],
    }


RESULTS = [
    result("untrained (input_last)", "scifact-stance", {"p-mrr": -0.02, "pairwise_accuracy": 0.5}),
    result("untrained (daap, L=8)", "scifact-stance", {"p-mrr": 0.01, "pairwise_accuracy": 0.55}),
    result("trained (daap, L=8)", "scifact-stance", {"p-mrr": 0.08, "pairwise_accuracy": 0.52}),
    result("untrained (input_last)", "stsb", {"spearman": 0.40}),
    result("untrained (daap, L=8)", "stsb", {"spearman": 0.45}),
    result("trained (daap, L=8)", "stsb", {"spearman": 0.60}),
    {**result("other", "stsb", {"spearman": 0.9}), "group": "pooling"},  # not part of the headline
]


def test_verdicts_compare_the_trained_row_with_the_best_untrained_row():
    rows = headline_rows(RESULTS)
    assert list(rows) == ["untrained (input_last)", "untrained (daap, L=8)", "trained (daap, L=8)"]
    table, verdicts = figures_table(rows)
    assert table[2] == "| SciFact stance p-MRR | -0.0200 | 0.0100 | 0.0800 |"
    assert (
        "SciFact stance p-MRR (instruction figure): trained 0.0800 vs best untrained 0.0100: **better**" in verdicts[0]
    )
    assert (
        "pairwise accuracy (instruction figure): trained 0.5200 vs best untrained 0.5500: **not better**" in verdicts[1]
    )
    assert "STS-B test Spearman (generic figure)" in verdicts[2] and "**better**" in verdicts[2]
    assert not any("Vaswani" in line for line in table)  # absent tasks are left out, not invented


def test_report_file_has_run_summary_curve_and_figures(tmp_path):
    run = tmp_path / "run"
    (run / "final").mkdir(parents=True)
    (run / "final" / "lookahead.safetensors").write_bytes(b"x" * 2000)
    (run / "loss_curve.png").write_bytes(b"png")
    config = {
        "model": {"lookahead_length": 8, "lora_rank": 16, "trainable_top_layers": 6, "train_final_norm": True},
        "data": {"build_sets": ["msmarco_qa"], "heldout_fraction": 0.1},
        "training": {
            "batch_size": 8,
            "gradient_accumulation_steps": 1,
            "distill_loss": "mse",
            "views": ["student_input", "teacher_input"],
            "temperature": 0.1,
        },
    }
    (run / "train_config.json").write_text(json.dumps(config))
    (run / "run_info.json").write_text(json.dumps({"records": 40, "device": "cpu"}))
    rows = [
        {
            "step": step,
            "loss": 3.0 - step / 10,
            "distill": 1.0,
            "contrastive": 2.0 - step / 10,
            "elapsed_s": 12.0 * step,
        }
        for step in range(1, 6)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    results = tmp_path / "ablations.json"
    results.write_text(json.dumps({"format_version": 1, "results": RESULTS}))
    report = write_training_report(run, results, tmp_path / "docs" / "report.md", tmp_path / "docs" / "img", "cmd")
    text = report.read_text()
    assert "5 optimizer steps of 8 examples" in text and "LoRA rank 16 on the top 6 layers + final norm" in text
    assert "![loss curve](img/loss_curve_run.png)" in text  # named after the run folder
    assert (tmp_path / "docs" / "img" / "loss_curve_run.png").read_bytes() == b"png"
    assert "| STS-B test Spearman | 0.4000 | 0.4500 | 0.6000 |" in text
    assert "- note on stsb" in text


def test_a_stance_wording_bias_is_called_out():
    biased = {
        "p-mrr": 0.05,
        "pairwise_accuracy": 0.63,
        "pairwise_accuracy_support": 1.0,
        "pairwise_accuracy_contradict": 0.0,
    }
    following = {
        "p-mrr": 0.2,
        "pairwise_accuracy": 0.8,
        "pairwise_accuracy_support": 0.8,
        "pairwise_accuracy_contradict": 0.75,
    }
    rows = headline_rows(
        [
            result("untrained (input_last)", "scifact-stance", biased),
            result("trained (daap, L=8)", "scifact-stance", following),
        ]
    )
    table, verdicts = figures_table(rows)
    assert "|   of which SUPPORT records | 1.0000 | 0.8000 |" in table
    bias_lines = [line for line in verdicts if "does not tell the stance instructions apart" in line]
    assert len(bias_lines) == 1 and bias_lines[0].startswith("- untrained (input_last) scores the 'support'")
    assert not any("of which" in line for line in verdicts)  # diagnostic rows get no verdict


def test_candidate_report_lines_show_intervals_and_goal_shortfalls():
    from tools.reports.training_report import comparison_lines, goal_lines

    steering = {
        "task": "medquad-facets",
        "metrics": {"steering_accuracy": 0.43, "pairwise_accuracy": 0.85},
        "intervals": {"steering_accuracy": [0.38, 0.48]},
        "notes": [],
        "limits": {},
    }
    table = "\n".join(comparison_lines({"previous": {}, "candidate": {"medquad-facets": steering}}))
    assert "| medquad-facets | steering_accuracy | – | 0.430 [0.380, 0.480] |" in table
    goals = goal_lines({"medquad-facets": steering})
    assert goals[0].endswith("**not met** (short by 0.370)") and goals[1].endswith("**met**")


def test_a_candidate_that_was_not_shipped_says_so_and_its_command_regenerates_the_same_file(tmp_path, monkeypatch):
    """The report's own command must name every non-default option (recipe, output, --not-shipped),
    or running it again writes a different file; a candidate left unshipped gets no export line."""
    import typer
    from typer.testing import CliRunner

    from tools.reports.training_report import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0, "elapsed_s": 1.0}\n')
    from instemb_rag.training.args import load_config

    (run / "loss_curve.png").write_bytes(b"\x89PNG")  # copied next to the report, not read
    (run / "train_config.json").write_text(json.dumps(load_config("instemb_rag/training/recipes/tiny.yaml").to_dict()))
    steering = {
        "task": "medquad-facets",
        "metrics": {"steering_accuracy": 0.43},
        "intervals": {},
        "notes": [],
        "limits": {},
    }
    for name in ("base.json", "cand.json"):
        (tmp_path / name).write_text(json.dumps({"results": [steering]}))
    output = tmp_path / "report.md"
    app = typer.Typer()
    app.command()(main)
    args = [
        "--run",
        str(run),
        "--baseline",
        str(tmp_path / "base.json"),
        "--candidate",
        str(tmp_path / "cand.json"),
        "--recipe",
        "r.yaml",
        "--output",
        str(output),
        "--img-dir",
        str(tmp_path / "img"),
        "--not-shipped",
        "--tried",
        str(tmp_path / "tried.md"),
    ]
    assert CliRunner().invoke(app, args).exit_code != 0  # the account of what was tried is missing
    (tmp_path / "tried.md").write_text("- stance-long: 300 steps, stance at chance\n")
    assert CliRunner().invoke(app, args).exit_code == 0
    text = output.read_text()
    assert text.startswith("# Training report: a candidate that was not shipped (r.yaml)")
    assert "## Missed goals: what was tried" in text and "- stance-long: 300 steps, stance at chance" in text
    assert "instemb-rag export" not in text
    assert "## Dev figures: shipped default vs this checkpoint" in text  # the baseline stayed the default
    command = text.split("Generated by `", 1)[1].split("`", 1)[0]
    assert all(arg in command for arg in args)


def test_reproduce_command_trains_from_the_previous_default_not_the_exported_one():
    """A recipe that starts from instemb_rag/default_checkpoint would, after the export, start from
    the candidate itself; with a baseline commit the command names that commit's default."""
    from tools.reports.training_report import Candidate, _start_override

    on_from_default = "instemb_rag/training/recipes/stance-long.yaml"
    lines, start = Candidate(on_from_default, baseline_commit="abc1234").worktree_lines()
    assert lines == ["git worktree add /tmp/previous-default abc1234   # the default it is compared with"]
    assert _start_override(on_from_default, start) == (
        " --set model_name_or_path=/tmp/previous-default/instemb_rag/default_checkpoint"
    )
    assert Candidate(on_from_default).worktree_lines() == ([], None)
    assert _start_override(on_from_default, None) == ""
    assert _start_override("instemb_rag/training/recipes/tiny.yaml", start) == ""


def test_reproduce_command_names_the_start_commit_when_the_run_did_not_start_from_the_baseline():
    """A candidate compared with the current default but trained on from an older one: both
    worktrees are named, and training starts from the older commit's default."""
    from tools.reports.training_report import Candidate, _start_override

    recipe = "instemb_rag/training/recipes/stance-long.yaml"
    lines, start = Candidate(recipe, baseline_commit="abc1234", start_commit="def5678").worktree_lines()
    assert lines[1] == "git worktree add /tmp/start-checkpoint def5678   # the default the run trains on from"
    assert _start_override(recipe, start) == (
        " --set model_name_or_path=/tmp/start-checkpoint/instemb_rag/default_checkpoint"
    )
    assert Candidate(recipe, start_commit="def5678").worktree_lines() == (
        ["git worktree add /tmp/start-checkpoint def5678   # the default the run trains on from"],
        "/tmp/start-checkpoint",
    )
    assert Candidate(recipe, "abc1234", "abc1234").worktree_lines()[1] == "/tmp/previous-default"


def test_teacher_time_sums_sessions_and_says_when_no_teacher_pass_ran():
    from tools.reports.training_report import _teacher_time

    computed = {"seconds": 120.0, "computed_records": 40}
    resumed = {"teacher_cache": {"seconds": 60.0, "computed_records": 10}, "sessions": [{"teacher_cache": computed}]}
    assert _teacher_time(resumed) == ", plus 3.0 min computing teacher targets (50 records)"
    skipped = {"teacher_cache": {"skipped": "no loss term reads the teacher"}}
    assert _teacher_time(skipped) == "; no teacher pass (no loss term reads the teacher)"
    assert _teacher_time({}) == ""


def test_run_summary_names_only_the_loss_terms_that_trained():
    from tools.reports.training_report import _loss_terms

    base = {"distill_loss": "mse", "views": ["student_input"], "temperature": 0.1, "retrieval_temperature": 0.05}
    retrieval_only = {**base, "distill_weight": 0.0, "contrastive_weight": 0.0, "retrieval_weight": 1.0}
    assert _loss_terms(retrieval_only) == "pooled retrieval loss weight 1.0 (tau 0.05)"
    paper = {**base, "distill_weight": 1.0, "contrastive_weight": 0.5, "retrieval_weight": 0.0}
    assert _loss_terms(paper) == "distillation mse; contrastive views student_input, tau = 0.1"
    anchored = {**retrieval_only, "distill_weight": 1.0, "distill_sets": ["msmarco_passages"]}
    assert _loss_terms(anchored) == (
        "distillation mse of the msmarco_passages records only; pooled retrieval loss weight 1.0 (tau 0.05)"
    )
