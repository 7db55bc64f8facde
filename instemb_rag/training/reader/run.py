"""Train the reader (issue 67): resumable, checkpoints in safetensors + JSON, the fusion weight calibrated.

    python -m instemb_rag.training.reader RECIPE.yaml      (or instemb-rag train-reader RECIPE.yaml)

The loop is small because the model is: BERT with LoRA reads a record's candidates, a listwise
softmax (losses/reader.py) scores them, AdamW steps. Every ``save_steps`` the run writes
``checkpoint-<step>/`` (the reader folder, the optimizer's state, the step and the data order's
seed) through a ``.partial`` folder renamed into place, so an interrupted run resumes from its
last whole checkpoint, batch for batch (the order is a function of the seed and the step).
``final/`` holds the reader and ``fusion.json``: the weight its score is added to the first stage's
with, chosen on the held-out validation records (reranker.py says how the scores are fused).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import torch

from ...datasets.reader_records import ReaderRecord, read_reader_records
from ...losses.reader import listwise_reader_loss
from .args import ReaderTrainingArguments

__all__ = ["calibrate_fusion_weight", "split_records", "train_reader"]

STATE_NAME = "trainer_state.json"
OPTIMIZER_NAME = "optimizer.safetensors"
FUSION_NAME = "fusion.json"
FUSION_WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0)


def split_records(records: Sequence[ReaderRecord], share: float, limit: int) -> tuple[list, list]:
    """(training, validation): whole groups by a hash of their name (stable across runs and machines)."""

    def held_out(group: str) -> bool:
        return int(hashlib.sha256(group.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < share

    training = [record for record in records if not held_out(record.group)]
    validation = [record for record in records if held_out(record.group)][:limit]
    return training, validation


def _use_bf16(args: ReaderTrainingArguments, device: torch.device) -> bool:
    if args.bf16 in ("yes", "no"):
        return args.bf16 == "yes"
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    from ...encoder.cpu_flags import read_cpu_flags

    return bool({"avx512_bf16", "amx_bf16"} & read_cpu_flags())


def _candidates(record: ReaderRecord, count: int, rng: random.Random) -> list[str]:
    negatives = list(record.negatives)
    rng.shuffle(negatives)
    return [record.positive] + negatives[: count - 1]


def _step_records(records: Sequence[ReaderRecord], step: int, per_step: int, seed: int) -> list[ReaderRecord]:
    """The records of optimizer step ``step``: epoch e's order is a permutation seeded by (seed, e)."""
    chosen = []
    for position in range(step * per_step, (step + 1) * per_step):
        epoch, offset = divmod(position, len(records))
        order = list(range(len(records)))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        chosen.append(records[order[offset]])
    return chosen


def _optimizer(model, args: ReaderTrainingArguments) -> torch.optim.AdamW:
    lora = [parameter for name, parameter in model.bert.named_parameters() if parameter.requires_grad]
    return torch.optim.AdamW(
        [
            {"params": lora, "lr": args.learning_rate},
            {"params": list(model.head.parameters()), "lr": args.head_learning_rate},
        ],
        weight_decay=args.weight_decay,
    )


def _lr_factor(step: int, args: ReaderTrainingArguments) -> float:
    if step < args.warmup_steps:
        return (step + 1) / args.warmup_steps
    remaining = max(1, args.max_steps - args.warmup_steps)
    return max(0.0, 1.0 - (step - args.warmup_steps) / remaining)


def _save_optimizer(optimizer: torch.optim.AdamW, path: Path) -> dict:
    from safetensors.torch import save_file

    tensors, scalars = {}, {}
    for index, state in optimizer.state_dict()["state"].items():
        for key, value in state.items():
            if torch.is_tensor(value) and value.dim() > 0:
                tensors[f"{index}.{key}"] = value.detach().cpu().contiguous()
            else:
                scalars[f"{index}.{key}"] = float(value)
    save_file(tensors, str(path))
    return scalars


def _load_optimizer(optimizer: torch.optim.AdamW, path: Path, scalars: dict) -> None:
    from safetensors.torch import load_file

    saved = optimizer.state_dict()
    state: dict[int, dict] = {}
    for name, tensor in load_file(str(path)).items():
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = tensor
    for name, value in scalars.items():
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = torch.tensor(value)
    optimizer.load_state_dict({"state": state, "param_groups": saved["param_groups"]})


