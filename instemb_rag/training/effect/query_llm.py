"""The effect objective with the LLM's query side training (issue 61): ``EffectLLMObjective``.

Issue 56's objective (objective.py) trains only the map and gain over frozen query vectors, so it
can scale the instruction's effect D(q, i) - D(q, r) but never change what it points at. Here the
query side's LLM trains too: the documents' LLM with its LoRA going on in the top
``effect.query_layers`` layers (the LoRA layers below stay as shipped), on the combined score

    cos_M(i + q, d) + s gain(q) < h(D'(q, i) - D'(q, r)), D(d) >

with the documents fixed (D(d) and M(d) as indexed, cached once; no re-index). Both query vectors
come from the trained query LLM, as at inference. The states entering the lowest trained layer
are a fixed function of each (text, instruction) input and are cached once (prefix_cache.py), so
a CPU step runs only the top layers on the batch's 2B inputs.

Candidates per query: its positive, its group's other passages (a subject's other aspects, the
other stance's evidence, the contradicting NLI sentence), its own trap passages
(``effect.negatives_file``: rule-built passages that repeat the instruction's words), and a seeded
bank sample shared by the batch. Queries under a generic instruction (MS MARCO's, tagged
``:generic``) also carry the keep term: their instruction contribution, in temperature units, held
flat across the candidates (``effect.keep_weight``), so an instruction that decides nothing moves
nothing. Step 0 is the untrained arrangement at the recipe's strength (args.py; up to the cache's
float16 rounding).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import torch

from ...encoder.combine import REFERENCE_INSTRUCTION, effect_scores
from ...encoder.composed.effect_map import EffectMap
from ...encoder.composed.effect_query_llm import effect_with_query_llm
from ...errors import InstEmbError
from ...hashing import file_sha256
from ...losses.instruction_effect import effect_infonce, flat_contribution
from ..batch_order import BatchOrder
from ..objective import Objective, Prepared, StepResult
from ..prefix_cache import PrefixCache, input_key, pooled_embeddings
from ..student import decoder_layers, load_student, make_trainable
from .data import no_training_queries

__all__ = ["EffectLLMObjective"]

GENERIC_TAG = ":generic"  # select_round2.py / select_round3.py: a plain query under a generic instruction


class EffectLLMObjective(Objective):
    name = "effect_llm"
    logged_lr_group = 0

    @staticmethod
    def term_weights(config) -> dict[str, float]:
        return {"infonce": 1.0, "keep": config.effect.keep_weight, "contrast": config.effect.contrast_weight}

    def prepare(self) -> Prepared:
        from .objective import documents_llm_and_sentence_encoder

        config, device, log = self.config, self.device, self.log
        t, e = config.training, config.effect
        documents_llm, sentence_encoder, documents_source = documents_llm_and_sentence_encoder(config)
        self.data = load_llm_effect_data(e, t.seed, documents_llm, sentence_encoder, log)
        student = load_student(config, device)
        parts = make_trainable(student, config)
        top = open_query_layers(student, parts, e.query_layers)
        student.eval()  # no dropout layers
        root = Path(e.prefix_cache_dir) if e.prefix_cache_dir else Path(_home()) / "prefix_cache"
        cache = PrefixCache(root, student, e.query_layers, torch.float16)
        started = time.perf_counter()
        cache.build(self.data.inputs(), log=log)
        log(f"prefix cache ready ({len(cache.index)} inputs, {time.perf_counter() - started:.0f} s this run)")
        effect_map = EffectMap(student.dimension, e.rank).to(device)
        parts.named.update({f"effect_map.{name}": p for name, p in effect_map.named_parameters()})
        llm_params = [p for name, p in parts.named.items() if not name.startswith("effect_map.")]
        optimizer = torch.optim.AdamW(
            [
                {"params": llm_params, "lr": t.learning_rate, "weight_decay": t.weight_decay},
                {"params": list(effect_map.parameters()), "lr": e.map_learning_rate, "weight_decay": t.weight_decay},
            ]
        )
        from transformers import get_linear_schedule_with_warmup

        scheduler = get_linear_schedule_with_warmup(optimizer, t.warmup_steps, t.max_steps)
        queries = [self.data.queries[row] for row in self.data.training_rows]
        lengths = [cache.index[input_key(q.text, q.instruction)][2] for q in queries]
        self.order = BatchOrder.items(queries, lengths, t.batch_size, t.seed)
        self.encoder = effect_with_query_llm(
            documents_llm, student, sentence_encoder, effect_map, documents_source=documents_source, **e.knobs
        )
        self.student, self.cache, self.effect_map = student, cache, effect_map
        data_info = {
            "texts_file": str(e.texts_file),
            "data_sha256": file_sha256(e.texts_file),
            "negatives_file": str(e.negatives_file),
            "queries": len(self.data.training_rows),
            "validation_queries": len(self.data.validation_rows),
            "passages": len(self.data.llm_passages),
            "query_layers": top,
            "seed": t.seed,
            "batches_per_epoch": self.order.per_epoch,
            "document_fingerprint": self.encoder.document_fingerprint,
        }
        run_info = {"device": str(device), "prefix_cache": str(cache.folder), **data_info}
        return Prepared(self.encoder, parts, optimizer, scheduler, data_info, run_info)

    def resumed(self, start_step: int) -> None:
        steps, per_epoch = self.config.training.max_steps, self.order.per_epoch
        self.log(f"training steps {start_step}..{steps} ({steps / per_epoch:.1f} epochs of {per_epoch} batches)")
        self.log(f"validation top-1 at step {start_step}: {self.validation_top1()}")

    def ranked(self, rows: list[int], seed: str):
        """(scores [B, C], positive columns [B], effect vector [B, d], LLM candidates [C, d], gain [B])."""
        e, data, device = self.config.effect, self.data, self.student.device
        columns, positives = data.candidates(rows, e.bank_negatives, seed)
        effect_vector, gain = self.query_effects(rows)
        llm_candidates = data.llm_passages[columns].to(device)
        scores = effect_scores(
            effect_vector,
            data.anchors[rows].to(device),
            llm_candidates,
            data.sentence_encoder_passages[columns].to(device),
        )
        if e.group_negatives_only:
            scores = scores.masked_fill(~data.own_columns(rows, columns).to(device), float("-inf"))
        return scores, torch.tensor(positives, device=device), effect_vector, llm_candidates, gain

    def query_effects(self, rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """(``s gain h(D'(q, i) - D'(q, r))`` [B, d], gain [B]) of query rows: the top layers on the
        cached states of each query under its instruction and under the reference, as at inference."""
        queries = [self.data.queries[row] for row in rows]
        inputs = [(q.text, q.instruction) for q in queries] + [(q.text, REFERENCE_INSTRUCTION) for q in queries]
        pooled = pooled_embeddings(self.student, self.cache, inputs)
        vectors = torch.nn.functional.normalize(self.student.project(pooled).float(), dim=-1)
        under_instruction, under_reference = vectors[: len(rows)], vectors[len(rows) :]
        return self.encoder.route_effect(under_instruction, under_reference)  # at its own strength: the recipe's

    def instruction_contrast(self, rows: list[int], effect_vector: torch.Tensor, step: int) -> torch.Tensor:
        """The same query text under its sibling's instruction (same subject, another positive) must
        score the query's positive lower than under its own: cross-entropy over the two
        instructions. What the instruction does not decide (a shift every instruction gives alike)
        cancels in this comparison: only what the instruction changes is trained."""
        data, device = self.data, self.student.device
        rng = random.Random(f"{self.config.training.seed}:siblings:{step}")
        pairs = [(b, rng.choice(data.siblings[row])) for b, row in enumerate(rows) if data.siblings[row]]
        if not pairs:
            return effect_vector.sum() * 0.0
        batch, siblings = [b for b, _ in pairs], [s for _, s in pairs]
        sibling_effect, _ = self.query_effects(siblings)
        passages = [data.positives[rows[b]] for b in batch]
        llm, sentence_encoder = (
            data.llm_passages[passages].to(device),
            data.sentence_encoder_passages[passages].to(device),
        )
        own = (data.anchors[[rows[b] for b in batch]].to(device) * sentence_encoder).sum(-1) + (
            effect_vector[batch] * llm
        ).sum(-1)
        other = (data.anchors[siblings].to(device) * sentence_encoder).sum(-1) + (sibling_effect * llm).sum(-1)
        logits = torch.stack([own, other], dim=1) / self.config.effect.temperature
        return torch.nn.functional.cross_entropy(logits, torch.zeros(len(pairs), dtype=torch.long, device=device))

    def step(self, step: int) -> StepResult:
        e = self.config.effect
        rows = [self.data.training_rows[i] for i in self.order.step(step)]
        scores, positives, effect_vector, llm_candidates, gain = self.ranked(
            rows, f"{self.config.training.seed}:bank:{step}"
        )
        generic = torch.tensor([self.data.queries[row].id.endswith(GENERIC_TAG) for row in rows])
        terms = {"infonce": effect_infonce(scores, positives, e.temperature)}
        terms["keep"] = flat_contribution(effect_vector[generic], llm_candidates, e.temperature)
        terms["contrast"] = (
            self.instruction_contrast(rows, effect_vector, step) if e.contrast_weight > 0 else effect_vector.sum() * 0.0
        )
        terms["loss"] = terms["infonce"] + e.keep_weight * terms["keep"] + e.contrast_weight * terms["contrast"]
        terms["loss"].backward()
        extra = {"batch": len(rows), "gain": round(float(gain.detach().mean()), 4)}
        if (step + 1) % self.config.training.save_steps == 0:
            extra.update({f"validation_{kind}_top1": v for kind, v in (self.validation_top1() or {}).items()})
        return StepResult({name: float(value.detach()) for name, value in terms.items()}, extra)

    @torch.no_grad()
    def validation_top1(self) -> dict[str, float] | None:
        """The held-out queries' share whose positive ranks first among their candidates, per kind."""
        rows = self.data.validation_rows
        if not rows:
            return None
        hits: dict[str, list[bool]] = {}
        for start in range(0, len(rows), 64):
            chunk = rows[start : start + 64]
            scores, positives, *_ = self.ranked(chunk, f"{self.config.training.seed}:validation")
            for row, hit in zip(chunk, (scores.argmax(dim=1) == positives).tolist()):
                hits.setdefault(self.data.kind_of(row), []).append(hit)
        return {kind: round(sum(found) / len(found), 4) for kind, found in sorted(hits.items())}


