#!/usr/bin/env python3
"""Writes random-weight Hugging Face checkpoints: tiny, deterministic test fixtures of each
architecture Tandem serves, and (with --size) realistic-size synthetic ones for benchmarks.

Usage:
  python3 tools/make_hf_fixtures.py OUT_DIR                  the fixtures below, into OUT_DIR/<name>/
  python3 tools/make_hf_fixtures.py OUT_DIR --only llama,qwen3moe-w8a8
  python3 tools/make_hf_fixtures.py OUT_DIR --size llama-1.5b [--quant w8a8] [--layers N]
  python3 tools/make_hf_fixtures.py OUT_DIR --size qwen3moe-30b-a3b [--quant w8a8] [--layers N]
  python3 tools/make_hf_fixtures.py --list

Each OUT_DIR/<name>/ holds what a real checkpoint holds: config.json (the architecture's
own fields, sorted as transformers writes them), generation_config.json (sampling
defaults, eos_token_id list), tokenizer.json + tokenizer_config.json (chat template
included), and the weights split into shards `model-0000N-of-0000M.safetensors` with
`model.safetensors.index.json` (metadata.total_size, weight_map), under the HF tensor names
and shapes: BF16, with F32 where the real checkpoints keep it (the router's
e_score_correction_bias, the DSA indexer's LayerNorm). NextN (MTP) blocks are the extra
layers num_hidden_layers.. with eh_proj, enorm, hnorm, shared_head.{norm,head} and
embed_tokens. Quantized variants store the same BF16 weights in another format
(tools/hf_fixture_quant.py): compressed-tensors W8A8 (`-w8a8`), msmodelslim W8A8 /
W8A8_DYNAMIC (`-msmodelslim-*`: quant_model_description.json, quant_model_weight_*
shards) and DeepSeek-V3's block-scaled FP8 (`-fp8`).

Tokenizers come from tools/hf_tokenizers.py `train_tokenizer(family, out_dir)` when it is
there, else from the stand-in tools/hf_fixture_tokenizer.py; config.json's vocab_size is
the tokenizer's size rounded up to 64 (Gemma 3: the size itself), and the embedding (and
LM head) has that many rows.

Every byte is a function of the fixture's seed and the tensor's name (no timestamps), so
runs are identical. --size checkpoints are written shard by shard (4 GiB shards), so memory
stays near one shard; they are for benchmarks only (tens of GB), never for CI.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
from safetensors.numpy import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_fixture_quant import BF16, CompressedW8A8, Float, Fp8Block, ModelSlim, Tensor  # noqa: E402

try:
    from hf_tokenizers import train_tokenizer  # noqa: E402
except ImportError:
    from hf_fixture_tokenizer import train_tokenizer  # noqa: E402

TRANSFORMERS_VERSION = "4.57.6"

# Per tokenizer family: special tokens by text (ids are looked up in tokenizer.json) and
# generation_config.json's sampling defaults (the published checkpoints' values).
FAMILY_TOKENS: dict[str, dict] = {
    "llama3": dict(bos="<|begin_of_text|>", eos=["<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"], pad=None,
                   sampling=dict(temperature=0.6, top_p=0.9, top_k=50)),
    "qwen2": dict(bos="<|endoftext|>", eos=["<|im_end|>", "<|endoftext|>"], pad="<|endoftext|>",
                  sampling=dict(temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05)),
    "qwen3": dict(bos="<|endoftext|>", eos=["<|im_end|>", "<|endoftext|>"], pad="<|endoftext|>",
                  sampling=dict(temperature=0.6, top_p=0.95, top_k=20)),
    "gemma3": dict(bos="<bos>", eos=["<eos>", "<end_of_turn>"], pad="<pad>",
                   sampling=dict(temperature=1.0, top_p=0.95, top_k=64)),
    "glm45": dict(bos=None, eos=["<|endoftext|>", "<|user|>", "<|observation|>"], pad="<|endoftext|>",
                  sampling=dict(temperature=0.6, top_p=0.95, top_k=40)),
    "glm5": dict(bos=None, eos=["<|endoftext|>", "<|user|>", "<|observation|>"], pad="<|endoftext|>",
                 sampling=dict(temperature=1.0, top_p=0.95, top_k=40)),
    "deepseek3": dict(bos="<｜begin▁of▁sentence｜>", eos=["<｜end▁of▁sentence｜>"], pad="<｜▁pad▁｜>",
                      sampling=dict(temperature=0.6, top_p=0.95, top_k=50)),
}


@dataclass
class Dims:
    """A model's shape. MoE fields apply when n_experts > 0, MLA fields when kv_lora > 0."""
    hidden: int = 64
    layers: int = 3
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    inter: int = 256
    n_experts: int = 0
    top_k: int = 0
    moe_inter: int = 0
    n_shared: int = 0
    dense_lead: int = 0
    nextn: int = 0
    q_lora: int = 0          # 0: a plain q_proj
    kv_lora: int = 0
    nope: int = 0
    rope: int = 0
    v_head: int = 0
    index_heads: int = 0     # DSA lightning indexer
    index_dim: int = 0
    index_topk: int = 0
    tied: bool = False
    vocab: int = 0           # 0: the tokenizer's size rounded up to 64


