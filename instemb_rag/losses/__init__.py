"""Training losses: look-ahead distillation (MSE / KL) and the multi-view supervised contrastive loss."""

from .contrastive import multiview_supcon_loss
from .distillation import kl_distillation_loss, mse_distillation_loss

__all__ = ["kl_distillation_loss", "mse_distillation_loss", "multiview_supcon_loss"]
