"""Storage schemes of tools/make_hf_fixtures.py: how each weight of a checkpoint is stored.

Every scheme starts from the same weights (float32 values that are exact BF16 numbers) and
says, per tensor, which tensors the checkpoint holds for it (`outputs`, known before any
data exists, so shards can be planned) and what they contain (`apply`). Quantizers follow
each format's definition:

  Float            BF16 (or F16) as trained; some small tensors F32 (`Tensor.f32`).
  CompressedW8A8   compressed-tensors `int-quantized`: `weight` I8 [out, in] =
                   round(w / s) with s = max|w_row| / 127, `weight_scale` [out, 1] in the
                   model's dtype (compressed-tensors keeps the observed dtype for scales).
  ModelSlim        msmodelslim: W8A8_DYNAMIC as above with `weight_scale` and a zero
                   `weight_offset` [out, 1] (F32); W8A8 static adds a per-tensor asymmetric
                   input quantization, xq = clamp(round(x / input_scale + input_offset)),
                   `deq_scale` = input_scale x weight_scale [out] (F32 in a BF16 model, the
                   fp32 bits in an I64 in an F16 model) and `quant_bias` I32 [out] =
                   -input_offset x sum(row of weight), so y = (xq . W + quant_bias) x deq_scale
                   is x . w up to rounding. quant_model_description.json names each tensor's
                   scheme (FLOAT, W8A8, W8A8_DYNAMIC).
  Fp8Block         DeepSeek-V3's FP8: `weight` F8_E4M3 = w / s per [128, 128] block (s = the
                   block's max|w| / 448, partial blocks at the edges), `weight_scale_inv` F32
                   [ceil(out / 128), ceil(in / 128)] = s.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F8_E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
DTYPE_NAMES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", BF16: "BF16",
               np.dtype(np.int8): "I8", np.dtype(np.int32): "I32", np.dtype(np.int64): "I64",
               F8_E4M3: "F8_E4M3"}

# Roles of the matrices a quantizer may touch (see make_hf_fixtures.Tensor.role).
LINEAR_ROLES = ("linear", "linear_out")


@dataclass(frozen=True)
class Tensor:
    """One tensor of the BF16 checkpoint: HF name, shape, what it is (role: embed, lm_head,
    linear, linear_out, router, norm, bias, nextn_proj, ...) and whether the real
    checkpoints keep it in F32."""
    name: str
    shape: tuple[int, ...]
    role: str
    f32: bool = False

    @property
    def module(self) -> str:
        return self.name.rsplit(".", 1)[0]


Output = tuple[str, np.dtype, tuple[int, ...]]


class Float:
    """The unquantized checkpoint; base of the quantizers (which store what they do not
    quantize this way)."""
    index_name = "model.safetensors.index.json"
    shard_stem = "model"

    def __init__(self, dtype: np.dtype = BF16):
        self.dtype = np.dtype(dtype)

    def quantized(self, t: Tensor) -> bool:
        return False

    def float_dtype(self, t: Tensor) -> np.dtype:
        return np.dtype(np.float32) if t.f32 else self.dtype

    def outputs(self, t: Tensor) -> list[Output]:
        return [(t.name, self.float_dtype(t), t.shape)]

    def apply(self, t: Tensor, w: np.ndarray) -> dict[str, np.ndarray]:
        return {t.name: w.astype(self.float_dtype(t))}

    def patch_config(self, config: dict) -> None:
        config["torch_dtype"] = {BF16: "bfloat16", np.dtype(np.float16): "float16"}[self.dtype]

    def write_extra(self, out_dir: Path, outputs: list[Output]) -> None:
        pass


def per_channel_int8(w: np.ndarray, scale_dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8: (q I8 [out, in], scale [out, 1] in scale_dtype); q is
    computed against the stored (rounded) scale, so q x scale is the dequantized weight."""
    amax = np.abs(w).max(axis=1, keepdims=True)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(scale_dtype)
    q = np.clip(np.rint(w / scale.astype(np.float32)), -128, 127).astype(np.int8)
    return q, scale