TINY_DENSE = Dims()
TINY_MOE = Dims(hidden=128, head_dim=32, n_experts=8, top_k=2, moe_inter=64)
TINY_MLA = replace(TINY_MOE, kv_heads=4, kv_lora=64, nope=32, rope=16, v_head=32, dense_lead=1)


# ---------------------------------------------------------------------------------------
# Tensors of each block kind, in the order the HF modules declare them.
# ---------------------------------------------------------------------------------------

def gqa_attention(p: str, d: Dims, bias: bool = False, qk_norm: bool = False, norm_role: str = "norm") -> list[Tensor]:
    q, kv = d.heads * d.head_dim, d.kv_heads * d.head_dim
    out = [Tensor(p + "self_attn.q_proj.weight", (q, d.hidden), "linear"),
           Tensor(p + "self_attn.k_proj.weight", (kv, d.hidden), "linear"),
           Tensor(p + "self_attn.v_proj.weight", (kv, d.hidden), "linear"),
           Tensor(p + "self_attn.o_proj.weight", (d.hidden, q), "linear_out")]
    if bias:
        out[3:3] = [Tensor(p + f"self_attn.{x}_proj.bias", (n,), "bias") for x, n in (("q", q), ("k", kv), ("v", kv))]
    if qk_norm:
        out += [Tensor(p + "self_attn.q_norm.weight", (d.head_dim,), norm_role),
                Tensor(p + "self_attn.k_norm.weight", (d.head_dim,), norm_role)]
    return out


def mla_attention(p: str, d: Dims) -> list[Tensor]:
    h, qk = d.heads, d.nope + d.rope
    if d.q_lora:
        out = [Tensor(p + "self_attn.q_a_proj.weight", (d.q_lora, d.hidden), "linear"),
               Tensor(p + "self_attn.q_a_layernorm.weight", (d.q_lora,), "norm"),
               Tensor(p + "self_attn.q_b_proj.weight", (h * qk, d.q_lora), "linear")]
    else:
        out = [Tensor(p + "self_attn.q_proj.weight", (h * qk, d.hidden), "linear")]
    return out + [
        Tensor(p + "self_attn.kv_a_proj_with_mqa.weight", (d.kv_lora + d.rope, d.hidden), "linear"),
        Tensor(p + "self_attn.kv_a_layernorm.weight", (d.kv_lora,), "norm"),
        Tensor(p + "self_attn.kv_b_proj.weight", (h * (d.nope + d.v_head), d.kv_lora), "linear"),
        Tensor(p + "self_attn.o_proj.weight", (d.hidden, h * d.v_head), "linear_out")]


def indexer(p: str, d: Dims) -> list[Tensor]:
    """DeepSeek-V3.2 / GLM-5 lightning indexer (its LayerNorm in F32, as trained)."""
    x = p + "self_attn.indexer."
    return [Tensor(x + "wq_b.weight", (d.index_heads * d.index_dim, d.q_lora), "linear"),
            Tensor(x + "wk.weight", (d.index_dim, d.hidden), "linear"),
            Tensor(x + "k_norm.weight", (d.index_dim,), "ln_weight", f32=True),
            Tensor(x + "k_norm.bias", (d.index_dim,), "ln_bias", f32=True),
            Tensor(x + "weights_proj.weight", (d.index_heads, d.hidden), "linear")]


