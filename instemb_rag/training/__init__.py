"""Distillation training: records, builders, arguments, teacher cache, trainer, LoRA helpers.

Import the pieces from their modules (``instemb_rag.training.trainer.train`` etc.); this
package file stays light so that reading records does not import torch.
"""