def _home():
    from ...paths import instemb_home

    return instemb_home()


def open_query_layers(student, parts, query_layers: int) -> list[int]:
    """Keep only the top ``query_layers`` decoder layers' LoRA (and the final norm) training: the
    layers below keep the shipped adapter, so their states are a fixed function of the input and the
    frozen-prefix cache holds them. Returns the trained layer indices."""
    total = len(decoder_layers(student.model))
    top = list(range(total - query_layers, total))
    opened = 0
    for name, param in list(parts.named.items()):
        layer = _layer_of(name)
        if layer is not None and layer not in top:
            param.requires_grad_(False)
            del parts.named[name]
        elif layer is not None:
            opened += 1
    if not opened:
        raise InstEmbError(
            f"No trainable LoRA tensor in the top {query_layers} layers: the run's model section must train "
            "LoRA on those layers (trainable_top_layers >= effect.query_layers, lora_rank > 0)."
        )
    return top


def _layer_of(name: str) -> int | None:
    parts = name.split(".")
    for position, part in enumerate(parts[:-1]):
        if part == "layers" and parts[position + 1].isdigit():
            return int(parts[position + 1])
    return None


class LLMEffectData:
    """Queries (with an instruction), their positives, hard negatives (group and own traps), the
    cached sentence-encoder vectors of queries and passages and the documents' LLM-space vectors."""

    def __init__(self, queries, passages, negatives: dict[str, list[str]], vectors, validation_share, seed):
        self.queries, self.passages = queries, passages
        row_of = {item.id: row for row, item in enumerate(passages)}
        self.positives = [row_of[q.positive] for q in queries]
        groups: dict[str, list[int]] = {}
        for row, item in enumerate(passages):
            if item.group:
                groups.setdefault(item.group, []).append(row)
        missing = [pid for ids in negatives.values() for pid in ids if pid not in row_of]
        if missing:
            raise InstEmbError(f"{len(missing)} negatives name no passage of the items file (e.g. {missing[:2]}).")
        self.hard = [
            [r for r in groups.get(q.group or "", []) if r != self.positives[n]]
            + [row_of[p] for p in negatives.get(q.id, [])]
            for n, q in enumerate(queries)
        ]
        # A query's siblings: the same text on the same subject under another instruction with
        # another positive (a facet group's other aspects, the other stance, the other NLI sentence).
        by_text: dict[tuple, list[int]] = {}
        for n, q in enumerate(queries):
            if q.group:
                by_text.setdefault((q.group, q.text), []).append(n)
        self.siblings = [
            [m for m in by_text.get((q.group, q.text), []) if self.positives[m] != self.positives[n]]
            for n, q in enumerate(queries)
        ]
        self.own_traps = {qid for qid, ids in negatives.items() if ids}
        self.anchors, self.sentence_encoder_passages = (
            vectors["sentence_encoder_queries"],
            vectors["sentence_encoder_passages"],
        )
        self.llm_passages = vectors["llm_passages"]
        rows = list(range(len(queries)))
        random.Random(f"{seed}:validation").shuffle(rows)
        held = round(len(rows) * validation_share)
        self.training_rows, self.validation_rows = sorted(rows[held:]), sorted(rows[:held])

    def inputs(self) -> list[tuple[str, str | None]]:
        """Every input the query LLM runs: each query under its instruction and under the reference."""
        pairs = [(q.text, q.instruction) for q in self.queries]
        return pairs + [(q.text, REFERENCE_INSTRUCTION) for q in self.queries]

    def kind_of(self, row: int) -> str:
        """The validation figure a query counts in: plain (generic instruction), nli, trap (it has a
        rule-built trap) or group."""
        query = self.queries[row]
        if query.id.endswith(GENERIC_TAG):
            return "plain"
        if query.source == "stance_pairs":
            return "nli"
        return "trap" if query.id in self.own_traps else "group"

    def own_columns(self, rows: list[int], columns: list[int]) -> torch.Tensor:
        """[B, C] bool: the columns each query ranks with ``group_negatives_only``: its positive and
        its hard negatives when it has any, every column otherwise (a plain query)."""
        mask = torch.ones(len(rows), len(columns), dtype=torch.bool)
        position = {row: n for n, row in enumerate(columns)}
        for b, row in enumerate(rows):
            if self.hard[row]:
                mask[b] = False
                mask[b, [position[r] for r in [self.positives[row], *self.hard[row]]]] = True
        return mask

    def candidates(self, rows: list[int], bank_negatives: int, seed: str) -> tuple[list[int], list[int]]:
        """The columns a step ranks (the batch's positives and hard negatives, a seeded bank sample)
        and each query's positive column."""
        columns = [self.positives[r] for r in rows] + [h for r in rows for h in self.hard[r]]
        if bank_negatives:
            total = len(self.passages)
            columns += random.Random(seed).sample(range(total), min(bank_negatives, total))
        unique = list(dict.fromkeys(columns))
        position = {row: n for n, row in enumerate(unique)}
        return unique, [position[self.positives[r]] for r in rows]


