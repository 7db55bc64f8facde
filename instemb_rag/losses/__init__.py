"""Training losses: look-ahead distillation (MSE / KL), the multi-view supervised contrastive loss,
and the retrieval loss on pooled embeddings."""

from .contrastive import multiview_supcon_loss
from .distillation import kl_distillation_loss, mse_distillation_loss
from .retrieval import instruction_retrieval_loss

__all__ = ["instruction_retrieval_loss", "kl_distillation_loss", "mse_distillation_loss", "multiview_supcon_loss"]
