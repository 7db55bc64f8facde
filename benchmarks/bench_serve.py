"""`instemb-rag serve` under load on loopback: latency and requests/s, with and without batching.

    python benchmarks/bench_serve.py [--quick] [--json-out out.json] [--model DIR] [--clients 1 4 16]

Two real server processes on ephemeral loopback ports, one with dynamic batching (its
defaults: 32 inputs, 5 ms window) and one with --no-batching. At 1, 4 and 16 concurrent
clients (threads, one keep-alive connection each) POST /v1/embeddings requests of one query +
instruction each, a fixed number per level (bounded: --requests plus 4 per client), the two
modes taking turns (--rounds) so that load from other processes hits both alike. Figures:
p50 / p99 latency per request, requests/s over the wall time, and the mean batch size the
server ran (from /health). The load average is recorded: on a shared machine absolute
figures move with it.

``--smoke`` runs both servers on the tiny random model of tests/testing.py, at 1 and 2 clients with
a few requests and one round each, in seconds: the figures mean nothing.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_common import base_parser, emit, machine_info, percentile, smoke_run

QUERIES = [
    "Which tent should I buy for a week in the mountains?",
    "Is this stove good for melting snow at altitude?",
    "How heavy is the backpack when it is fully packed?",
    "Does the tent stay dry in heavy rain?",
    "What is the best sleeping setup for cold nights?",
    "Which backpack carries best on long trips?",
]
INSTRUCTIONS = [
    "focus on durability and weather resistance",
    "focus on packed weight and size",
    "focus on price and value for money",
    "focus on ease of set-up for one person",
    None,
]
MODES = {"batching": [], "no_batching": ["--no-batching"]}


def run_level(url: str, clients: int, requests: int) -> tuple[list[float], float]:
    """`requests` requests spread over `clients` threads: (latencies in s, wall time in s)."""
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    counter = iter(range(requests))
    barrier = threading.Barrier(clients + 1)

    def client(worker: int) -> None:
        with httpx.Client(base_url=url, timeout=600) as session:
            session.get("/health")  # open the connection before the clock starts
            barrier.wait()
            while True:
                with lock:
                    number = next(counter, None)
                if number is None:
                    return
                body = {
                    "input": [QUERIES[number % len(QUERIES)]],
                    "instruction": INSTRUCTIONS[(number + worker) % len(INSTRUCTIONS)],
                    "input_type": "query",
                }
                started = time.perf_counter()
                response = session.post("/v1/embeddings", json=body)
                elapsed = time.perf_counter() - started
                with lock:
                    if response.status_code == 200:
                        latencies.append(elapsed)
                    else:
                        errors.append(f"{response.status_code}: {response.text[:200]}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, e.g. {errors[0]}")
    return latencies, wall


def batching_counters(url: str) -> tuple[int, int]:
    import httpx

    stats = httpx.get(url + "/health").json()["batching"]
    return stats["forward_batches"], stats["inputs_embedded"]


def measure(
    model: str | None,
    device: str,
    clients: list[int],
    requests: int,
    rounds: int,
    workdir: Path,
    threads: int | None = None,
) -> dict:
    """Both servers up at once (an idle one costs no CPU); at each level the modes take turns,
    `rounds` times, so that load from other processes hits both alike."""
    import contextlib

    import httpx

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test helpers: not in the package
    from testing import start_server

    results: dict = {mode: {"levels": {}} for mode in MODES}
    with contextlib.ExitStack() as stack:
        servers = {}
        for mode, extra in MODES.items():
            args = (
                ["--device", device, "--log-level", "warning", *extra]
                + (["--model", model] if model else [])
                + (["--threads", str(threads)] if threads else [])
            )
            servers[mode] = stack.enter_context(start_server(args, workdir / f"{mode}.log", startup_timeout=1800))
            results[mode]["server_args"] = args
            for _ in range(3):  # warm-up: first forward passes, allocator
                httpx.post(
                    servers[mode].url + "/v1/embeddings",
                    timeout=600,
                    json={"input": [QUERIES[0]], "instruction": INSTRUCTIONS[0]},
                ).raise_for_status()
        for count in clients:
            per_round = max(count, (requests + 4 * count) // rounds)
            samples = {mode: ([], 0.0, 0, 0) for mode in MODES}
            for _ in range(rounds):
                for mode, server in servers.items():
                    batches, inputs = batching_counters(server.url)
                    latencies, wall = run_level(server.url, count, per_round)
                    after_batches, after_inputs = batching_counters(server.url)
                    old = samples[mode]
                    samples[mode] = (
                        old[0] + latencies,
                        old[1] + wall,
                        old[2] + after_batches - batches,
                        old[3] + after_inputs - inputs,
                    )
            for mode, (latencies, wall, batches, inputs) in samples.items():
                level = {
                    "clients": count,
                    "requests": len(latencies),
                    "p50_ms": statistics.median(latencies) * 1000,
                    "p99_ms": percentile(latencies, 99) * 1000,
                    "requests_per_s": len(latencies) / wall,
                    "mean_batch": inputs / max(batches, 1),
                    "load_average_after": round(os.getloadavg()[0], 2),
                }
                results[mode]["levels"][str(count)] = level
                print(
                    f"{mode:12s} clients={count:3d}  p50 {level['p50_ms']:8.1f} ms  p99 {level['p99_ms']:8.1f} ms  "
                    f"{level['requests_per_s']:6.2f} req/s  mean batch {level['mean_batch']:.1f}",
                    file=sys.stderr,
                )
        for mode, server in servers.items():
            health = httpx.get(server.url + "/health").json()
            results[mode]["model"], results[mode]["batching"] = health["model"], health["batching"]
    return results


def main(argv: list[str] | None = None) -> dict:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="encoder folder; default: the shipped default model")
    parser.add_argument(
        "--clients", type=int, nargs="*", default=None, help="client counts (default 1 4 16, smoke 1 2)"
    )
    parser.add_argument(
        "--requests", type=int, default=None, help="requests per level before the 4-per-client extra (default 96)"
    )
    parser.add_argument("--rounds", type=int, default=None, help="turns each mode takes at each level (default 2)")
    args = parser.parse_args(argv)
    clients = args.clients or ([1, 2] if args.smoke else [1, 4, 16])
    requests = args.requests or (2 if args.smoke else 16 if args.quick else 96)
    rounds = args.rounds or (1 if args.smoke else 2)
    device = "cpu" if args.device == "auto" else args.device
    load_before = os.getloadavg()[0]
    with smoke_run(args), tempfile.TemporaryDirectory() as folder:
        modes = measure(args.model, device, clients, requests, max(rounds, 1), Path(folder), args.threads)
    result = {
        "benchmark": "serve",
        "machine": machine_info(device),
        "quick": args.quick,
        "smoke": args.smoke,
        "request": "POST /v1/embeddings, one query + instruction per request, loopback",
        "load_average_before": round(load_before, 2),
        "cores": os.cpu_count(),
        "server_threads": args.threads or "torch default",
        "modes": modes,
    }
    return emit(result, args.json_out)


if __name__ == "__main__":
    main()