def load_llm_effect_data(e, seed: int, documents_llm, sentence_encoder, log=print) -> LLMEffectData:
    """The items file's queries and passages with their cached vectors (the documents' LLM-space vectors and
    the sentence encoder's; the query LLM's states are the prefix cache's)."""
    from ...datasets.embedding_items import read_items
    from ...paths import instemb_home
    from ...teachers.cache import cached_embeddings
    from ...teachers.teacher import teacher_text
    from ..cached_vectors import cached_llm_vectors

    items = read_items(e.texts_file)
    passages = [item for item in items if item.role == "passage"]
    known = {item.id for item in passages}
    queries = [item for item in items if item.role == "query" and item.instruction and item.positive in known]
    if e.max_queries is not None:
        queries = queries[: e.max_queries]
    if not queries:
        raise no_training_queries(e.texts_file)
    negatives = json.loads(Path(e.negatives_file).read_text()) if e.negatives_file else {}
    folder = Path(e.embedding_dir) if e.embedding_dir else instemb_home() / "teacher_embeddings"
    as_tensor = lambda array: torch.as_tensor(array, dtype=torch.float32)  # noqa: E731
    texts = [teacher_text(q.text, q.instruction) for q in queries]
    vectors = {"sentence_encoder_queries": as_tensor(cached_embeddings(sentence_encoder.teacher, texts, folder))}
    vectors["sentence_encoder_passages"] = as_tensor(
        cached_embeddings(sentence_encoder.teacher, [p.text for p in passages], folder)
    )
    log(f"effect data: {len(queries)} queries, {len(passages)} passages; caching the documents' LLM-space vectors")
    vectors["llm_passages"] = cached_llm_vectors(
        documents_llm, "default", [p.text for p in passages], e.embedding_dir, log
    )
    return LLMEffectData(queries, passages, negatives, vectors, e.validation_share, seed)