def mlp(p: str, d: Dims, width: int) -> list[Tensor]:
    return [Tensor(p + "gate_proj.weight", (width, d.hidden), "linear"),
            Tensor(p + "up_proj.weight", (width, d.hidden), "linear"),
            Tensor(p + "down_proj.weight", (d.hidden, width), "linear_out")]


def moe(p: str, d: Dims, score_bias: bool) -> list[Tensor]:
    out = [Tensor(p + "mlp.gate.weight", (d.n_experts, d.hidden), "router")]
    if score_bias:
        out.append(Tensor(p + "mlp.gate.e_score_correction_bias", (d.n_experts,), "score_bias", f32=True))
    for e in range(d.n_experts):
        out += mlp(p + f"mlp.experts.{e}.", d, d.moe_inter)
    if d.n_shared:
        out += mlp(p + "mlp.shared_experts.", d, d.moe_inter * d.n_shared)
    return out


def nextn_head(p: str, d: Dims, vocab: int) -> list[Tensor]:
    return [Tensor(p + "embed_tokens.weight", (vocab, d.hidden), "embed"),
            Tensor(p + "enorm.weight", (d.hidden,), "norm"),
            Tensor(p + "hnorm.weight", (d.hidden,), "norm"),
            Tensor(p + "eh_proj.weight", (d.hidden, 2 * d.hidden), "nextn_proj"),
            Tensor(p + "shared_head.norm.weight", (d.hidden,), "norm"),
            Tensor(p + "shared_head.head.weight", (vocab, d.hidden), "lm_head")]


def decoder(d: Dims, vocab: int, layer: Callable[[str, int], list[Tensor]], norm_role: str = "norm") -> list[Tensor]:
    """Embedding, the layers (NextN ones last, with their own heads), final norm, LM head."""
    out = [Tensor("model.embed_tokens.weight", (vocab, d.hidden), "embed_tied" if d.tied else "embed")]
    for i in range(d.layers + d.nextn):
        p = f"model.layers.{i}."
        out += layer(p, i)
        if i >= d.layers:
            out += nextn_head(p, d, vocab)
    out.append(Tensor("model.norm.weight", (d.hidden,), norm_role))
    if not d.tied:
        out.append(Tensor("lm_head.weight", (vocab, d.hidden), "lm_head"))
    return out


def norms(p: str, d: Dims, *names: str, role: str = "norm") -> list[Tensor]:
    return [Tensor(p + n + ".weight", (d.hidden,), role) for n in names]


# ---------------------------------------------------------------------------------------
# Architectures: (config.json without the token ids and vocab_size, tensors).
# ---------------------------------------------------------------------------------------

def common_config(arch: str, model_type: str, d: Dims, **extra) -> dict:
    c = {"architectures": [arch], "model_type": model_type, "attention_dropout": 0.0, "hidden_act": "silu",
         "hidden_size": d.hidden, "initializer_range": 0.02, "intermediate_size": d.inter,
         "num_attention_heads": d.heads, "num_hidden_layers": d.layers, "num_key_value_heads": d.kv_heads,
         "tie_word_embeddings": d.tied, "transformers_version": TRANSFORMERS_VERSION, "use_cache": True}
    c.update(extra)
    return c


