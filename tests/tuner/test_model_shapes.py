"""The model-config reader and the shape list of a forward pass, on the shipped configs and bad ones."""

import json

import pytest

from rooftune.candidates import AttentionShape, GemmShape
from rooftune.tuner.llm.shapes import (
    ModelConfigError,
    load_model_config,
    model_config_from_dict,
    model_shapes,
    shipped_models,
)

LLAMA = {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "vocab_size": 128256}


def test_the_shipped_configs_hold_the_published_values():
    assert {"llama-3-8b", "qwen2.5-7b"} <= set(shipped_models())
    llama = load_model_config("Llama-3-8B")  # names are case-insensitive
    assert (llama.hidden_size, llama.intermediate_size, llama.num_layers, llama.heads, llama.kv_heads,
            llama.head_dim, llama.vocab_size) == (4096, 14336, 32, 32, 8, 128, 128256)
    qwen = load_model_config("qwen2.5-7b")
    assert (qwen.hidden_size, qwen.intermediate_size, qwen.num_layers, qwen.heads, qwen.kv_heads,
            qwen.head_dim, qwen.vocab_size) == (3584, 18944, 28, 28, 4, 128, 152064)


def test_a_file_or_a_model_folder(tmp_path):
    (tmp_path / "my-model").mkdir()
    (tmp_path / "my-model" / "config.json").write_text(json.dumps(LLAMA))
    assert load_model_config(str(tmp_path / "my-model")).name == "my-model"
    (tmp_path / "other.json").write_text(json.dumps({"text_config": LLAMA}))  # a multimodal config's text model
    assert load_model_config(str(tmp_path / "other.json")) == model_config_from_dict(LLAMA, "other")


def test_defaults_kv_heads_and_head_dim():
    plain = model_config_from_dict({k: v for k, v in LLAMA.items() if k != "num_key_value_heads"}, "m")
    assert plain.kv_heads == plain.heads == 32 and plain.head_dim == 128
    given = model_config_from_dict({**LLAMA, "hidden_size": 5120, "head_dim": 128}, "nemo-like")
    assert given.head_dim == 128 and given.hidden_size == 5120
    assert model_config_from_dict({**LLAMA, "head_dim": None}, "m").head_dim == 128  # Mistral writes null


@pytest.mark.parametrize("change, words", [
    ({"hidden_size": None}, "missing field 'hidden_size'"),
    ({"vocab_size": "big"}, "vocab_size must be a positive integer"),
    ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive integer"),
    ({"intermediate_size": True}, "intermediate_size must be a positive integer"),
    ({"num_key_value_heads": 5}, "num_key_value_heads 5 must divide num_attention_heads 32"),
    ({"hidden_size": 4100}, "not a multiple of num_attention_heads"),
    ({"tie_word_embeddings": "yes"}, "tie_word_embeddings must be true or false"),
])
def test_bad_fields_are_named(change, words):
    data = {k: v for k, v in {**LLAMA, **change}.items() if v is not None}
    with pytest.raises(ModelConfigError, match=words):
        model_config_from_dict(data, "bad", "bad.json")


def test_unreadable_or_unknown_configs(tmp_path):
    with pytest.raises(ModelConfigError, match="not a shipped model config.*llama-3-8b"):
        load_model_config("gpt-17")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ModelConfigError, match="not a readable JSON config"):
        load_model_config(str(tmp_path / "broken.json"))
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(ModelConfigError, match="expected a JSON object"):
        load_model_config(str(tmp_path / "list.json"))


def test_the_forward_pass_of_llama():
    config = load_model_config("llama-3-8b")
    layers = model_shapes(config, [8, 4096], seq=2048)
    assert [lt.layer for lt in layers[:6]] == ["qkv", "attention", "o", "gate_up", "down", "lm_head"]
    assert len(layers) == 12 and {lt.tokens for lt in layers} == {8, 4096}
    by = {(lt.layer, lt.tokens): lt for lt in layers}
    assert by["qkv", 8].shape == GemmShape(8, (32 + 2 * 8) * 128, 4096, layout="nk", dtype="bf16")  # fused, GQA
    assert by["gate_up", 8].shape == GemmShape(8, 2 * 14336, 4096, layout="nk")
    assert by["down", 8].shape == GemmShape(8, 4096, 14336, layout="nk")
    assert by["o", 8].shape == GemmShape(8, 4096, 4096, layout="nk")
    assert by["lm_head", 8].shape == GemmShape(8, 128256, 4096, layout="nk")
    assert by["lm_head", 8].count == 1 and all(lt.count == 32 for lt in layers if lt.layer != "lm_head")
    # prefill: M tokens <= seq are one sequence; more are M / seq sequences of seq
    assert by["attention", 8].shape == AttentionShape(1, 32, 8, 128, causal=True, kv_heads=8)
    assert by["attention", 4096].shape == AttentionShape(2, 32, 2048, 128, causal=True, kv_heads=8)


def test_qwen_gqa_and_an_explicit_head_dim():
    qwen = model_shapes(load_model_config("qwen2.5-7b"), [512])
    by = {lt.layer: lt.shape for lt in qwen}
    assert by["qkv"].n == (28 + 2 * 4) * 128 == 4608 and by["attention"].kv_heads == 4
    nemo = model_config_from_dict({**LLAMA, "hidden_size": 5120, "head_dim": 128}, "nemo-like")
    by = {lt.layer: lt.shape for lt in model_shapes(nemo, [64])}
    assert (by["o"].n, by["o"].k) == (5120, 32 * 128) and by["qkv"].k == 5120


def test_shapes_the_kernels_cannot_take():
    with pytest.raises(ModelConfigError, match="not whole sequences of 2048"):
        model_shapes(load_model_config("llama-3-8b"), [3000], seq=2048)
    odd = model_config_from_dict({**LLAMA, "hidden_size": 2560, "num_attention_heads": 32}, "head-dim-80")
    with pytest.raises(ModelConfigError, match="head-dim-80 at 8 tokens: attention head_dim"):
        model_shapes(odd, [8])
