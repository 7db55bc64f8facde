"""Which embedded Qdrant engine should `--store qdrant` use without a server?

Compares qdrant-client's local mode (pure Python, on disk) with qdrant-edge-py (the Qdrant
engine in-process) on random unit vectors with a keyword payload filter, as in the issue.

    python benchmarks/bench_qdrant_embedded.py --points 10000 --dim 576 --queries 50 [--json-out PATH]
    python benchmarks/bench_qdrant_embedded.py --smoke     # seconds: 200 points, 16-d, 5 queries

Stand-alone (not in run.py's table): it prints a line per engine and returns (and with
--json-out writes) load seconds and query p50 / p95 per engine.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

SOURCES = 20  # payload values: each filtered query keeps ~1/20 of the points


def make_data(points: int, dim: int, queries: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((points, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    probes = rng.standard_normal((queries, dim)).astype(np.float32)
    probes /= np.linalg.norm(probes, axis=1, keepdims=True)
    sources = [f"docs/file{i % SOURCES}.md" for i in range(points)]
    return vectors, probes, sources


def percentiles(samples_ms: list[float]) -> dict:
    return {"p50_ms": float(np.percentile(samples_ms, 50)), "p95_ms": float(np.percentile(samples_ms, 95))}


def bench_client_local(folder: Path, vectors, probes, sources) -> tuple[float, list[float]]:
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(folder))
    client.create_collection(
        "bench", vectors_config=models.VectorParams(size=vectors.shape[1], distance=models.Distance.DOT)
    )
    started = time.perf_counter()
    for start in range(0, len(vectors), 1000):
        client.upsert(
            "bench",
            points=[
                models.PointStruct(id=i, vector=vectors[i].tolist(), payload={"source": sources[i]})
                for i in range(start, min(start + 1000, len(vectors)))
            ],
        )
    load_s = time.perf_counter() - started
    latencies = []
    for number, probe in enumerate(probes):
        condition = models.FieldCondition(key="source", match=models.MatchValue(value=sources[number]))
        started = time.perf_counter()
        client.query_points("bench", query=probe.tolist(), limit=10, query_filter=models.Filter(must=[condition]))
        latencies.append((time.perf_counter() - started) * 1000)
    client.close()
    return load_s, latencies


def bench_edge(folder: Path, vectors, probes, sources) -> tuple[float, list[float]]:
    import qdrant_edge as edge

    config = edge.EdgeConfig(vectors=edge.EdgeVectorParams(size=vectors.shape[1], distance=edge.Distance.Dot))
    shard = edge.EdgeShard.create(str(folder), config)
    shard.update(edge.UpdateOperation.create_field_index("source", edge.PayloadSchemaType.Keyword))
    started = time.perf_counter()
    for start in range(0, len(vectors), 1000):
        points = [
            edge.Point(id=i, vector=vectors[i].tolist(), payload={"source": sources[i]})
            for i in range(start, min(start + 1000, len(vectors)))
        ]
        shard.update(edge.UpdateOperation.upsert_points(points))
    shard.optimize()  # builds the HNSW graph, as a finished index run would
    load_s = time.perf_counter() - started
    latencies = []
    for number, probe in enumerate(probes):
        condition = edge.FieldCondition(key="source", match=edge.MatchValue(sources[number]))
        request = edge.QueryRequest(
            limit=10,
            query=edge.Query.Nearest(probe.tolist()),
            filter=edge.Filter(must=[condition]),
            with_payload=True,
        )
        started = time.perf_counter()
        shard.query(request)
        latencies.append((time.perf_counter() - started) * 1000)
    shard.close()
    return load_s, latencies


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=None, help="default 10,000 (smoke 200)")
    parser.add_argument("--dim", type=int, default=None, help="default 576 (smoke 16)")
    parser.add_argument("--queries", type=int, default=None, help="default 50 (smoke 5)")
    parser.add_argument("--smoke", action="store_true", help="a few points and queries, in seconds")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    points = args.points or (200 if args.smoke else 10_000)
    dim = args.dim or (16 if args.smoke else 576)
    queries = args.queries or (5 if args.smoke else 50)
    vectors, probes, sources = make_data(points, dim, queries)
    print(f"{points} random unit vectors, {dim}-d, {queries} filtered top-10 queries")
    result: dict = {"benchmark": "qdrant_embedded", "points": points, "dim": dim, "queries": queries, "engines": {}}
    for name, runner in (("qdrant-edge-py", bench_edge), ("qdrant-client local", bench_client_local)):
        with tempfile.TemporaryDirectory() as scratch:
            load_s, latencies = runner(Path(scratch) / "store", vectors, probes, sources)
        figures = result["engines"][name] = {"load_s": load_s, **percentiles(latencies)}
        print(
            f"{name:20s} load {load_s:6.2f} s  query p50 {figures['p50_ms']:7.2f} ms  p95 {figures['p95_ms']:7.2f} ms"
        )
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
