"""Research tooling beside the package, not in the wheel: instemb_rag/ never imports it.

    reports/      the ablation report (docs/ablations.md + plots), the paper's findings checked
                  against it, and the training report (docs/training_report.md); they draw
                  with matplotlib (``pip install "instemb-rag[reports]"``)
    diagnostics/  probes of a trained model (group fit, stance direction)
    baselines/    generate-then-embed, the approach InstEmb replaces, run by the benchmarks
                  (benchmarks/bench_common.py puts the checkout root on sys.path)

Each report is a script, run from the checkout root: ``python -m tools.reports.ablations --help``.
"""
