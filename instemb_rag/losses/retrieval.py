"""Retrieval loss on the pooled (DAAP) embeddings that search actually compares.

The distillation and multi-view losses shape the hidden states; this term asks the embedding
itself to rank: the query (text + instruction + look-ahead, pooled) must be closer to its own
output (embedded as a document is: no instruction, pooled) than to

    - the other outputs in the micro-batch (the same focus's other facets, the same claim's
      opposite evidence, when contrast records share a micro-batch),
    - document-side hard negatives (``negative_outputs``),

and, from the document's side, the output must be closer to its query than to the other queries
and to the same text under the wrong instruction (``negative_instruction``). Pairs whose outputs
are identical (CondaQA's "Yes."/"No.", one abstract cited for two claims) or whose queries are
identical are not each other's negatives: ``shared`` masks them out of the denominators. A memory
of earlier steps' documents (``memory``) adds negatives for the queries.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _info_nce(
    anchors: torch.Tensor, candidates: torch.Tensor, excluded: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Row i's positive is candidate i; ``excluded`` [N, C] removes candidates from row i's denominator."""
    logits = anchors @ candidates.T / temperature
    logits = logits.masked_fill(excluded, torch.finfo(logits.dtype).min)
    target = torch.arange(anchors.shape[0], device=anchors.device)
    return F.cross_entropy(logits, target)


def instruction_retrieval_loss(
    queries: torch.Tensor,
    outputs: torch.Tensor,
    shared: torch.Tensor,
    temperature: float = 0.05,
    negative_outputs: torch.Tensor | None = None,
    negative_queries: torch.Tensor | None = None,
    memory: torch.Tensor | None = None,
    memory_excluded: torch.Tensor | None = None,
) -> torch.Tensor:
    """Symmetric InfoNCE over N (query, output) pairs.

    queries, outputs: [N, d] pooled embeddings (cosine similarity is used).
    shared: [N, N] bool, True where records i and j share their output or their query (the
        diagonal is ignored): j's output is then not a negative for i's query, nor i's query for
        j's output.
    negative_outputs: [M, d] extra documents every query must rank below its own output.
    negative_queries: [K, d] queries under a wrong instruction that every output must rank below
        its own query.
    memory: [K, d] documents embedded at earlier steps (training/negative_memory.py): more
        negatives for every query, without gradient; ``memory_excluded`` [N, K] drops entry k from
        row n's denominator (the same output text or group)."""
    count, dim = queries.shape
    if outputs.shape != queries.shape or shared.shape != (count, count):
        raise ValueError(
            f"queries {tuple(queries.shape)}, outputs {tuple(outputs.shape)} and shared "
            f"{tuple(shared.shape)} must be [N, d], [N, d] and [N, N]"
        )
    q = F.normalize(queries.float(), dim=-1)
    d = F.normalize(outputs.float(), dim=-1)
    off_diagonal = shared & ~torch.eye(count, dtype=torch.bool, device=shared.device)

    def with_extra(base: torch.Tensor, extra: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        if extra is None or len(extra) == 0:
            return base, off_diagonal
        extra = F.normalize(extra.float(), dim=-1)
        if extra.shape[1] != dim:
            raise ValueError(f"hard negatives must be [M, {dim}]; got {tuple(extra.shape)}")
        keep = off_diagonal.new_zeros(count, len(extra))
        return torch.cat([base, extra]), torch.cat([off_diagonal, keep], dim=1)

    documents, document_mask = with_extra(d, negative_outputs)
    if memory is not None and len(memory):
        if memory_excluded is None or memory_excluded.shape != (count, len(memory)):
            raise ValueError(f"memory_excluded must be [{count}, {len(memory)}] alongside a memory of {len(memory)}")
        documents = torch.cat([documents, F.normalize(memory.detach().float(), dim=-1)])
        document_mask = torch.cat([document_mask, memory_excluded], dim=1)
    query_side, query_mask = with_extra(q, negative_queries)
    return 0.5 * (
        _info_nce(q, documents, document_mask, temperature) + _info_nce(d, query_side, query_mask, temperature)
    )