def llama(d: Dims, vocab: int):
    c = common_config("LlamaForCausalLM", "llama", d, attention_bias=False, head_dim=d.head_dim, mlp_bias=False,
                      max_position_embeddings=2048, pretraining_tp=1, rms_norm_eps=1e-5, rope_theta=500000.0,
                      rope_scaling={"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                    "original_max_position_embeddings": 256, "rope_type": "llama3"})
    return c, decoder(d, vocab, lambda p, i: gqa_attention(p, d) + mlp(p + "mlp.", d, d.inter) +
                      norms(p, d, "input_layernorm", "post_attention_layernorm"))


def qwen2(d: Dims, vocab: int):
    c = common_config("Qwen2ForCausalLM", "qwen2", d, max_position_embeddings=32768, max_window_layers=d.layers,
                      rms_norm_eps=1e-6, rope_scaling=None, rope_theta=1000000.0, sliding_window=32768,
                      use_sliding_window=False)
    return c, decoder(d, vocab, lambda p, i: gqa_attention(p, d, bias=True) + mlp(p + "mlp.", d, d.inter) +
                      norms(p, d, "input_layernorm", "post_attention_layernorm"))


def qwen3(d: Dims, vocab: int):
    c = common_config("Qwen3ForCausalLM", "qwen3", d, attention_bias=False, head_dim=d.head_dim,
                      max_position_embeddings=1024, max_window_layers=d.layers, rms_norm_eps=1e-6,
                      rope_theta=1000000.0, sliding_window=None, use_sliding_window=False,
                      rope_scaling={"factor": 4.0, "original_max_position_embeddings": 256, "rope_type": "yarn"})
    return c, decoder(d, vocab, lambda p, i: gqa_attention(p, d, qk_norm=True) + mlp(p + "mlp.", d, d.inter) +
                      norms(p, d, "input_layernorm", "post_attention_layernorm"))


def gemma3(d: Dims, vocab: int):
    """Gemma 3 text: 5 sliding-window layers then a global one, the four norms per layer,
    norms stored zero-centred (the model multiplies by 1 + w)."""
    pattern = 6
    types = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(d.layers)]
    c = common_config("Gemma3ForCausalLM", "gemma3_text", d, attention_bias=False, attn_logit_softcapping=None,
                      final_logit_softcapping=None, head_dim=d.head_dim, hidden_activation="gelu_pytorch_tanh",
                      layer_types=types, max_position_embeddings=32768, query_pre_attn_scalar=d.head_dim,
                      rms_norm_eps=1e-6, rope_local_base_freq=10000.0, rope_scaling=None, rope_theta=1000000.0,
                      sliding_window=8, sliding_window_pattern=pattern, use_bidirectional_attention=False)
    del c["hidden_act"]
    return c, decoder(d, vocab, lambda p, i: gqa_attention(p, d, qk_norm=True, norm_role="norm0") +
                      mlp(p + "mlp.", d, d.inter) +
                      norms(p, d, "input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                            "post_feedforward_layernorm", role="norm0"), norm_role="norm0")


def qwen3moe(d: Dims, vocab: int):
    c = common_config("Qwen3MoeForCausalLM", "qwen3_moe", d, attention_bias=False, decoder_sparse_step=1,
                      head_dim=d.head_dim, max_position_embeddings=1024, max_window_layers=d.layers,
                      mlp_only_layers=[], moe_intermediate_size=d.moe_inter, norm_topk_prob=True,
                      num_experts=d.n_experts, num_experts_per_tok=d.top_k, output_router_logits=False,
                      rms_norm_eps=1e-6, rope_scaling=None, rope_theta=1000000.0, router_aux_loss_coef=0.001,
                      sliding_window=None, use_sliding_window=False)
    return c, decoder(d, vocab, lambda p, i: gqa_attention(p, d, qk_norm=True) + moe(p, d, score_bias=False) +
                      norms(p, d, "input_layernorm", "post_attention_layernorm"))


def moe_or_dense(p: str, i: int, d: Dims, score_bias: bool) -> list[Tensor]:
    return mlp(p + "mlp.", d, d.inter) if i < d.dense_lead else moe(p, d, score_bias)


def glm4moe(d: Dims, vocab: int):
    """GLM-4.5: Q/K/V biases, per-head Q/K norms, partial RoPE, one leading dense layer,
    sigmoid routing with the selection bias, a shared expert, one NextN layer."""
    c = common_config("Glm4MoeForCausalLM", "glm4_moe", d, attention_bias=True, first_k_dense_replace=d.dense_lead,
                      head_dim=d.head_dim, max_position_embeddings=1024, moe_intermediate_size=d.moe_inter,
                      n_group=1, n_routed_experts=d.n_experts, n_shared_experts=d.n_shared, norm_topk_prob=True,
                      num_experts_per_tok=d.top_k, num_nextn_predict_layers=d.nextn, partial_rotary_factor=0.5,
                      rms_norm_eps=1e-5, rope_scaling=None, rope_theta=1000000.0, routed_scaling_factor=2.5,
                      topk_group=1, use_qk_norm=True)
    return c, decoder(d, vocab, lambda p, i: gqa_attention(p, d, bias=True, qk_norm=True) +
                      moe_or_dense(p, i, d, True) + norms(p, d, "input_layernorm", "post_attention_layernorm"))


def deepseek_config(arch: str, model_type: str, d: Dims, v3: bool, **extra) -> dict:
    c = common_config(arch, model_type, d, attention_bias=False, aux_loss_alpha=0.001,
                      first_k_dense_replace=d.dense_lead, kv_lora_rank=d.kv_lora, max_position_embeddings=1024,
                      moe_intermediate_size=d.moe_inter, moe_layer_freq=1, n_routed_experts=d.n_experts,
                      n_shared_experts=d.n_shared, num_experts_per_tok=d.top_k, pretraining_tp=1,
                      q_lora_rank=d.q_lora or None, qk_nope_head_dim=d.nope, qk_rope_head_dim=d.rope,
                      rms_norm_eps=1e-6, rope_theta=10000.0, seq_aux=True, v_head_dim=d.v_head)
    if v3:  # DeepSeek-V3: sigmoid routing, selection bias, grouped top-k
        c.update(ep_size=1, n_group=4, norm_topk_prob=True, num_nextn_predict_layers=d.nextn,
                 routed_scaling_factor=2.5, scoring_func="sigmoid", topk_group=2, topk_method="noaux_tc",
                 rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 4.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                               "original_max_position_embeddings": 256, "type": "yarn"})
    else:  # DeepSeek-V2-Lite: softmax routing, greedy top-k
        c.update(n_group=1, norm_topk_prob=False, routed_scaling_factor=1.0, scoring_func="softmax", topk_group=1,
                 topk_method="greedy",
                 rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 4.0, "mscale": 0.707,
                               "mscale_all_dim": 0.707, "original_max_position_embeddings": 256, "type": "yarn"})
    c.update(extra)
    return c


def mla_layer(d: Dims, dsa: bool, score_bias: bool):
    return lambda p, i: (mla_attention(p, d) + (indexer(p, d) if dsa else []) + moe_or_dense(p, i, d, score_bias) +
                         norms(p, d, "input_layernorm", "post_attention_layernorm"))


def deepseek_v2(d: Dims, vocab: int):
    return (deepseek_config("DeepseekV2ForCausalLM", "deepseek_v2", d, False),
            decoder(d, vocab, mla_layer(d, False, False)))


def deepseek_v3(d: Dims, vocab: int):
    return (deepseek_config("DeepseekV3ForCausalLM", "deepseek_v3", d, True),
            decoder(d, vocab, mla_layer(d, False, True)))


def deepseek_v32(d: Dims, vocab: int):
    c = deepseek_config("DeepseekV32ForCausalLM", "deepseek_v32", d, True, index_head_dim=d.index_dim,
                        index_n_heads=d.index_heads, index_topk=d.index_topk)
    return c, decoder(d, vocab, mla_layer(d, True, True))


def glm_dsa(d: Dims, vocab: int):
    """GLM-5 (glm_moe_dsa): DeepSeek-V3.2's layout, GLM's routing (one group), interleaved
    RoPE in attention and indexer, rope_parameters (transformers 5 style)."""
    c = common_config("GlmMoeDsaForCausalLM", "glm_moe_dsa", d, attention_bias=False, dtype="bfloat16",
                      first_k_dense_replace=d.dense_lead, head_dim=d.rope, index_head_dim=d.index_dim,
                      index_n_heads=d.index_heads, index_topk=d.index_topk, indexer_rope_interleave=True,
                      kv_lora_rank=d.kv_lora, max_position_embeddings=1024,
                      mlp_layer_types=["dense" if i < d.dense_lead else "sparse" for i in range(d.layers)],
                      moe_intermediate_size=d.moe_inter, moe_layer_freq=1, n_group=1, n_routed_experts=d.n_experts,
                      n_shared_experts=d.n_shared, norm_topk_prob=True, num_experts_per_tok=d.top_k,
                      num_nextn_predict_layers=d.nextn, q_lora_rank=d.q_lora, qk_head_dim=d.nope + d.rope,
                      qk_nope_head_dim=d.nope, qk_rope_head_dim=d.rope, rms_norm_eps=1e-5, rope_interleave=True,
                      rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"}, routed_scaling_factor=2.5,
                      scoring_func="sigmoid", topk_group=1, topk_method="noaux_tc", v_head_dim=d.v_head)
    return c, decoder(d, vocab, mla_layer(d, True, True))


# ---------------------------------------------------------------------------------------
# The fixtures.
# ---------------------------------------------------------------------------------------

@dataclass
class Fixture:
    name: str
    build: Callable[[Dims, int], tuple[dict, list[Tensor]]]
    family: str
    dims: Dims
    seed: int
    scheme: Callable[[], Float] = Float
    shards: int = 2


def msmodelslim_w8a8_llama(t: Tensor) -> str:
    """msmodelslim W8A8 (static) with one rolled-back layer, as its accuracy tuning leaves
    sensitive down projections in float."""
    return "FLOAT" if t.name.startswith(("lm_head", "model.layers.1.mlp.down_proj")) else "W8A8"


def msmodelslim_dynamic(t: Tensor) -> str:
    return "FLOAT" if t.role in ("router", "lm_head") else "W8A8_DYNAMIC"


def msmodelslim_mla_mixed(num_layers: int) -> Callable[[Tensor], str]:
    """DeepSeek / GLM-5 W8A8 as msmodelslim mixes it: MLA projections static W8A8 (kv_b_proj
    float), MLP and experts W8A8_DYNAMIC, router, indexer and the NextN layer float."""
    def policy(t: Tensor) -> str:
        layer = int(t.name.split(".")[2]) if t.name.startswith("model.layers.") else -1
        if layer >= num_layers or t.role in ("router", "lm_head") or ".indexer." in t.name or "kv_b_proj" in t.name:
            return "FLOAT"
        return "W8A8" if ".self_attn." in t.name else "W8A8_DYNAMIC"
    return policy


V3 = replace(TINY_MLA, q_lora=64, n_shared=1, nextn=1)
# The indexer key: a power of two from 64 (llama.cpp rotates it with a Walsh-Hadamard matrix).
DSA = replace(V3, index_heads=4, index_dim=64, index_topk=16)
QWEN3MOE_IGNORE = ["lm_head", "re:.*mlp.gate$"]

FIXTURES: list[Fixture] = [
    Fixture("llama", llama, "llama3", TINY_DENSE, 101),
    Fixture("qwen2", qwen2, "qwen2", TINY_DENSE, 102),
    Fixture("qwen3", qwen3, "qwen3", replace(TINY_DENSE, tied=True), 103),
    Fixture("gemma3", gemma3, "gemma3", replace(TINY_DENSE, layers=6, tied=True), 104),
    Fixture("qwen3moe", qwen3moe, "qwen3", TINY_MOE, 105, shards=3),
    Fixture("glm4moe", glm4moe, "glm45", replace(TINY_MOE, n_shared=1, dense_lead=1, nextn=1), 106, shards=3),
    Fixture("deepseek-v2", deepseek_v2, "deepseek3", replace(TINY_MLA, n_shared=2), 107, shards=3),
    Fixture("deepseek-v3", deepseek_v3, "deepseek3", V3, 108, shards=3),
    Fixture("deepseek-v32", deepseek_v32, "deepseek3", DSA, 109, shards=3),
    Fixture("glm-dsa", glm_dsa, "glm5", DSA, 110, shards=3),
    # The same weights, quantized.
    Fixture("llama-w8a8", llama, "llama3", TINY_DENSE, 101, lambda: CompressedW8A8(["lm_head"])),
    Fixture("qwen3moe-w8a8", qwen3moe, "qwen3", TINY_MOE, 105, lambda: CompressedW8A8(QWEN3MOE_IGNORE), 3),
    Fixture("llama-msmodelslim-w8a8", llama, "llama3", TINY_DENSE, 101,
            lambda: ModelSlim(msmodelslim_w8a8_llama, np.float16, "W8A8")),
    Fixture("qwen3moe-msmodelslim-w8a8-dynamic", qwen3moe, "qwen3", TINY_MOE, 105,
            lambda: ModelSlim(msmodelslim_dynamic, BF16, "W8A8_DYNAMIC"), 3),
    Fixture("glm-dsa-msmodelslim-w8a8", glm_dsa, "glm5", DSA, 110,
            lambda: ModelSlim(msmodelslim_mla_mixed(DSA.layers), BF16, "W8A8_DYNAMIC"), 3),
    Fixture("deepseek-v3-fp8", deepseek_v3, "deepseek3", V3, 108, Fp8Block, 3),
    # GLM-5-FP8's layout (block-scaled FP8 as DeepSeek-V3's) on the glm-dsa fixture.
    Fixture("glm-dsa-fp8", glm_dsa, "glm5", DSA, 110, Fp8Block, 3),
]

# Benchmark shapes: Llama-3.2-1B with an untied LM head (1.50 B parameters) and
# Qwen3-30B-A3B (30.5 B total, 3.3 B active).
SIZES: dict[str, tuple[Callable, str, Dims]] = {
    "llama-1.5b": (llama, "llama3", Dims(hidden=2048, layers=16, heads=32, kv_heads=8, head_dim=64, inter=8192,
                                         vocab=128256)),
    "qwen3moe-30b-a3b": (qwen3moe, "qwen3", Dims(hidden=2048, layers=48, heads=32, kv_heads=4, head_dim=128,
                                                 inter=6144, n_experts=128, top_k=8, moe_inter=768, vocab=151936)),
}
SIZE_SHARD_BYTES = 4 << 30


# ---------------------------------------------------------------------------------------
# Writing.
# ---------------------------------------------------------------------------------------

def init_std(t: Tensor) -> float:
    """Weight scales that keep activations O(1) through the tiny random models: stds for
    64 inputs scaled by fan-in; projections back into the residual stream kept small."""
    base = {"linear": 0.25, "linear_out": 0.1, "router": 0.2, "nextn_proj": 0.15, "lm_head": 0.1}[t.role]  # lm_head: logits of std ~0.8
    return base * (64.0 / t.shape[-1]) ** 0.5


def make_values(t: Tensor, seed: int) -> np.ndarray:
    """The tensor's values as float32 numbers exact in its stored float type."""
    rng = np.random.default_rng([seed, zlib.crc32(t.name.encode())])
    if t.role in ("norm", "ln_weight"):
        w = 1.0 + 0.1 * rng.standard_normal(t.shape, dtype=np.float32)
    elif t.role in ("norm0", "bias", "ln_bias"):
        w = 0.1 * rng.standard_normal(t.shape, dtype=np.float32)
    elif t.role == "score_bias":
        w = 0.05 * rng.standard_normal(t.shape, dtype=np.float32)
    elif t.role in ("embed", "embed_tied"):
        w = rng.standard_normal(t.shape, dtype=np.float32)
        w *= 0.25 if t.role == "embed_tied" else 1.0
    else:
        w = rng.standard_normal(t.shape, dtype=np.float32)
        w *= init_std(t)
    return w if t.f32 else w.astype(BF16).astype(np.float32)


def token_ids(out_dir: Path) -> tuple[dict[str, int], int]:
    j = json.loads((out_dir / "tokenizer.json").read_text(encoding="utf-8"))
    ids = dict(j["model"]["vocab"])
    ids.update({a["content"]: a["id"] for a in j.get("added_tokens", [])})
    return ids, max(ids.values()) + 1


def plan_shards(groups: list[list[tuple[str, np.dtype, tuple[int, ...]]]], n: int) -> list[int]:
    """Shard index of each group (a source tensor's outputs stay together): cut where the
    running size crosses k/n of the total, then renumber to drop empty shards."""
    sizes = [sum(int(np.prod(s)) * dt.itemsize for _, dt, s in g) for g in groups]
    total, cum, idx = sum(sizes), 0, []
    for size in sizes:
        idx.append(min(n - 1, int((cum + size / 2) * n / total)))
        cum += size
    used = sorted(set(idx))
    return [used.index(i) for i in idx]


def save_shard(arrays: dict[str, np.ndarray], path: Path) -> None:
    save_file(arrays, path, metadata={"format": "pt"})
    path.chmod(0o644)  # safetensors creates files private to the user


def write_checkpoint(out_dir: Path, build, family: str, dims: Dims, seed: int, scheme: Float,
                     shards: int | None, shard_bytes: int | None = None) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in list(out_dir.glob("*.safetensors")) + list(out_dir.glob("*.safetensors.index.json")):
        stale.unlink()  # an earlier run's shards (their count may differ)
    train_tokenizer(family, out_dir)
    ids, n_tokens = token_ids(out_dir)
    # Gemma 3: exactly the tokenizer's size (llama.cpp's converter cuts Gemma's embedding to
    # the tokenizer's tokens, and a padded vocab_size would leave the GGUF's token list
    # longer than its embedding).
    vocab = dims.vocab or (n_tokens if family == "gemma3" else -(-n_tokens // 64) * 64)
    if vocab < n_tokens:
        raise ValueError(f"{out_dir.name}: vocab_size {vocab} < tokenizer size {n_tokens}")
    config, tensors = build(dims, vocab)
    fam = FAMILY_TOKENS[family]
    eos = [ids[t] for t in fam["eos"] if t in ids]
    config.update(vocab_size=vocab, eos_token_id=eos if len(eos) > 1 else eos[0])
    if fam["bos"] in ids:
        config["bos_token_id"] = ids[fam["bos"]]
    if fam["pad"] in ids:
        config["pad_token_id"] = ids[fam["pad"]]
    scheme.patch_config(config)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    gen = {"do_sample": True, "eos_token_id": eos, "transformers_version": TRANSFORMERS_VERSION, **fam["sampling"]}
    for key in ("bos_token_id", "pad_token_id"):
        if key in config:
            gen[key] = config[key]
    (out_dir / "generation_config.json").write_text(json.dumps(gen, indent=2, sort_keys=True) + "\n")

    groups = [scheme.outputs(t) for t in tensors]
    if shard_bytes:
        total = sum(int(np.prod(s)) * dt.itemsize for g in groups for _, dt, s in g)
        shards = max(2, -(-total // shard_bytes))
    where = plan_shards(groups, shards)
    n = max(where) + 1
    files = [f"{scheme.shard_stem}-{k + 1:05d}-of-{n:05d}.safetensors" for k in range(n)]
    weight_map, total_size, current, k = {}, 0, {}, 0
    for t, g, s in zip(tensors, groups, where):
        if s != k:  # shards are contiguous runs: write the finished one, free it
            save_shard(current, out_dir / files[k])
            current, k = {}, s
        arrays = scheme.apply(t, make_values(t, seed))
        for name, dt, shape in g:
            a = arrays[name]
            assert a.dtype == dt and a.shape == shape, (name, a.dtype, dt, a.shape, shape)
            current[name] = a
            weight_map[name] = files[s]
            total_size += a.nbytes
    save_shard(current, out_dir / files[k])
    index = {"metadata": {"total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
    (out_dir / scheme.index_name).write_text(json.dumps(index, indent=2) + "\n")
    scheme.write_extra(out_dir, [o for g in groups for o in g])
    params = sum(int(np.prod(t.shape)) for t in tensors)
    return {"tensors": len(weight_map), "shards": n, "bytes": total_size, "params": params}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("out_dir", type=Path, nargs="?")
    parser.add_argument("--only", help="comma-separated fixture names")
    parser.add_argument("--size", choices=sorted(SIZES), help="one realistic-size checkpoint instead")
    parser.add_argument("--quant", choices=["bf16", "w8a8"], default="bf16",
                        help="--size storage: BF16 or compressed-tensors W8A8")
    parser.add_argument("--layers", type=int, help="--size: override the layer count (quick checks)")
    parser.add_argument("--list", action="store_true", help="print the fixture names")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(f.name for f in FIXTURES))
        return 0
    if args.out_dir is None:
        parser.error("OUT_DIR is required")

    if args.size:
        build, family, dims = SIZES[args.size]
        if args.layers:
            dims = replace(dims, layers=args.layers)
        moe = dims.n_experts > 0
        scheme = CompressedW8A8(QWEN3MOE_IGNORE if moe else ["lm_head"]) if args.quant == "w8a8" else Float()
        name = args.size + ("-w8a8" if args.quant == "w8a8" else "")
        start = time.monotonic()
        info = write_checkpoint(args.out_dir / name, build, family, dims, 1000, scheme, None, SIZE_SHARD_BYTES)
        print(f"make_hf_fixtures: {name}: {info['params'] / 1e9:.2f} B parameters, {info['bytes'] / 1e9:.2f} GB "
              f"in {info['shards']} shards, {time.monotonic() - start:.0f} s")
        return 0

    selected = FIXTURES
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {f.name for f in FIXTURES}
        if unknown:
            parser.error(f"unknown fixtures: {', '.join(sorted(unknown))}")
        selected = [f for f in FIXTURES if f.name in wanted]
    for f in selected:
        info = write_checkpoint(args.out_dir / f.name, f.build, f.family, f.dims, f.seed, f.scheme(), f.shards)
        print(f"make_hf_fixtures: {f.name}: {info['tensors']} tensors, {info['shards']} shards, "
              f"{info['bytes'] / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
