"""Fast paths that give the same embeddings as the plain encoder with less compute."""

from .batch_plan import CudaOptions, cuda_options, set_cuda_options
from .shared_prefix import encode_instructions

__all__ = ["CudaOptions", "cuda_options", "encode_instructions", "set_cuda_options"]