def _latest_checkpoint(output_dir: Path) -> Path | None:
    steps = [
        (int(path.name.split("-")[1]), path)
        for path in output_dir.glob("checkpoint-*")
        if path.name.split("-")[1].isdigit()
    ]
    steps = [(step, path) for step, path in steps if (path / STATE_NAME).is_file()]
    return max(steps)[1] if steps else None


def _write_checkpoint(model, optimizer, output_dir: Path, step: int, metrics: dict, keep: int = 2) -> Path:
    final = output_dir / f"checkpoint-{step}"
    partial = output_dir / f"checkpoint-{step}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    model.save(partial / "reader")
    scalars = _save_optimizer(optimizer, partial / OPTIMIZER_NAME)
    state = {"step": step, "optimizer_scalars": scalars, "metrics": metrics}
    (partial / STATE_NAME).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)
    older = sorted(
        (int(path.name.split("-")[1]), path)
        for path in output_dir.glob("checkpoint-*")
        if path.name.split("-")[1].isdigit()
    )
    for _, path in older[:-keep]:
        shutil.rmtree(path, ignore_errors=True)
    return final


@torch.inference_mode()
def validation_logits(model, records: Sequence[ReaderRecord], count: int, seed: int) -> list[list[float]]:
    """Each validation record's reader logits over its candidates (positive first)."""
    model.eval()
    rng = random.Random(seed)
    out = []
    for record in records:
        logits, _ = model.logits(record.query, record.instruction, _candidates(record, count, rng), batch_size=32)
        out.append(logits)
    model.train()
    return out


def top1_by_kind(records: Sequence[ReaderRecord], scores: Sequence[Sequence[float]]) -> dict[str, float]:
    """Share of records whose positive (index 0) scores strictly highest, per kind and overall."""
    by_kind: dict[str, list[float]] = {}
    for record, row in zip(records, scores):
        won = float(all(row[0] > other for other in row[1:]))
        # Plain search counts once per collection: a reader good on web questions may not be on papers.
        kind = f"plain:{record.source}" if record.kind == "plain" else record.kind
        by_kind.setdefault(kind, []).append(won)
        by_kind.setdefault("all", []).append(won)
    return {kind: sum(values) / len(values) for kind, values in sorted(by_kind.items())}


def calibrate_fusion_weight(
    records: Sequence[ReaderRecord], reader_logits: Sequence[Sequence[float]], first_stage: Sequence[Sequence[float]]
) -> dict:
    """The weight w of fused = first stage + w * sigmoid(reader logit) with the best macro top-1 over kinds
    on the validation records (ties: the smaller weight, the plainer ranking)."""
    table = {}
    for weight in FUSION_WEIGHTS:
        fused = [
            [cosine + weight / (1.0 + math.exp(-logit)) for cosine, logit in zip(cosines, logits)]
            for cosines, logits in zip(first_stage, reader_logits)
        ]
        per_kind = top1_by_kind(records, fused)
        kinds = [kind for kind in per_kind if kind != "all"]
        table[str(weight)] = {"macro": sum(per_kind[kind] for kind in kinds) / len(kinds), **per_kind}
    best = max(FUSION_WEIGHTS, key=lambda weight: (round(table[str(weight)]["macro"], 6), -weight))
    return {"weight": best, "by_weight": table}


def first_stage_cosines(records: Sequence[ReaderRecord], count: int, seed: int, base: str) -> list[list[float]]:
    """The sentence encoder's cosine of (instruction + query) with each candidate: the first stage's plain score."""
    from ...teachers import load_teacher
    from ...teachers.teacher import teacher_text

    teacher = load_teacher(base)
    rng = random.Random(seed)
    rows = []
    for record in records:
        candidates = _candidates(record, count, rng)
        query = teacher.encode([teacher_text(record.query, record.instruction)])
        documents = teacher.encode(candidates)
        rows.append((query @ documents.T)[0].tolist())
    return rows


