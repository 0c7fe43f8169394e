"""A transformer's kernel shapes from its Hugging Face style config.json: every GEMM and causal attention
of one prefill forward pass, per token count, with how many times each runs.

What a forward pass of M tokens runs, per decoder layer (Llama, Qwen2, Mistral: pre-norm, SwiGLU MLP,
grouped-query attention), all bf16 with nn.Linear weights (B stored [N, K], layout 'nk'):
- qkv: the fused q, k and v projections, N = (heads + 2·kv_heads)·head_dim, K = hidden;
- attention: causal, over prefill sequences of `seq` tokens (below);
- o: N = hidden, K = heads·head_dim;
- gate_up: the fused gate and up projections, N = 2·intermediate, K = hidden;
- down: N = hidden, K = intermediate;
and once per forward, lm_head: N = vocab, K = hidden (over all M tokens, as in a scoring pass; a
serving engine computes logits for each sequence's last token only). Norms, rotary embeddings, the
activation and biases are not kernels rooftune tunes and are left out.

Attention of M tokens: the tokens are prefill sequences of `seq` tokens each: one sequence of M
tokens when M <= seq, else M / seq sequences of `seq` (M must then be a multiple of seq). There is no
KV cache: a decode step's attention (a few queries against a long cache) is not modelled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rooftune.candidates import AttentionShape, GemmShape, Shape
from rooftune.candidates.shapes import ShapeError
from rooftune.environment import expand_home
from rooftune.inputs import check_input, read_text

DTYPE = "bf16"


class ModelConfigError(ValueError):
    """A model config that cannot be read or does not describe a model rooftune can list shapes for."""


@dataclass(frozen=True)
class ModelConfig:
    """The fields of a decoder-only transformer that fix its kernel shapes."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool = False  # the lm_head GEMM is the same either way


@dataclass(frozen=True)
class LayerShape:
    """One kernel of the forward pass of `tokens` tokens: which layer, its shape, runs per forward."""

    layer: str
    tokens: int
    shape: Shape
    count: int


def shipped_models() -> dict[str, Path]:
    """Shipped config name -> its file (tuner/llm/configs/*.json)."""
    folder = resources.files("rooftune.tuner.llm") / "configs"
    return {Path(f.name).stem: Path(str(f)) for f in folder.iterdir() if f.name.endswith(".json")}


def load_model_config(path_or_name: str) -> ModelConfig:
    """A config.json file, a folder holding one (a downloaded model), or a shipped name
    (case-insensitive: see `shipped_models`). Raises ModelConfigError, SettingError (a `~user` of no home)."""
    path = check_input(expand_home(str(path_or_name), "--config"), folder=True)  # a pipe or device: never opened
    if path.is_dir():
        path = path / "config.json"
    shipped = shipped_models()
    if not path.exists():
        name = str(path_or_name).lower()
        if name not in shipped:
            raise ModelConfigError(f"{path_or_name}: no such file, and not a shipped model config "
                                   f"(shipped: {', '.join(sorted(shipped))})")
        path = shipped[name]
    try:
        data = json.loads(read_text(check_input(path)))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelConfigError(f"{path}: not a readable JSON config ({exc})") from exc
    name = path.parent.name if path.name == "config.json" else path.stem
    return model_config_from_dict(data, name, str(path))


def _positive_int(data: dict, field: str, source: str, default: int | None = None) -> int:
    value = data.get(field)
    if value is None and default is not None:
        return default
    if value is None:
        raise ModelConfigError(f"{source}: missing field {field!r}")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ModelConfigError(f"{source}: {field} must be a positive integer, got {value!r}")
    return value


def model_config_from_dict(data: dict, name: str, source: str = "config") -> ModelConfig:
    """Read the Llama / Qwen2 / Mistral field names (a multimodal config's `text_config` where the top
    level has no hidden_size). num_key_value_heads defaults to the heads (no grouping), head_dim to
    hidden_size / heads. Raises ModelConfigError naming the field."""
    if not isinstance(data, dict):
        raise ModelConfigError(f"{source}: expected a JSON object, got {type(data).__name__}")
    if "hidden_size" not in data and isinstance(data.get("text_config"), dict):
        data = data["text_config"]
    hidden = _positive_int(data, "hidden_size", source)
    heads = _positive_int(data, "num_attention_heads", source)
    if data.get("head_dim") is None and hidden % heads:
        raise ModelConfigError(f"{source}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}; "
                               f"give head_dim")
    head_dim = _positive_int(data, "head_dim", source, default=hidden // heads)
    kv_heads = _positive_int(data, "num_key_value_heads", source, default=heads)
    if heads % kv_heads:
        raise ModelConfigError(f"{source}: num_key_value_heads {kv_heads} must divide num_attention_heads {heads}")
    tie = data.get("tie_word_embeddings", False)
    if not isinstance(tie, bool):
        raise ModelConfigError(f"{source}: tie_word_embeddings must be true or false, got {tie!r}")
    return ModelConfig(name, hidden, _positive_int(data, "intermediate_size", source),
                       _positive_int(data, "num_hidden_layers", source), heads, kv_heads, head_dim,
                       _positive_int(data, "vocab_size", source), tie)


def prefill_attention(config: ModelConfig, tokens: int, seq: int) -> AttentionShape:
    """The causal attention of `tokens` tokens as prefill sequences of at most `seq` tokens (module doc)."""
    if tokens > seq and tokens % seq:
        raise ModelConfigError(f"{tokens} tokens are not whole sequences of {seq}: give token counts up to "
                               f"--seq or multiples of it")
    batch, length = (1, tokens) if tokens <= seq else (tokens // seq, seq)
    return AttentionShape(batch, config.heads, length, config.head_dim, causal=True, dtype=DTYPE,
                          kv_heads=config.kv_heads)


def model_shapes(config: ModelConfig, tokens: list[int], seq: int = 2048) -> list[LayerShape]:
    """Every kernel of one forward pass for each token count in `tokens` (module doc), in layer order.
    Raises ModelConfigError (a shape rooftune's kernels cannot take, a token count that is not whole
    sequences)."""
    c = config
    if seq < 1:
        raise ModelConfigError(f"seq must be at least 1, got {seq}")
    out = []
    for m in tokens:
        def gemm(layer: str, n: int, k: int, count: int = c.num_layers) -> LayerShape:
            return LayerShape(layer, m, GemmShape(m, n, k, layout="nk", dtype=DTYPE), count)

        try:
            out += [gemm("qkv", (c.heads + 2 * c.kv_heads) * c.head_dim, c.hidden_size),
                    LayerShape("attention", m, prefill_attention(c, m, seq), c.num_layers),
                    gemm("o", c.hidden_size, c.heads * c.head_dim),
                    gemm("gate_up", 2 * c.intermediate_size, c.hidden_size),
                    gemm("down", c.hidden_size, c.intermediate_size),
                    gemm("lm_head", c.vocab_size, c.hidden_size, count=1)]
        except ShapeError as exc:
            raise ModelConfigError(f"{c.name} at {m} tokens: {exc}") from exc
    return out
