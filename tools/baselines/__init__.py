"""Baselines that InstEmb is compared against (kept runnable for the benchmarks)."""

from .generate_then_embed import GenerateThenEmbed, GenerateThenEmbedArgs

__all__ = ["GenerateThenEmbed", "GenerateThenEmbedArgs"]