def train_reader(args: ReaderTrainingArguments, log=print) -> Path:
    from ...reader.model import ReaderModel

    output_dir = Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(
        "cuda"
        if args.device == "auto" and torch.cuda.is_available()
        else ("cpu" if args.device == "auto" else args.device)
    )
    records = read_reader_records(args.records)
    training, validation = split_records(records, args.validation_share, args.validation_records)
    log(f"reader: {len(training)} training records, {len(validation)} validation records (whole groups held out)")
    (output_dir / "run_args.json").write_text(json.dumps(vars(args), indent=2) + "\n", encoding="utf-8")

    latest = _latest_checkpoint(output_dir)
    if latest is not None:
        model = ReaderModel.from_folder(latest / "reader", device=str(device), merged=False)
        model.config = replace(model.config, max_length=args.max_length)
        start = json.loads((latest / STATE_NAME).read_text(encoding="utf-8"))
        log(f"reader: resuming from {latest} (step {start['step']})")
    else:
        model = ReaderModel.untrained(
            args.base,
            lora_rank=args.lora_rank,
            max_length=args.max_length,
            seed=args.seed,
            lora_top_layers=args.lora_top_layers,
        ).to(device)
        start = {"step": 0}
    model.train()
    optimizer = _optimizer(model, args)
    if latest is not None:
        _load_optimizer(optimizer, latest / OPTIMIZER_NAME, start["optimizer_scalars"])
    use_bf16 = _use_bf16(args, device)
    base_lrs = [group["lr"] for group in optimizer.param_groups]
    metrics_path = output_dir / "metrics.jsonl"
    began = time.time()
    for step in range(start["step"], args.max_steps):
        rng = random.Random(args.seed * 7919 + step)
        batch_records = _step_records(training, step, args.records_per_step, args.seed)
        firsts, candidates, sizes = [], [], []
        for record in batch_records:
            texts = _candidates(record, args.candidates_per_record, rng)
            from ...reader.model import reader_first_segment

            firsts += [reader_first_segment(record.query, record.instruction)] * len(texts)
            candidates += texts
            sizes.append(len(texts))
        batch, _ = model.tokenize(firsts, candidates)
        for group, base_lr in zip(optimizer.param_groups, base_lrs):
            group["lr"] = base_lr * _lr_factor(step, args)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16):
            logits = model(batch)
        loss = listwise_reader_loss(logits, sizes)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], args.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        row = {
            "step": step + 1,
            "loss": round(loss.item(), 5),
            "lr": optimizer.param_groups[0]["lr"],
            "elapsed_s": round(time.time() - began, 1),
        }
        done = step + 1
        if done % args.save_steps == 0 or done == args.max_steps:
            row["validation_top1"] = top1_by_kind(
                validation, validation_logits(model, validation, args.candidates_per_record, args.seed)
            )
            _write_checkpoint(model, optimizer, output_dir, done, row)
        with open(metrics_path, "a", encoding="utf-8") as stream:
            stream.write(json.dumps(row) + "\n")
        if done % 10 == 0 or "validation_top1" in row:
            log(json.dumps(row))
    return finish_reader(args, output_dir, validation, log)


def finish_reader(
    args: ReaderTrainingArguments, output_dir: Path, validation: Sequence[ReaderRecord], log=print
) -> Path:
    """final/: the last checkpoint's reader at the inference window, and its calibrated fusion weight."""
    from ...reader.model import ReaderModel

    latest = _latest_checkpoint(output_dir)
    model = ReaderModel.from_folder(latest / "reader", merged=False)
    model.config = replace(model.config, max_length=args.inference_max_length)
    final = output_dir / "final"
    model.save(final)
    reader_scores = validation_logits(model, validation, args.candidates_per_record, args.seed)
    cosines = first_stage_cosines(validation, args.candidates_per_record, args.seed, args.base)
    fusion = calibrate_fusion_weight(validation, reader_scores, cosines)
    fusion["first_stage"] = f"{args.base} cosine of instruction + query (the default's plain score)"
    fusion["validation_records"] = len(validation)
    (final / FUSION_NAME).write_text(json.dumps(fusion, indent=2) + "\n", encoding="utf-8")
    log(
        f"reader: final at {final}; fusion weight {fusion['weight']} ({json.dumps(fusion['by_weight'][str(fusion['weight'])])})"
    )
    return final
