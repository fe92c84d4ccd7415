"""Tokenizing a `text` corpus for the `hf` family: the memory-mapped token cache (data/tokenized.py) against the
former in-RAM function (every chunk's ids as Python lists, then one np.concatenate), side by side in one run.

Generates a corpus of `--megabytes` of UTF-8 words in several files, prepares it as dataset `text`, trains a
byte-level BPE tokenizer (`--vocab` tokens) on its first megabyte, then runs each variant in its own process
(so each has its own peak resident memory): `in_ram` (the baseline), `cache_build` (the first job: tokenizes
into the cache) and `cache_hit` (a later job: maps the cache). Prints seconds, peak RSS above the process's
RSS after its imports, the stream's bytes in RAM, and the ratios; checks that the ids are equal.

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/token_cache.py [--megabytes 16] [--vocab 2000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

WORDS = [
    "growth",
    "certificate",
    "Größe",
    "déjà",
    "вектор",
    "梯度",
    "λ",
    "the",
    "of",
    "and",
    "\n",
    "to be",
    "width",
    "depth",
    "gradient",
    "alignment",
    "residual",
    "stream",
]


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def make_corpus(folder: Path, megabytes: int) -> None:
    rng = np.random.default_rng(0)
    words = np.array(WORDS)
    for number in range(8):
        count = megabytes * (1 << 20) // 8 // 7  # ~7 bytes a word with its space
        (folder / f"doc{number}.txt").write_text(" ".join(rng.choice(words, size=count)), encoding="utf-8")


def run_variant(variant: str, prepared: str, tokenizer_folder: str) -> dict:
    from growcert.data import load_prepared
    from growcert.data.tokenized import encoder, tokenized, tokenizer_identity
    from growcert.models.hf import load_tokenizer

    tokenizer = load_tokenizer(tokenizer_folder)
    data = load_prepared(prepared)
    encode = encoder(tokenizer)
    start_rss, start = rss_mb(), time.perf_counter()
    if variant == "in_ram":
        stream, bounds = data.train_x, np.append(data.segment_starts("train"), len(data.train_x))
        texts = [stream[a:b].tobytes().decode("utf-8", errors="replace") for a, b in zip(bounds[:-1], bounds[1:])]
        ids = np.concatenate([np.asarray(chunk, dtype=np.int64) for chunk in encode(texts)])
    else:
        ids = tokenized(data, encode, tokenizer_folder, len(tokenizer), tokenizer_identity(tokenizer)).train_x
    # touches every id (pages the cache in), a block at a time so the check adds no stream-sized copy
    checksum = sum(int(ids[i : i + (1 << 20)].sum(dtype=np.int64)) for i in range(0, len(ids), 1 << 20))
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    in_ram = 0 if isinstance(ids, np.memmap) else ids.nbytes
    return {
        "seconds": seconds,
        "peak_above_start_mb": peak - start_rss,
        "tokens": int(len(ids)),
        "checksum": checksum,
        "array_in_ram_mb": in_ram / (1 << 20),
        "dtype": str(ids.dtype),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=2000)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--prepared", help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:  # a child process: one variant
        print(json.dumps(run_variant(args.variant, args.prepared, args.tokenizer)))
        return
    import transformers
    from tokenizers import ByteLevelBPETokenizer

    from growcert.data import prepare_dataset

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "corpus").mkdir()
        make_corpus(root / "corpus", args.megabytes)
        prepare_dataset("text", root / "prepared", {"path": str(root / "corpus" / "*.txt"), "test_fraction": 0.01})
        trained = ByteLevelBPETokenizer()
        trained.train_from_iterator(
            [(root / "corpus" / "doc0.txt").read_text(encoding="utf-8")[: 1 << 20]],
            vocab_size=args.vocab,
            show_progress=False,
        )
        transformers.PreTrainedTokenizerFast(tokenizer_object=trained._tokenizer).save_pretrained(root / "tokenizer")
        results = {}
        for variant in ("in_ram", "cache_build", "cache_hit"):
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--variant",
                    variant,
                    "--prepared",
                    str(root / "prepared"),
                    "--tokenizer",
                    str(root / "tokenizer"),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
    base = results["in_ram"]
    print(f"corpus {args.megabytes} MB, {base['tokens']:,} train tokens, BPE vocabulary {args.vocab}")
    print(f"{'variant':<12} {'seconds':>8} {'peak RSS MB':>12} {'ids in RAM MB':>14} {'dtype':>6}")
    for variant, result in results.items():
        print(
            f"{variant:<12} {result['seconds']:8.2f} {result['peak_above_start_mb']:12.1f} "
            f"{result['array_in_ram_mb']:14.1f} {result['dtype']:>6}"
        )
    same = len({(result["tokens"], result["checksum"]) for result in results.values()}) == 1
    print(f"ids equal across variants (count and sum): {same}")
    for variant in ("cache_build", "cache_hit"):
        result = results[variant]
        print(
            f"{variant} / in_ram: time {result['seconds'] / base['seconds']:.2f}, "
            f"peak RSS {result['peak_above_start_mb'] / max(base['peak_above_start_mb'], 1e-9):.3f}"
        )
    if not same:
        raise SystemExit("the variants' ids differ")


if __name__ == "__main__":
    main()
