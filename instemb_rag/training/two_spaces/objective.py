"""The two-space objective (``TwoSpacesObjective``), plugged into the one trainer loop (trainer.py).

A run (``two_spaces.texts_file`` set; objectives.py selects this objective):

1. caches both spaces' document vectors of every passage of the items file (data.py): the frozen
   documents' LLM (slow: start it first) and the sentence encoder; documents never run again;
2. loads the student (the documents' LLM with its LoRA going on training live: the query-side
   adapter), opens its top K layers and fills the frozen-prefix cache with the queries;
3. attaches the sentence encoder head (at zero: the sentence-encoder vector is exactly the sentence encoder's vector of
   "instruction + query") and the gate (zero weights, bias at logit(w0)): step 0 is exactly the
   untrained two-space model at w0;
4. each step runs the top K layers on the cached queries once; DAAP gives the LLM-space vector, the head
   the correction of the sentence encoder's vector, the gate the weight; InfoNCE ranks each query's positive passage by
   ``w cos_LLM + (1 - w) cos_sentence`` above its group's other passages (a subject's other aspects,
   a claim's other-stance evidence) and a seeded bank sample (losses/two_spaces.py). The two spaces' vectors
   come from the encoder's own query route (``route_by_space``), the one ``encode_queries`` runs.

The checkpoints are two-space encoders (encoder/composed/): what ``encode_queries`` computes at
inference is what the step ranked.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch import nn

from ...encoder.composed.encoder import TwoSpacesEncoder
from ...encoder.composed.gate import WeightGate
from ...encoder.modules.projection import Projection
from ...encoder.modules.sentence_encoder import SentenceEncoder
from ...hashing import file_sha256
from ...knobs import LLM_WEIGHT
from ...losses.two_spaces import two_spaces_infonce
from ...losses.two_tower import correction_norm
from ..batch_order import BatchOrder
from ..common_args import RunConfig
from ..objective import Objective, Prepared, StepResult, weighted_sum
from ..prefix_cache import PrefixCache, input_key, pooled_embeddings
from ..state import latest_checkpoint
from ..student import load_student, make_trainable, optimizer_with_head
from .data import load_two_spaces_data

__all__ = ["TwoSpacesObjective"]


class QuerySideHeads(nn.Module):
    """The sentence encoder head and the gate: one parameter group at the head learning rate."""

    def __init__(self, head: Projection, gate: WeightGate | None):
        super().__init__()
        self.head, self.gate = head, gate


class TwoSpacesObjective(Objective):
    name = "two_spaces"
    logged_lr_group = 0

    @staticmethod
    def term_weights(config: RunConfig) -> dict[str, float]:
        return {"infonce": 1.0, "anchor": config.two_spaces.anchor_weight}

    def prepare(self) -> Prepared:
        from ...encoder import InstEmbEncoder

        config, device, log = self.config, self.device, self.log
        t, s, m = config.training, config.two_spaces, config.model
        from ...encoder.composed.spec import llm_folder_of
        from ...encoder.llm_folder import is_llm_folder
        from ...encoder.model import shipped_llm_folder

        # "default": the shipped LLM (the documents' LLM of a two-space default); a two-space folder: its own.
        source = shipped_llm_folder() if s.documents_llm in ("", "default") else llm_folder_of(Path(s.documents_llm))
        # A Hugging Face folder gets the student's look-ahead length (an LLM folder has its own).
        lookahead = None if is_llm_folder(source) else m.lookahead_length
        documents_llm = InstEmbEncoder.from_pretrained(source, device=str(device), lookahead_length=lookahead)
        sentence_encoder = SentenceEncoder.load(
            SentenceEncoder.recorded_reference(s.sentence_encoder), device=str(device)
        )
        data = load_two_spaces_data(
            s.texts_file, s.max_queries, sentence_encoder, documents_llm, s.documents_llm, s.embedding_dir, log
        )
        student = load_student(config, device)
        if student.dimension != documents_llm.dimension:
            raise ValueError(
                f"model.model_name_or_path embeds in {student.dimension} dimensions, the documents' LLM in {documents_llm.dimension}."
            )
        parts = make_trainable(student, config)
        student.eval()  # no dropout layers
        root = Path(s.prefix_cache_dir) if s.prefix_cache_dir else Path(self._home()) / "prefix_cache"
        cache = PrefixCache(root, student, m.trainable_top_layers, torch.float16)
        started = time.perf_counter()
        queries = data.ranking.queries
        cache.build([item.student_input for item in queries], log=log)
        log(f"prefix cache ready ({len(cache.index)} inputs, {time.perf_counter() - started:.0f} s this run)")
        lengths = [cache.index[input_key(*item.student_input)][2] for item in queries]
        order = BatchOrder.items(queries, lengths, t.batch_size, t.seed)
        head = Projection(student.hidden_size, sentence_encoder.dimension).to(device)
        gate = WeightGate(student.hidden_size, s.initial_llm_weight).to(device) if s.gate else None
        if not (t.resume and latest_checkpoint(Path(t.output_dir)) is not None):
            with torch.no_grad():  # a zero correction: the sentence-encoder vector starts at the anchor
                head.linear.weight.zero_()
                head.linear.bias.zero_()
        heads = QuerySideHeads(head, gate)
        parts.named.update({f"projection.{name}": p for name, p in heads.named_parameters()})
        optimizer, scheduler = optimizer_with_head(parts, heads, t, s.head_learning_rate)
        encoder = TwoSpacesEncoder(
            documents_llm,
            sentence_encoder,
            student,
            head,
            gate,
            s.initial_llm_weight,
            documents_source=source if is_llm_folder(source) else None,
        )
        data_info = {
            "texts_file": str(s.texts_file),
            "data_sha256": file_sha256(s.texts_file),
            "queries": len(queries),
            "passages": len(data.llm_passages),
            "seed": t.seed,
            "batches_per_epoch": order.per_epoch,
            "documents_llm": s.documents_llm,
            "document_fingerprint": encoder.document_fingerprint,
        }
        run_info = {"device": str(device), "prefix_cache": str(cache.folder), **data_info}
        self.student, self.cache, self.data, self.order, self.heads = student, cache, data, order, heads
        self.encoder = encoder
        return Prepared(encoder, parts, optimizer, scheduler, data_info, run_info)

    @staticmethod
    def _home():
        from ...paths import instemb_home

        return instemb_home()

    def resumed(self, start_step: int) -> None:
        steps, per_epoch = self.config.training.max_steps, self.order.per_epoch
        self.log(f"training steps {start_step}..{steps} ({steps / per_epoch:.1f} epochs of {per_epoch} batches)")

    def step(self, step: int) -> StepResult:
        s, device = self.config.two_spaces, self.student.device
        ranking = self.data.ranking
        batch = self.order.step(step)
        pooled = pooled_embeddings(self.student, self.cache, [ranking.queries[i].student_input for i in batch])
        # The encoder's own query route (what encode_queries runs), on the cached pooled states.
        llm_vectors, sentence_encoder_vectors, weights, corrections = self.encoder.route_by_space(
            pooled, self.student.project(pooled), ranking.anchors[batch].to(device)
        )
        rows, positives = ranking.candidates(batch, s.bank_negatives, f"{self.config.training.seed}:bank:{step}")
        terms = {
            "infonce": two_spaces_infonce(
                (llm_vectors, self.data.llm_passages[rows].to(device)),
                (sentence_encoder_vectors, ranking.passages[rows].to(device)),
                weights,
                torch.tensor(positives, device=device),
                s.temperature,
            ),
            "anchor": correction_norm(corrections),
        }
        weights_by_term = self.term_weights(self.config)
        terms["loss"] = weighted_sum({n: v for n, v in terms.items() if weights_by_term[n] > 0}, weights_by_term)
        terms["loss"].backward()
        # The gate's mean weight this batch, logged under the knob's name.
        extra = {"batch": len(batch), LLM_WEIGHT.name: round(float(weights.detach().mean()), 4)}
        return StepResult({name: float(value.detach()) for name, value in terms.items()}, extra)
