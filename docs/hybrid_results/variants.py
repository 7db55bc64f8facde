"""Every hybrid setting of docs/hybrid_report.md from one model load and one dense pass.

Equivalent to one `instemb-rag eval TASKS [--hybrid ...] -o NAME.json` per setting (the same
``evaluate`` and facet-groups harness, the same result files), but the encoder is loaded once and
each query embedding is computed once, which is what made the report affordable on a starved
2-core CPU::

    python docs/hybrid_results/variants.py OUT_DIR [--groups FILE ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from instemb_rag import InstEmbEncoder
from instemb_rag.datasets.facet_groups import DEV_GROUPS
from instemb_rag.eval import evaluate, write_results_json
from instemb_rag.eval.facet_groups import load_facet_groups
from instemb_rag.eval.facet_runs import hybrid_rankers, instemb_ranker, run_facet_groups
from instemb_rag.eval.hybrid import RERANK, HybridSettings

SETTINGS = {
    "rrf": HybridSettings("rrf", 0.5),
    "lexical_fts5": HybridSettings("rrf", 1.0),
    "z": HybridSettings("z", 0.5),
    "lexical_bm25s": HybridSettings("rrf", 1.0, engine="bm25s"),
    "rrf_words_none": HybridSettings("rrf", 0.5, instruction_words="none"),
    "rerank": HybridSettings(RERANK),
    "rrf_w03": HybridSettings("rrf", 0.3),
    "rrf_words_all": HybridSettings("rrf", 0.5, instruction_words="all"),
    "z_w03": HybridSettings("z", 0.3),
}
RETRIEVAL = {  # file prefix -> (tasks, max_queries, max_docs)
    "v": (["vaswani"], 30, 200),
    "s": (["scifact", "scifact-stance"], 20, 40),
}


class QueryMemo:
    """The encoder, with each (query, instruction) embedded once across all settings."""

    def __init__(self, encoder):
        self._encoder = encoder
        self._seen: dict[tuple, object] = {}

    def __getattr__(self, name):
        return getattr(self._encoder, name)

    def encode_queries(self, texts, instructions=None, **kwargs):
        import numpy as np

        if instructions is None or isinstance(instructions, str):
            instructions = [instructions] * len(texts)
        missing = [(t, i) for t, i in zip(texts, instructions) if (t, i) not in self._seen]
        if missing:
            vectors = self._encoder.encode_queries([t for t, _ in missing], [i for _, i in missing], **kwargs)
            self._seen.update(zip(missing, vectors))
        return np.stack([self._seen[(t, i)] for t, i in zip(texts, instructions)])


def log(message: str) -> None:
    print(message, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--groups", type=Path, action="append", default=[])
    parser.add_argument("--only", nargs="*", default=None, help="file prefixes / 'facets' to run")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    encoder = QueryMemo(InstEmbEncoder.from_pretrained(device="cpu"))
    wanted = set(args.only) if args.only else None
    for prefix, (tasks, queries, docs) in RETRIEVAL.items():
        if wanted and prefix not in wanted:
            continue
        for name, setting in [("dense", None), *SETTINGS.items()]:
            target = args.out / f"{prefix}_{name}.json"
            if target.is_file():
                continue
            results = [evaluate(encoder, t, max_queries=queries, max_docs=docs, hybrid=setting) for t in tasks]
            write_results_json(results, target)
            log(f"{target.name}: " + ", ".join(f"{r['task']} {r['metrics'][r['main_metric']]:.3f}" for r in results))
    if wanted and "facets" not in wanted:
        return
    for groups_path in [DEV_GROUPS, *args.groups]:
        stem = "facets_dev" if groups_path == DEV_GROUPS else groups_path.stem
        target = args.out / f"{stem}.json"
        if target.is_file():
            continue
        groups = load_facet_groups(groups_path)
        base = instemb_ranker(encoder, "instemb default")
        settings = [None, SETTINGS["rrf"], SETTINGS["lexical_fts5"], SETTINGS["z"], SETTINGS["rerank"]]
        settings += [SETTINGS["rrf_w03"], SETTINGS["lexical_bm25s"]]
        rankers = hybrid_rankers(base.identity, base.scores, settings)
        run = run_facet_groups(groups, rankers, groups_path)
        write_results_json(run.results, target, {"facet_groups": run.to_dict()})
        log(
            f"{target.name}: "
            + ", ".join(f"{r['encoder']['label']} {r['metrics']['first_in_group']:.3f}" for r in run.results)
        )


if __name__ == "__main__":
    sys.exit(main())