class CompressedW8A8(Float):
    """compressed-tensors W8A8: int8 weights per channel, int8 activations per token
    (dynamic, symmetric), the modules of `ignore` left in BF16."""

    def __init__(self, ignore: list[str]):
        super().__init__(BF16)
        self.ignore = ignore

    def _ignored(self, module: str) -> bool:
        for pattern in self.ignore:
            if pattern.startswith("re:"):
                if re.match(pattern[3:], module):
                    return True
            elif module == pattern:
                return True
        return False

    def quantized(self, t: Tensor) -> bool:
        return t.role in LINEAR_ROLES + ("router", "nextn_proj") and not self._ignored(t.module)

    def outputs(self, t: Tensor) -> list[Output]:
        if not self.quantized(t):
            return super().outputs(t)
        return [(t.name, np.dtype(np.int8), t.shape), (t.module + ".weight_scale", BF16, (t.shape[0], 1))]

    def apply(self, t: Tensor, w: np.ndarray) -> dict[str, np.ndarray]:
        if not self.quantized(t):
            return super().apply(t, w)
        q, s = per_channel_int8(w, BF16)
        return {t.name: q, t.module + ".weight_scale": s}

    def patch_config(self, config: dict) -> None:
        super().patch_config(config)

        def args(strategy: str, dynamic: bool, observer: str | None) -> dict:
            return {"actorder": None, "block_structure": None, "dynamic": dynamic, "group_size": None,
                    "num_bits": 8, "observer": observer, "observer_kwargs": {}, "strategy": strategy,
                    "symmetric": True, "type": "int"}

        config["quantization_config"] = {
            "config_groups": {"group_0": {
                "input_activations": args("token", True, None),
                "output_activations": None,
                "targets": ["Linear"],
                "weights": args("channel", False, "minmax")}},
            "format": "int-quantized",
            "global_compression_ratio": None,
            "ignore": self.ignore,
            "kv_cache_scheme": None,
            "quant_method": "compressed-tensors",
            "quantization_status": "compressed",
        }


def static_input_range(name: str) -> tuple[float, float]:
    """A fixed asymmetric activation range per module (no calibration data exists for
    random weights), varied per module by a hash of its name: about [-7, 6.5], wide
    enough for the fixtures' normed inputs and attention outputs (within about +-7), and
    [-24, 22] for down_proj, whose input (silu(gate) x up) has the widest tails. Chosen by
    measuring the llama fixture's perplexity against its BF16 twin (within 1%)."""
    h = zlib.crc32(name.encode())
    lo, hi = (-24.0, 22.0) if name.endswith("down_proj") else (-7.0, 6.5)
    return lo * (1.0 + (h & 0xff) / 2048.0), hi * (1.0 + ((h >> 8) & 0xff) / 2048.0)


