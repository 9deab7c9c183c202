#!/usr/bin/env python3
"""Writes an F16 copy of a GGUF model: every 2-D weight dequantized to F16.

Usage: python3 bench/make_f16_model.py [IN.gguf] OUT.gguf

IN defaults to models/default.gguf (gemma3-270m Q4_K_M). Every metadata key (tokenizer
included) is copied as it is, except general.file_type, which becomes 1 (mostly F16).
2-D tensors are dequantized with gguf-py and stored as F16; 1-D tensors (norms) keep
their type. The result is what `--quantization w8a8` is for: a float model whose
matrices Tandem otherwise computes with fp16-rounded activations and float dots
(docs/PERFORMANCE.md, "--quantization w8a8 on an F16 model").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

ROOT = Path(__file__).resolve().parent.parent
FILE_TYPE_MOSTLY_F16 = 1


def copy_metadata(reader: gguf.GGUFReader, writer: gguf.GGUFWriter) -> int:
    """Copies every key/value pair but the ones the writer owns; returns how many."""
    copied = 0
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue  # the header and the architecture: GGUFWriter writes them itself
        vtype = field.types[0]
        if key == "general.file_type":
            writer.add_key_value(key, FILE_TYPE_MOSTLY_F16, VT.UINT32)
        elif vtype == VT.ARRAY:
            writer.add_key_value(key, field.contents(), vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(key, field.contents(), vtype)
        copied += 1
    return copied


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="[IN.gguf] OUT.gguf")
    args = parser.parse_args(argv)
    if len(args.paths) > 2:
        parser.error("expected [IN.gguf] OUT.gguf")
    src = args.paths[0] if len(args.paths) == 2 else ROOT / "models" / "default.gguf"
    dst = args.paths[-1]

    reader = gguf.GGUFReader(str(src))
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(dst), arch)
    n_keys = copy_metadata(reader, writer)
    n_f16 = 0
    for t in reader.tensors:
        if len(t.shape) == 2:
            # gguf-py gives [rows, cols] (numpy order; GGUF's dims reversed).
            values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float16)
            writer.add_tensor(t.name, values)
            n_f16 += 1
        else:
            raw = np.asarray(t.data)
            raw_dtype = None if t.tensor_type in (QT.F32, QT.F16) else t.tensor_type
            writer.add_tensor(t.name, raw, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()
    print(f"make_f16_model: {src} -> {dst}: {n_keys} metadata keys, {n_f16} matrices as F16, "
          f"{len(reader.tensors) - n_f16} other tensors as stored ({dst.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
