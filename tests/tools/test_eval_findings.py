"""The paper-finding verdicts on constructed ablation results."""

from __future__ import annotations

from tools.reports.findings import (
    FAILS,
    HOLDS,
    MIXED,
    UNMEASURED,
    content_word_targets_help,
    daap_best_pooling,
    dropout_view_matters_most,
    findings_markdown,
    lookahead_presence_matters,
    mse_instruction_kl_generic,
    special_tokens_worst_on_instructions,
    trained_beats_untrained,
)

KINDS = {
    "stance": ("paired-instruction", "p-mrr"),
    "facets": ("steering", "pairwise_accuracy"),
    "sts": ("sts", "spearman"),
    "ret": ("retrieval", "ndcg@10"),
}


def rows(group: str, table: dict[str, dict[str, float]]) -> list[dict]:
    return [
        {
            "group": group,
            "task": task,
            "kind": KINDS[task][0],
            "main_metric": KINDS[task][1],
            "encoder": {"label": label},
            "metrics": {KINDS[task][1]: value},
        }
        for label, scores in table.items()
        for task, value in scores.items()
    ]


def test_trained_vs_untrained_compares_against_the_best_untrained_row():
    table = {
        "untrained (input_last)": {"stance": 0.05, "ret": 0.30},
        "untrained (daap, L=8)": {"stance": 0.01, "ret": 0.40},
        "trained (daap, L=8)": {"stance": 0.10, "ret": 0.35},
    }
    finding = trained_beats_untrained(rows("trained vs untrained", table))
    assert finding.verdict == MIXED  # wins stance, loses retrieval to untrained DAAP
    assert "ret -0.050" in finding.evidence and "stance +0.050" in finding.evidence
    table["trained (daap, L=8)"]["ret"] = 0.5
    assert trained_beats_untrained(rows("trained vs untrained", table)).verdict == HOLDS


def test_pooling_checks():
    table = {
        "daap": {"stance": 0.10, "sts": 0.70},
        "input_last": {"stance": 0.105, "sts": 0.60},
        "all_mean": {"stance": 0.02, "sts": 0.65},
        "special_first": {"stance": -0.05, "sts": 0.5},
        "special_mean": {"stance": 0.0, "sts": 0.55},
    }
    results = rows("pooling", table)
    assert daap_best_pooling(results).verdict == HOLDS  # 0.005 behind on stance is a tie
    assert special_tokens_worst_on_instructions(results).verdict == HOLDS
    table["input_last"]["stance"] = 0.2
    table["special_first"]["stance"] = 0.3
    table["special_mean"]["stance"] = 0.3
    results = rows("pooling", table)
    assert daap_best_pooling(results).verdict == MIXED
    assert special_tokens_worst_on_instructions(results).verdict == FAILS


def test_lookahead_length_check():
    holds = {
        "L=0": {"ret": 0.2, "sts": 0.5},
        "L=1": {"ret": 0.3, "sts": 0.6},
        "L=4": {"ret": 0.31, "sts": 0.6},
        "L=8": {"ret": 0.32, "sts": 0.61},
    }
    assert lookahead_presence_matters(rows("look-ahead length", holds)).verdict == HOLDS
    flat = {"L=0": {"ret": 0.3}, "L=1": {"ret": 0.3}, "L=8": {"ret": 0.4}}
    finding = lookahead_presence_matters(rows("look-ahead length", flat))
    assert finding.verdict == FAILS and "1->8: +0.100" in finding.evidence


def test_loss_and_view_checks():
    loss = {"loss-mse": {"stance": 0.12, "sts": 0.60}, "loss-kl": {"stance": 0.08, "sts": 0.65}}
    views = {
        "views-no-student_input_dropout": {"stance": 0.05, "sts": 0.50},
        "views-no-teacher_input": {"stance": 0.10, "sts": 0.58},
        "views-no-student_output": {"stance": 0.12, "sts": 0.61},
    }
    results = rows("distillation loss (MSE vs KL)", loss) + rows("contrastive views", views)
    assert mse_instruction_kl_generic(results).verdict == HOLDS
    assert dropout_view_matters_most(results).verdict == HOLDS
    views["views-no-student_output"]["stance"] = -0.5  # another view now costs the most
    assert (
        dropout_view_matters_most(
            rows("distillation loss (MSE vs KL)", loss) + rows("contrastive views", views)
        ).verdict
        == MIXED
    )


def test_missing_groups_are_reported_as_not_measured():
    assert mse_instruction_kl_generic([]).verdict == UNMEASURED
    assert dropout_view_matters_most([]).verdict == UNMEASURED
    text = "\n".join(findings_markdown([]))
    assert text.count(f"**{UNMEASURED}**") == 7


def test_content_word_targets_are_judged_on_the_instruction_tasks_against_loss_mse():
    plain = {"loss-mse": {"stance": 0.05, "facets": 0.70, "sts": 0.60}}
    better = {"targets-content-words": {"stance": 0.08, "facets": 0.75, "sts": 0.40}}
    results = rows("distillation loss (MSE vs KL)", plain) + rows("distillation targets (content words)", better)
    finding = content_word_targets_help(results)
    assert finding.verdict == HOLDS  # the generic STS drop is reported, not judged
    assert "facets +0.050" in finding.evidence and "sts -0.200" in finding.evidence
    better["targets-content-words"]["facets"] = 0.705  # inside the tie margin
    mixed = content_word_targets_help(
        rows("distillation loss (MSE vs KL)", plain) + rows("distillation targets (content words)", better)
    )
    assert mixed.verdict == MIXED
    assert content_word_targets_help(rows("distillation loss (MSE vs KL)", plain)).verdict == UNMEASURED
