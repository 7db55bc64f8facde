"""The two-tower objective (``TwoTowerObjective``): the query LLM of a two-tower model, trained in
the one trainer loop (trainer.py).

A run (``two_tower.sentence_encoder`` set in the config; objectives.py selects this objective):

1. embeds every passage of the items file and every query's "instruction + query" once with the
   frozen document sentence encoder, cached on disk (training/cached_vectors.py); documents are never read
   by the LLM;
2. loads the student (the starting LLM folder's LoRA goes on training live), opens its top K
   layers and fills the frozen-prefix cache with the queries (tens of tokens each);
3. attaches a projection head into the document space, at zero: the first step's query
   embedding is exactly the document sentence encoder's own vector of "instruction + query" (the anchor);
4. each step runs the top K layers on the cached queries, adds the head's correction to the
   anchors, and ranks each query's positive passage above its group's other passages and a
   sample of the bank (losses/two_tower.py); the queries come from the encoder's own query
   route (``route_queries``), so what a step ranks is what ``encode_queries`` embeds.

The checkpoints are anchored two-tower encoders (encoder/composed/: TwoTowerEncoder): what
``encode_queries`` computes at inference is what the step ranked.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from ...encoder.composed.encoder import TwoTowerEncoder
from ...encoder.modules.projection import Projection
from ...encoder.modules.sentence_encoder import SentenceEncoder
from ...hashing import file_sha256
from ...losses.two_tower import bank_infonce, correction_norm
from ...paths import instemb_home
from ..batch_order import BatchOrder
from ..cached_vectors import load_data
from ..common_args import RunConfig
from ..objective import Objective, Prepared, StepResult, weighted_sum
from ..prefix_cache import PrefixCache, input_key, pooled_embeddings
from ..state import latest_checkpoint
from ..student import load_student, make_trainable, optimizer_with_head

__all__ = ["QueryTowerObjective", "TwoTowerObjective"]


class TwoTowerObjective(Objective):
    name = "two_tower"
    logged_lr_group = 0

    @staticmethod
    def term_weights(config: RunConfig) -> dict[str, float]:
        q = config.two_tower
        return {"infonce": q.infonce_weight, "anchor": q.anchor_weight}

    def prepare(self) -> Prepared:
        config, device, log = self.config, self.device, self.log
        t, q, m = config.training, config.two_tower, config.model
        sentence_encoder = SentenceEncoder.load(
            SentenceEncoder.recorded_reference(q.sentence_encoder), device=str(device)
        )
        data = load_data(q.texts_file, q.max_queries, sentence_encoder, q.embedding_dir, log)
        encoder = load_student(config, device)
        parts = make_trainable(encoder, config)
        encoder.eval()  # no dropout layers
        root = Path(q.prefix_cache_dir) if q.prefix_cache_dir else instemb_home() / "prefix_cache"
        cache = PrefixCache(root, encoder, m.trainable_top_layers, torch.float16)
        started = time.perf_counter()
        cache.build([item.student_input for item in data.queries], log=log)
        log(f"prefix cache ready ({len(cache.index)} inputs, {time.perf_counter() - started:.0f} s this run)")
        lengths = [cache.index[input_key(*item.student_input)][2] for item in data.queries]
        order = BatchOrder.items(data.queries, lengths, t.batch_size, t.seed)
        head = Projection(encoder.hidden_size, sentence_encoder.dimension).to(device)
        if not (t.resume and latest_checkpoint(Path(t.output_dir)) is not None):
            with torch.no_grad():  # a zero correction: the run starts at the anchor
                head.linear.weight.zero_()
                head.linear.bias.zero_()
        encoder = TwoTowerEncoder(encoder.with_projection(head), sentence_encoder, anchored=True)
        parts.named.update({f"projection.{name}": p for name, p in head.named_parameters()})
        optimizer, scheduler = optimizer_with_head(parts, head, t, q.head_learning_rate)
        data_info = {
            "texts_file": str(q.texts_file),
            "data_sha256": file_sha256(q.texts_file),
            "queries": len(data.queries),
            "passages": len(data.passages),
            "seed": t.seed,
            "batches_per_epoch": order.per_epoch,
            "sentence_encoder": sentence_encoder.get_config_dict(),
        }
        run_info = {"device": str(device), "prefix_cache": str(cache.folder), **data_info}
        self.encoder, self.cache, self.data, self.order, self.head = encoder, cache, data, order, head
        return Prepared(encoder, parts, optimizer, scheduler, data_info, run_info)

    def resumed(self, start_step: int) -> None:
        steps, per_epoch = self.config.training.max_steps, self.order.per_epoch
        self.log(f"training steps {start_step}..{steps} ({steps / per_epoch:.1f} epochs of {per_epoch} batches)")

    def step(self, step: int) -> StepResult:
        q, device = self.config.two_tower, self.encoder.device
        batch = self.order.step(step)
        inputs = [self.data.queries[i].student_input for i in batch]
        pooled = pooled_embeddings(self.encoder.query_llm, self.cache, inputs)
        queries, corrections = self.encoder.route_queries(pooled, self.data.anchors[batch].to(device))
        rows, positives = self.data.candidates(batch, q.bank_negatives, f"{self.config.training.seed}:bank:{step}")
        terms = {
            "infonce": bank_infonce(
                queries, self.data.passages[rows].to(device), torch.tensor(positives, device=device), q.temperature
            ),
            "anchor": correction_norm(corrections),
        }
        weights = self.term_weights(self.config)
        terms["loss"] = weighted_sum({name: value for name, value in terms.items() if weights[name] > 0}, weights)
        terms["loss"].backward()
        return StepResult({name: float(value.detach()) for name, value in terms.items()}, {"batch": len(batch)})


QueryTowerObjective = TwoTowerObjective  # alias kept for compatibility (issue 68 names round 2)