class ModelSlim(Float):
    """msmodelslim: `policy(tensor)` gives each quantizable matrix's scheme ("W8A8",
    "W8A8_DYNAMIC" or "FLOAT"); every other tensor is FLOAT, in the model's dtype."""
    shard_stem = "quant_model_weight_w8a8_dynamic"

    def __init__(self, policy: Callable[[Tensor], str], dtype: np.dtype, model_quant_type: str):
        super().__init__(dtype)
        self.policy = policy
        self.model_quant_type = model_quant_type
        self.shard_stem = "quant_model_weight_" + model_quant_type.lower()
        self.index_name = self.shard_stem + ".safetensors.index.json"
        self.description: dict[str, str] = {}

    def scheme(self, t: Tensor) -> str:
        if t.role not in LINEAR_ROLES + ("router", "nextn_proj") or len(t.shape) != 2:
            return "FLOAT"
        return self.policy(t)

    def quantized(self, t: Tensor) -> bool:
        return self.scheme(t) != "FLOAT"

    def outputs(self, t: Tensor) -> list[Output]:
        scheme = self.scheme(t)
        if scheme == "FLOAT":
            out = super().outputs(t)
        else:
            rows, m = t.shape[0], t.module
            out = [(t.name, np.dtype(np.int8), t.shape), (m + ".weight_scale", np.dtype(np.float32), (rows, 1)),
                   (m + ".weight_offset", np.dtype(np.float32), (rows, 1))]
            if scheme == "W8A8":
                deq = np.dtype(np.float32) if self.dtype == BF16 else np.dtype(np.int64)
                out += [(m + ".input_scale", np.dtype(np.float32), (1,)),
                        (m + ".input_offset", np.dtype(np.float32), (1,)),
                        (m + ".deq_scale", deq, (rows,)), (m + ".quant_bias", np.dtype(np.int32), (rows,))]
        for name, _, _ in out:
            self.description[name] = scheme
        return out

    def apply(self, t: Tensor, w: np.ndarray) -> dict[str, np.ndarray]:
        scheme = self.scheme(t)
        if scheme == "FLOAT":
            return super().apply(t, w)
        m = t.module
        q, s = per_channel_int8(w, np.float32)
        out = {t.name: q, m + ".weight_scale": s, m + ".weight_offset": np.zeros_like(s)}
        if scheme == "W8A8":
            lo, hi = static_input_range(m)
            in_scale = np.float32((hi - lo) / 255.0)
            in_offset = np.float32(np.rint(-128.0 - lo / in_scale))
            deq = (in_scale * s[:, 0]).astype(np.float32)
            if self.dtype != BF16:  # F16 models: the fp32 bits, widened to int64
                deq = deq.view(np.int32).astype(np.int64)
            out[m + ".input_scale"] = np.array([in_scale], np.float32)
            out[m + ".input_offset"] = np.array([in_offset], np.float32)
            out[m + ".deq_scale"] = deq
            out[m + ".quant_bias"] = (-int(in_offset) * q.astype(np.int64).sum(axis=1)).astype(np.int32)
        return out

    def write_extra(self, out_dir: Path, outputs: list[Output]) -> None:
        desc = {"model_quant_type": self.model_quant_type, "version": "1.0.0"}
        desc.update({name: self.description[name] for name, _, _ in outputs})
        (out_dir / "quant_model_description.json").write_text(json.dumps(desc, indent=2) + "\n")


class Fp8Block(Float):
    """DeepSeek-V3's block-scaled FP8 for the attention and MLP matrices (`quantized`:
    LINEAR_ROLES; the router, eh_proj, embeddings and LM heads stay BF16)."""

    def __init__(self, block: tuple[int, int] = (128, 128)):
        super().__init__(BF16)
        self.block = block

    def quantized(self, t: Tensor) -> bool:
        return t.role in LINEAR_ROLES

    def _grid(self, shape: tuple[int, ...]) -> tuple[int, int]:
        return (-(-shape[0] // self.block[0]), -(-shape[1] // self.block[1]))

    def outputs(self, t: Tensor) -> list[Output]:
        if not self.quantized(t):
            return super().outputs(t)
        return [(t.name, F8_E4M3, t.shape), (t.module + ".weight_scale_inv", np.dtype(np.float32), self._grid(t.shape))]

    def apply(self, t: Tensor, w: np.ndarray) -> dict[str, np.ndarray]:
        if not self.quantized(t):
            return super().apply(t, w)
        br, bc = self.block
        gr, gc = self._grid(t.shape)
        inv = np.zeros((gr, gc), np.float32)
        q = np.zeros(t.shape, F8_E4M3)
        for i in range(gr):
            for j in range(gc):
                blk = w[i * br:(i + 1) * br, j * bc:(j + 1) * bc]
                amax = float(np.abs(blk).max())
                s = np.float32(amax / 448.0 if amax > 0 else 1.0)
                inv[i, j] = s
                q[i * br:(i + 1) * br, j * bc:(j + 1) * bc] = (blk / s).astype(F8_E4M3)
        return {t.name: q, t.module + ".weight_scale_inv": inv}

    def patch_config(self, config: dict) -> None:
        super().patch_config(config)
        config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3",
                                         "quant_method": "fp8", "weight_block_size": list(self.block)}
