"""InstEmb (one prefill) vs generate-then-embed (greedy 32-token answer, then embed it).

    python benchmarks/bench_generate_baseline.py [--quick] [--json-out out.json]
    python benchmarks/bench_generate_baseline.py --smoke   # seconds: tiny random model, 4 new tokens

Both use the same decoder and tokenizer; latency of one (text, instruction), timed in
alternation. The ratio baseline / InstEmb is the latency the look-ahead tokens save.
"""

from __future__ import annotations

from bench_common import (
    apply_threads,
    base_parser,
    benchmarked_llm_folder,
    emit,
    interleaved_times,
    machine_info,
    median,
    smoke_run,
)

TEXT = (
    "The two-person tent weighs 1.9 kg and packs to 45 by 15 cm. Its aluminium poles held up in "
    "strong wind, and the nylon floor stayed dry in heavy rain; the door zipper snagged twice."
)
INSTRUCTION = "How durable is the tent in bad weather?"


def main(argv: list[str] | None = None) -> dict:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default=None, help="default: the shipped LLM (of a two-space folder: its documents' LLM)"
    )
    parser.add_argument("--new-tokens", type=int, default=None, help="greedy answer tokens (default 32, smoke 4)")
    parser.add_argument("--batch", type=int, default=1, help="(text, instruction) pairs per call")
    args = parser.parse_args(argv)
    args.new_tokens = args.new_tokens or (4 if args.smoke else 32)
    with smoke_run(args):
        result = measure(args)
    return emit(result, args.json_out)


def measure(args) -> dict:
    threads = apply_threads(args.threads)
    from instemb_rag import InstEmbEncoder
    from tools.baselines import GenerateThenEmbed, GenerateThenEmbedArgs

    encoder = InstEmbEncoder.from_pretrained(benchmarked_llm_folder(args.model), device=args.device)
    device = str(encoder.device)
    baseline = GenerateThenEmbed(encoder, GenerateThenEmbedArgs(max_new_tokens=args.new_tokens, batch_size=args.batch))
    texts, instructions = [TEXT] * args.batch, [INSTRUCTION] * args.batch
    repeats = 2 if args.smoke else 3 if args.quick else 10
    samples = interleaved_times(
        {
            "instemb": lambda: encoder.encode_queries(texts, instructions),
            "generate_then_embed": lambda: baseline.encode(texts, instructions),
        },
        repeats,
        device,
    )
    instemb, generate = median(samples["instemb"]), median(samples["generate_then_embed"])
    return {
        "benchmark": "generate_baseline",
        "machine": machine_info(device),
        "threads": threads,
        "quick": args.quick,
        "smoke": args.smoke,
        "batch": args.batch,
        "new_tokens": args.new_tokens,
        "input_tokens": len(encoder.build_ids(TEXT, INSTRUCTION)),
        "sample_answer": baseline.generate_answers([TEXT], [INSTRUCTION])[0],
        "ms": {"instemb": 1000 * instemb, "generate_then_embed": 1000 * generate},
        "ratio_generate_vs_instemb": generate / instemb,
        "repeats": repeats,
    }


if __name__ == "__main__":
    main()
