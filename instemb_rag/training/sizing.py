"""``instemb-rag train --dry-run``: parameter counts, trainable share and memory per device,
from the model's ``config.json`` alone (no weights are loaded, so an 8B model is sized on a laptop).

The counts are exact for Llama-style decoders (Llama, SmolLM2, Mistral, Qwen2: embeddings,
attention with grouped KV heads, SwiGLU MLP, RMSNorms, optional biases, tied or untied head);
tests check them against the instantiated tiny model, with and without LoRA.

Memory per device, in bytes, for the trainer as it runs (float32 master weights, bf16 autocast
on CUDA, AdamW):

    weights      every parameter in float32 (FSDP: the frozen weights of the layers, and untied
                 embeddings and head, sharded over the ranks, plus two layers gathered in bf16
                 for compute; the trainable parameters and the norms stay replicated)
    gradients    float32, trainable parameters only (replicated in both modes)
    optimizer    AdamW's two float32 moments of the trainable parameters (replicated)
    activations  what backward keeps of the layers it runs through (all of them while the
                 look-ahead vectors train, else the top trainable layers): about (8 d + 4 ffn)
                 values a token a layer, for the rank's share of the micro-batch and every
                 forward pass of a micro-batch (query, output, dropout view); with gradient
                 checkpointing one d-vector a token a layer plus one layer's full set
    teacher      a frozen float32 copy when training.llm_target_cache is false (else 0)

It leaves out the CUDA context and allocator slack (add ~1-2 GB) and the KV-free attention
kernels' workspace; treat it as a lower bound with a margin of ~15 %.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from ..errors import InstEmbError
from .args import TrainConfig

GIB = 1024**3

# config.json fields of backbones a dry run may size without their folder at hand.
KNOWN_CONFIGS: dict[str, dict] = {
    "smollm2-135m-instruct": {  # the default backbone (HuggingFaceTB/SmolLM2-135M-Instruct)
        "vocab_size": 49152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "tie_word_embeddings": True,
    },
    "meta-llama/Meta-Llama-3-8B-Instruct": {
        "vocab_size": 128256,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "tie_word_embeddings": False,
    },
}


@dataclass(frozen=True)
class ModelShape:
    vocab: int
    hidden: int
    ffn: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool
    attention_bias: bool = False
    mlp_bias: bool = False

    @classmethod
    def from_config(cls, raw: dict) -> ModelShape:
        try:
            heads = int(raw["num_attention_heads"])
            hidden = int(raw["hidden_size"])
            return cls(
                int(raw["vocab_size"]),
                hidden,
                int(raw["intermediate_size"]),
                int(raw["num_hidden_layers"]),
                heads,
                int(raw.get("num_key_value_heads") or heads),
                int(raw.get("head_dim") or hidden // heads),
                bool(raw.get("tie_word_embeddings", False)),
                bool(raw.get("attention_bias", False)),
                bool(raw.get("mlp_bias", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InstEmbError(
                f"The model config lacks a Llama-style field ({exc}); --dry-run sizes Llama-style decoders only."
            ) from exc

    def module_shapes(self) -> dict[str, tuple[int, int, bool]]:
        """(in, out, bias) of each linear module of one decoder layer, by peft target name."""
        q_out, kv_out = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return {
            "q_proj": (self.hidden, q_out, self.attention_bias),
            "k_proj": (self.hidden, kv_out, self.attention_bias),
            "v_proj": (self.hidden, kv_out, self.attention_bias),
            "o_proj": (q_out, self.hidden, self.attention_bias),
            "gate_proj": (self.hidden, self.ffn, self.mlp_bias),
            "up_proj": (self.hidden, self.ffn, self.mlp_bias),
            "down_proj": (self.ffn, self.hidden, self.mlp_bias),
        }

    @property
    def layer_params(self) -> int:
        linear = sum(i * o + (o if bias else 0) for i, o, bias in self.module_shapes().values())
        return linear + 2 * self.hidden  # + the two RMSNorms

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def total_params(self) -> int:
        return self.embedding_params + self.layers * self.layer_params + self.hidden  # + final norm

    def lora_params(self, rank: int, targets: list[str]) -> int:
        """LoRA A (r x in) and B (out x r) of every targeted module of one layer."""
        shapes = self.module_shapes()
        return sum(rank * (shapes[name][0] + shapes[name][1]) for name in targets if name in shapes)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InstEmbError(f"Cannot read the model config {path}: {exc}") from exc


def model_config_dict(reference: str | None) -> tuple[str, dict]:
    """(label, config.json fields) of a model folder, an InstEmb LLM folder (its base) or a known name."""
    from ..encoder.backbone import DEFAULT_BACKBONE
    from ..encoder.llm_folder import CONFIG_FILE

    reference = reference or DEFAULT_BACKBONE
    folder = Path(reference).expanduser()
    if (folder / CONFIG_FILE).is_file():  # an InstEmb LLM folder: size its base model
        return model_config_dict(_read_json(folder / CONFIG_FILE)["base_model"])
    if (folder / "config.json").is_file():
        return str(folder), _read_json(folder / "config.json")
    for name, known in KNOWN_CONFIGS.items():  # a known model, also before its folder is downloaded
        if reference == name or folder.name == name.rsplit("/", 1)[-1]:
            return f"{name} (built-in config)", known
    raise InstEmbError(f"--dry-run needs {reference}/config.json (a model folder) or one of {sorted(KNOWN_CONFIGS)}.")


@dataclass
class ParameterCounts:
    total: int
    trainable: int
    trainable_in_layers: int  # the part FSDP shards with the decoder layers
    trained_layers: int  # decoder layers with trainable weights (full or LoRA)
    backward_layers: int  # decoder layers backward runs through

    @property
    def share(self) -> float:
        return self.trainable / self.total


def count_parameters(shape: ModelShape, config: TrainConfig) -> ParameterCounts:
    m = config.model
    trained = trained_layer_count(shape.layers, m.trainable_top_layers, m.lora_all_layers, m.lora_rank)
    if m.lora_rank > 0:
        in_layers = trained * shape.lora_params(m.lora_rank, list(m.lora_target_modules))
        total = shape.total_params + in_layers  # LoRA adds its matrices to the model
    else:
        in_layers = trained * shape.layer_params
        total = shape.total_params
    trainable = (
        in_layers
        + (shape.hidden if m.train_final_norm else 0)
        + (m.lookahead_length * shape.hidden if m.train_lookahead else 0)
    )
    backward = shape.layers if m.train_lookahead else trained
    return ParameterCounts(total, trainable, in_layers, trained, backward)


def trained_layer_count(layer_count: int, top_layers: int, lora_all_layers: bool, lora_rank: int) -> int:
    if lora_rank > 0 and lora_all_layers:
        return layer_count
    return min(top_layers, layer_count)


@dataclass
class MemoryEstimate:
    weights: float
    gradients: float
    optimizer: float
    activations: float
    teacher: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.teacher


def tokens_per_device(config: TrainConfig, world_size: int) -> int:
    """Tokens of the passes one rank runs per micro-batch (an upper bound: every text at max_length)."""
    t, m = config.training, config.model
    rows = math.ceil(t.batch_size / world_size)
    query = m.max_length  # the input is truncated so that the look-ahead slots fit in max_length
    passes = query
    if t.retrieval_weight > 0 or (t.contrastive_weight > 0 and "student_output" in t.views):
        passes += m.max_length  # the outputs, embedded as documents
    if t.contrastive_weight > 0 and "student_input_dropout" in t.views:
        passes += query - m.lookahead_length
    return rows * passes


def shardable_params(shape: ModelShape, counts: ParameterCounts) -> int:
    """What FSDP shards (parallel.shard_frozen_weights): every frozen weight of the decoder layers
    (LoRA layers' base weights included) and untied embeddings and head; norms stay replicated."""
    frozen = counts.total - counts.trainable
    replicated_norms = shape.layers * 2 * shape.hidden + shape.hidden
    tied_embeddings = shape.vocab * shape.hidden if shape.tied else 0
    return max(0, frozen - replicated_norms - tied_embeddings)


def estimate_memory(
    shape: ModelShape, counts: ParameterCounts, config: TrainConfig, world_size: int, parallel: str, cuda: bool = True
) -> MemoryEstimate:
    t = config.training
    act_bytes = 2 if (cuda and t.bf16) else 4
    weights = 4.0 * counts.total
    if parallel == "fsdp" and world_size > 1:
        sharded = shardable_params(shape, counts)
        gathered = 2 * (2 if (cuda and t.bf16) else 4) * shape.layer_params  # a layer in use + the next prefetched
        weights = 4.0 * (counts.total - sharded + sharded / world_size) + gathered
    tokens = tokens_per_device(config, world_size)
    per_token_layer = 8 * shape.hidden + 4 * shape.ffn
    if t.gradient_checkpointing:
        activations = act_bytes * tokens * (counts.backward_layers * shape.hidden + per_token_layer)
    else:
        activations = act_bytes * tokens * counts.backward_layers * per_token_layer
    if t.distill_loss == "kl":  # student and teacher logits at the look-ahead positions, float32
        activations += 3 * 4 * math.ceil(t.batch_size / world_size) * config.model.lookahead_length * shape.vocab
    teacher = 0.0 if t.llm_target_cache else 4.0 * shape.total_params
    # The trainable parameters are replicated in both modes: float32 gradients and AdamW's two moments.
    return MemoryEstimate(weights, 4.0 * counts.trainable, 8.0 * counts.trainable, activations, teacher)


def _gib(value: float) -> str:
    return f"{value / GIB:8.2f} GiB"


def dry_run_report(config: TrainConfig, world_size: int = 1) -> str:
    """What ``--dry-run`` prints: the model, parameter counts, and memory per device for DDP and FSDP."""
    from .continuation import starting_point  # a two-space folder: its documents' LLM

    label, raw = model_config_dict(starting_point(config.model))
    shape = ModelShape.from_config(raw)
    counts = count_parameters(shape, config)
    t, m = config.training, config.model
    lines = [
        f"model            {label}: {shape.layers} layers, d={shape.hidden}, ffn={shape.ffn}, vocab={shape.vocab}",
        f"parameters       {counts.total:,} total, {counts.trainable:,} trainable ({100 * counts.share:.3f} %)",
        f"trained layers   {counts.trained_layers} of {shape.layers} "
        f"({'LoRA rank ' + str(m.lora_rank) if m.lora_rank else 'full'}); backward runs through "
        f"{counts.backward_layers}",
        f"global batch     {t.batch_size} x {t.gradient_accumulation_steps} accumulation = "
        f"{t.batch_size * t.gradient_accumulation_steps} records a step over {world_size} rank(s) "
        f"({math.ceil(t.batch_size / world_size)} a rank a micro-batch, ~{tokens_per_device(config, world_size)} tokens)",
        f"settings         bf16={t.bf16} gradient_checkpointing={t.gradient_checkpointing} "
        f"llm_target_cache={t.llm_target_cache} distill_loss={t.distill_loss}",
        "",
        "memory per device (CUDA, bf16 autocast)    ddp          fsdp",
    ]
    ddp = estimate_memory(shape, counts, config, world_size, "ddp")
    fsdp = estimate_memory(shape, counts, config, world_size, "fsdp")
    for name in ("weights", "gradients", "optimizer", "activations", "teacher", "total"):
        lines.append(f"  {name:<38} {_gib(getattr(ddp, name))} {_gib(getattr(fsdp, name))}")
    lines.append("  (+ ~1-2 GiB CUDA context; FSDP equals DDP at world size 1)")
    return "\n".join(lines)
