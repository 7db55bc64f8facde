"""Tooling, not runtime: nothing under instemb_rag/ outside this folder imports it.

    reports/    the ablation report (docs/ablations.md + plots), the paper's findings checked
                against it, and the training report (docs/training_report.md); they draw
                with matplotlib (``pip install "instemb-rag[reports]"``)
    baselines/  generate-then-embed, the approach InstEmb replaces, run by the benchmarks

Each report is a script: ``python -m instemb_rag.tools.reports.ablations --help``.
"""
