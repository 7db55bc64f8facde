"""L learnable look-ahead vectors appended to every input through ``inputs_embeds``.

They never enter the vocabulary, so the tokenizer and the LM head stay untouched.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

DEFAULT_INIT_TEXT = "In short, the answer to this is about"
_FILE = "lookahead.safetensors"


class LookAheadTokens(nn.Module):
    def __init__(self, vectors: torch.Tensor):
        super().__init__()
        self.vectors = nn.Parameter(vectors.detach().clone())

    @property
    def length(self) -> int:
        return self.vectors.shape[0]

    @classmethod
    def from_token_embeddings(cls, embedding: nn.Embedding, token_ids: list[int], length: int) -> LookAheadTokens:
        """Start each vector at a real token's embedding (cycled), so an untrained encoder
        already sees plausible answer-start positions rather than noise."""
        if length == 0:
            return cls(torch.zeros(0, embedding.embedding_dim))
        if not token_ids:
            raise ValueError("look-ahead initialisation needs at least one token id")
        ids = torch.tensor([token_ids[i % len(token_ids)] for i in range(length)])
        with torch.no_grad():
            vectors = embedding.weight[ids].float()
        return cls(vectors)

    def get_config_dict(self) -> dict:
        return {"length": self.length, "dim": int(self.vectors.shape[1])}

    def save(self, folder: Path) -> None:
        save_file({"vectors": self.vectors.detach().float().cpu().contiguous()}, str(Path(folder) / _FILE))

    @classmethod
    def load(cls, folder: Path) -> LookAheadTokens:
        return cls(load_file(str(Path(folder) / _FILE))["vectors"])
