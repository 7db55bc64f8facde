from rich.console import Console

from instemb_rag.eval.report import results_table


def _result(label, task, metrics, main, cached):
    return {
        "encoder": {"label": label},
        "task": task,
        "metrics": metrics,
        "main_metric": main,
        "counts": {"queries": 65, "documents": 300},
        "corpus_from_cache": cached,
        "seconds": 12.5,
    }


def test_every_metric_name_and_value_is_readable_in_80_columns():
    stance = {"pairwise_accuracy_contradict": 0.25, "p-mrr": -0.0123, "mrr_matching": 0.5298}
    results = [
        _result("untrained (input_last)", "scifact-stance", stance, "p-mrr", True),
        _result("daap, L=8", "scifact", {"ndcg@10": 0.3763, "recall@100": 0.9}, "ndcg@10", False),
    ]
    console = Console(width=80, record=True)
    console.print(results_table(results))
    lines = console.export_text().splitlines()
    text = "\n".join(lines)
    for name, value in [*stance.items(), ("ndcg@10", 0.3763), ("recall@100", 0.9)]:
        assert any(name in line and f"{value:.4f}" in line for line in lines), name
    # The main metric comes first for its task, then the rest in their stored order.
    assert text.index("p-mrr") < text.index("pairwise_accuracy_contradict") < text.index("mrr_matching")
    assert "300*" in text and "25 s in all" in " ".join(text.split())
