"""One text under K instructions: shared-prefix path vs the plain path.

    python benchmarks/bench_multi_instruction.py [--quick] [--json-out out.json]
    python benchmarks/bench_multi_instruction.py --smoke   # seconds, tiny random model (figures mean nothing)

A 64-token text and 16-token instructions (token counts of the encoder's own tokenizer).
Goal: K = 8 through encode_instructions costs at most 2.5x a single (text, instruction).
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

TEXT_SOURCE = (
    "The two-person tent weighs 1.9 kg and packs to 45 by 15 cm. Its aluminium poles held up in "
    "strong wind during a three-night trip in the Alps, and the nylon floor stayed dry in heavy "
    "rain. The zipper on the door snagged twice, but the seams were taped well and the vestibule "
    "kept our boots dry. Setting it up alone took about six minutes after some practice."
)
INSTRUCTION_SOURCES = [
    "Focus on how much the tent weighs and how small it packs for carrying on long hikes.",
    "Judge the durability of the poles, fabric and zipper after repeated use in bad weather conditions.",
    "Does the tent keep its occupants dry during heavy rain and storms at night in the mountains?",
    "Summarise the set-up experience for a single person camping alone for the first time ever.",
    "Compare the interior space with other two-person tents for tall campers and their gear.",
    "What are the main weaknesses a buyer should know about before ordering this tent online?",
    "Describe the ventilation and condensation behaviour on cold nights with little wind outside.",
    "Is this tent a good value for money for occasional weekend campers on a small budget?",
]


def exact_tokens(tokenizer, text: str, count: int) -> str:
    """A prefix of ``text`` that the tokenizer splits into exactly ``count`` tokens (or fewer
    when the text is shorter)."""
    ids = tokenizer(text, add_special_tokens=False).input_ids[:count]
    return tokenizer.decode(ids)


def main(argv: list[str] | None = None) -> dict:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default=None, help="default: the shipped LLM (of a two-space folder: its documents' LLM)"
    )
    parser.add_argument("--text-tokens", type=int, default=64)
    parser.add_argument("--instruction-tokens", type=int, default=16)
    parser.add_argument("--k", type=int, default=8)
    args = parser.parse_args(argv)
    with smoke_run(args):
        result = measure(args)
    return emit(result, args.json_out)


def measure(args) -> dict:
    threads = apply_threads(args.threads)
    from instemb_rag import InstEmbEncoder
    from instemb_rag.encoder.fast.shared_prefix import shared_prefix_length

    encoder = InstEmbEncoder.from_pretrained(benchmarked_llm_folder(args.model), device=args.device)
    device = str(encoder.device)
    tokenizer = encoder.tokenizer
    text = exact_tokens(tokenizer, TEXT_SOURCE * 2, args.text_tokens)
    sources = (INSTRUCTION_SOURCES * (args.k // len(INSTRUCTION_SOURCES) + 1))[: args.k]
    instructions = [exact_tokens(tokenizer, source, args.instruction_tokens) for source in sources]

    id_lists = [encoder.build_ids(text, instruction) for instruction in instructions]
    prefix = shared_prefix_length(id_lists, encoder.lookahead_length)
    suffix_tokens = sum(len(ids) - prefix for ids in id_lists)
    repeats = 2 if args.smoke else 5 if args.quick else 15
    samples = interleaved_times(
        {
            "k1_plain": lambda: encoder.encode_queries([text], [instructions[0]]),
            "k_shared": lambda: encoder.encode_instructions(text, instructions),
            "k_plain": lambda: encoder.encode_queries([text] * len(instructions), instructions),
        },
        repeats,
        device,
    )
    one = median(samples["k1_plain"])
    return {
        "benchmark": "multi_instruction",
        "machine": machine_info(device),
        "threads": threads,
        "quick": args.quick,
        "smoke": args.smoke,
        "k": args.k,
        "tokens": {
            "text": len(tokenizer(text, add_special_tokens=False).input_ids),
            "instruction": [len(tokenizer(i, add_special_tokens=False).input_ids) for i in instructions],
            "input_k1": len(id_lists[0]),
            "shared_prefix": prefix,
            "suffixes_total": suffix_tokens,
        },
        # What a purely compute-bound machine would show: tokens run, K shared vs K = 1.
        "token_ratio_shared_vs_k1": (prefix + suffix_tokens) / len(id_lists[0]),
        "ms": {name: 1000 * median(times) for name, times in samples.items()},
        "ratio_shared_k_vs_k1": median(samples["k_shared"]) / one,
        "ratio_plain_k_vs_k1": median(samples["k_plain"]) / one,
        "speedup_shared_vs_plain": median(samples["k_plain"]) / median(samples["k_shared"]),
        "repeats": repeats,
    }


if __name__ == "__main__":
    main()
