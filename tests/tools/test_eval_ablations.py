"""The ablation script end to end on a tiny checkpoint and a tiny BEIR folder."""

from __future__ import annotations

import json
import re

from helpers import write_beir_folder

from tools.reports.ablations import AblationArgs, build_variants, run_ablations, write_report


def test_ablation_report_on_tiny_limits(tmp_path, tiny_encoder, monkeypatch):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    checkpoint = tmp_path / "ckpt"
    tiny_encoder.save(checkpoint)  # trained look-ahead length 4
    named = tmp_path / "named"
    tiny_encoder.save(named / "loss-mse")
    folder = write_beir_folder(tmp_path / "gear")
    args = AblationArgs(
        checkpoint=str(checkpoint),
        checkpoints_dir=named,
        tasks=[str(folder)],
        max_queries=2,
        max_docs=4,
        output=tmp_path / "docs" / "ablations.md",
        img_dir=tmp_path / "docs" / "img",
        results_json=tmp_path / "docs" / "ablations.json",
        device="cpu",
    )
    variants, notes = build_variants(args)
    groups = [variant.group for variant in variants]
    assert groups.count("pooling") == 5
    assert [v.label for v in variants if v.group == "look-ahead length"] == ["L=0", "L=1", "L=4"]
    assert any("L=8 skipped" in note for note in notes)
    assert any("contrastive views" in note and "skipped" in note for note in notes)
    assert "distillation loss (MSE vs KL)" in groups and groups.count("trained vs untrained") == 3

    results = run_ablations(args, variants, echo=lambda message: None)
    assert len(results) == len(variants)
    # Different poolings really produce different encoders (different fingerprints).
    assert len({r["encoder"]["fingerprint"] for r in results if r["group"] == "pooling"}) == 5
    report = write_report(results, notes, args, command="python -m tools.reports.ablations (test)")
    text = report.read_text()
    assert "## Which of the paper's findings hold at this scale" in text
    assert "## pooling" in text and "| daap |" in text and "## look-ahead length" in text
    # every cell carries its bootstrap interval
    assert re.search(r"\| daap \| -?[0-9.]+ \[-?[0-9.]+, -?[0-9.]+\] \|", text), text
    assert "![pooling](img/ablation_pooling.png)" in text
    assert (tmp_path / "docs" / "img" / "ablation_pooling.png").stat().st_size > 1000
    assert len(json.loads(args.results_json.read_text())["results"]) == len(results)


def test_per_task_limits_override_the_run_limits():
    import pytest
    import typer

    from tools.reports.ablations import parse_task_limit

    args = AblationArgs(
        max_queries=50,
        max_docs=300,
        sts_pairs=400,
        task_limits=dict(parse_task_limit(item) for item in ["vaswani=25:400", "scifact=0:0"]),
    )
    assert args.limits_for("vaswani") == (25, 400)
    assert args.limits_for("scifact") == (None, None)  # 0 means all
    assert args.limits_for("stsb") == (400, None)  # STS counts pairs, has no corpus
    assert args.limits_for("scifact-stance") == (50, 300)
    with pytest.raises(typer.BadParameter, match="TASK=QUERIES"):
        parse_task_limit("vaswani=many")
