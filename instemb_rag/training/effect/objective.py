"""The effect objective (``EffectObjective``), plugged into the one trainer loop (trainer.py).

A run (``effect.texts_file`` set; objectives.py selects this objective):

1. caches every vector below the effect map once (vectors.py): the shipped LLM's query vectors
   under each instruction and under the reference instruction, the sentence encoder's vector of
   "instruction + query", and both spaces' document vectors of every passage; nothing else runs the models;
2. builds the effect map (encoder/composed/effect_map.py) at the identity and gain 1: step 0 is
   exactly the untrained arrangement at the recipe's strength (args.py);
3. each step ranks a batch of queries by ``cos_M(i + q, d) + s gain(q) < h(effect), D(d) >`` over
   their positives, their groups' other passages (a subject's other aspects, the other stance) and
   a seeded bank sample (losses/instruction_effect.py). Plain retrieval queries with instructions
   that decide nothing share every batch, so such an instruction learns to move nothing.

The checkpoints are instruction-effect encoders: what ``encode_queries`` computes at inference is
what the step ranked (the same EffectMap module).
"""

from __future__ import annotations

import torch
from transformers import get_linear_schedule_with_warmup

from ...encoder.combine import effect_scores
from ...encoder.composed.effect import InstructionEffectEncoder
from ...encoder.composed.effect_map import EffectMap
from ...hashing import file_sha256
from ...losses.instruction_effect import effect_infonce
from ..batch_order import BatchOrder
from ..common_args import RunConfig
from ..objective import Objective, Prepared, StepResult
from ..student import TrainableParts
from .data import load_effect_data

__all__ = ["EffectObjective"]


class EffectObjective(Objective):
    name = "effect"
    logged_lr_group = 0

    @staticmethod
    def term_weights(config: RunConfig) -> dict[str, float]:
        return {"infonce": 1.0}

    def prepare(self) -> Prepared:
        config, device, log = self.config, self.device, self.log
        t, e = config.training, config.effect
        llm, sentence_encoder, documents_source = documents_llm_and_sentence_encoder(config)
        data = load_effect_data(
            e.texts_file, e.max_queries, e.validation_share, t.seed, e.embedding_dir, llm, sentence_encoder, log
        )
        effect_map = EffectMap(llm.dimension, e.rank).to(device)
        named = {f"effect_map.{name}": p for name, p in effect_map.named_parameters()}
        parts = TrainableParts(named=named, adapted_names=[], peft_model=None)
        optimizer = torch.optim.AdamW(
            [{"params": list(effect_map.parameters()), "lr": e.map_learning_rate, "weight_decay": t.weight_decay}]
        )
        scheduler = get_linear_schedule_with_warmup(optimizer, t.warmup_steps, t.max_steps)
        training_queries = [data.queries.queries[row] for row in data.training_rows]
        order = BatchOrder.items(training_queries, [len(q.text) for q in training_queries], t.batch_size, t.seed)
        encoder = InstructionEffectEncoder(
            llm, sentence_encoder, effect_map, documents_source=documents_source, **e.knobs
        )
        data_info = {
            "texts_file": str(e.texts_file),
            "data_sha256": file_sha256(e.texts_file),
            "queries": len(data.training_rows),
            "validation_queries": len(data.validation_rows),
            "passages": len(data.llm_passages),
            "seed": t.seed,
            "batches_per_epoch": order.per_epoch,
            "document_fingerprint": encoder.document_fingerprint,
        }
        self.data, self.order, self.effect_map, self.encoder = data, order, effect_map, encoder
        return Prepared(encoder, parts, optimizer, scheduler, data_info, {"device": str(device), **data_info})

    def resumed(self, start_step: int) -> None:
        steps, per_epoch = self.config.training.max_steps, self.order.per_epoch
        self.log(f"training steps {start_step}..{steps} ({steps / per_epoch:.1f} epochs of {per_epoch} batches)")
        self.log(f"validation top-1 at step {start_step}: {self.validation_top1()}")

    def ranked(self, rows: list[int], seed: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(scores [B, C], each query's positive column [B], gain [B]) of query rows over their candidates."""
        e, device, data = self.config.effect, self.device, self.data
        candidates, positives = data.queries.candidates(rows, e.bank_negatives, seed)
        # The encoder's own query route (what encode_queries runs, at its own strength: the
        # recipe's), on the cached LLM vectors.
        effect_vector, gain = self.encoder.route_effect(
            data.llm_queries[rows].to(device), data.llm_references[rows].to(device)
        )
        scores = effect_scores(
            effect_vector,
            data.queries.anchors[rows].to(device),
            data.llm_passages[candidates].to(device),
            data.queries.passages[candidates].to(device),
        )
        return scores, torch.tensor(positives, device=device), gain

    def step(self, step: int) -> StepResult:
        rows = [self.data.training_rows[i] for i in self.order.step(step)]
        scores, positives, gain = self.ranked(rows, f"{self.config.training.seed}:bank:{step}")
        loss = effect_infonce(scores, positives, self.config.effect.temperature)
        loss.backward()
        extra = {"batch": len(rows), "gain": round(float(gain.detach().mean()), 4)}
        if (step + 1) % self.config.training.save_steps == 0:
            extra.update({f"validation_{kind}_top1": v for kind, v in (self.validation_top1() or {}).items()})
        return StepResult({"infonce": float(loss.detach()), "loss": float(loss.detach())}, extra)

    @torch.no_grad()
    def validation_top1(self) -> dict[str, float] | None:
        """The held-out queries' share whose positive ranks first among their candidates: those
        with a group (the instruction decides between its passages) and plain ones apart."""
        rows = self.data.validation_rows
        if not rows:
            return None
        hits: dict[str, list[bool]] = {"group": [], "plain": []}
        for start in range(0, len(rows), 256):
            chunk = rows[start : start + 256]
            scores, positives, _ = self.ranked(chunk, f"{self.config.training.seed}:validation")
            for row, hit in zip(chunk, (scores.argmax(dim=1) == positives).tolist()):
                hits["group" if self.data.queries.queries[row].group else "plain"].append(hit)
        return {kind: round(sum(found) / len(found), 4) for kind, found in hits.items() if found}


def documents_llm_and_sentence_encoder(config):
    """The fixed documents' side an effect run trains against: its LLM (the shipped one for
    "default"), its sentence encoder, as the recipe names them, and the LLM's folder
    (None for a bare model folder), which the saved encoder records."""
    from ...encoder import InstEmbEncoder, shipped_llm_folder
    from ...encoder.llm_folder import is_llm_folder
    from ...encoder.modules.sentence_encoder import SentenceEncoder

    e = config.effect
    source = shipped_llm_folder() if e.documents_llm in ("", "default") else e.documents_llm
    # A Hugging Face folder gets the recipe's look-ahead length (an LLM folder has its own).
    lookahead = None if is_llm_folder(source) else config.model.lookahead_length
    llm = InstEmbEncoder.from_pretrained(source, device="cpu", lookahead_length=lookahead)
    sentence_encoder = SentenceEncoder.load(SentenceEncoder.recorded_reference(e.sentence_encoder))
    return llm, sentence_encoder, (source if is_llm_folder(source) else None)
