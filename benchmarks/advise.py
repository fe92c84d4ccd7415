"""`growcert advise`: wall time and peak memory, beside the stage commands it stands for.

Two models, each measured as child processes (peak RSS from the kernel's rusage of that child, so torch's
own allocations count):

1. the ci llama checkpoint (configs/ci.yaml's depth grid: width 16, depth 2, 20 steps; trained here unless
   --checkpoint is given) with advise's default sample (128 + 128 examples): `growcert advise` against
   `growcert dump`, `estimate-alignment` and `estimate-depth` run one by one on the same examples;
2. a ~100M-parameter GPT-NeoX built here with random weights (hidden 768, 14 layers, byte vocabulary;
   save_pretrained into a temporary folder, nothing downloaded), read from a text file with a small sample:
   `growcert advise` against `growcert dump` alone (its forward-backward passes). Its peak RSS is compared with
   the memory the Snakemake rule advise requests (4,000 MB + 2 x advise.max_batch_mb + advise.max_gradient_mb), the
   stated bound. The options' predictions hold (n_train + 2 n_test) x parameters x 4 bytes of per-example
   gradients; above advise.max_gradient_mb advise refuses after its dump (exit status 2), and the line says so.

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/advise.py [--threads 2] [--examples 16] [--skip-large]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CI_RUN = {
    "family": "llama",
    "dataset": "shakespeare",
    "width": 16,
    "depth": 2,
    "model": {"head_dim": 8, "context": 32},
    "train": {
        "steps": 20,
        "batch_size": 8,
        "lr": 0.003,
        "warmup_steps": 2,
        "save_steps": [20],
        "eval_every": 10,
        "eval_examples": 32,
    },
}


def child(argv: list[str], allowed: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one child process; its exit status must be one of `allowed`."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in allowed:
        sys.exit(f"failed: {' '.join(argv)}\n{process.stderr.read()[-2000:]}")
    return seconds, usage.ru_maxrss / 1024  # Linux reports KB


def growcert(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "growcert.cli", *arguments]


def ci_llama(work: Path, threads: int, checkpoint: str | None, data: str | None) -> None:
    from growcert.config import stage_settings

    if data is None:
        data = str(work / "shakespeare")
        child(growcert("prepare", "--dataset", "shakespeare", "--out", data))
    if checkpoint is None:
        child(growcert("train", "--data", data, "--settings", json.dumps(CI_RUN), "--out", str(work / "run")))
        checkpoint = str(work / "run" / "step20.pt")
    torch_flags = ["--threads", str(threads), "--device", "cpu"]
    advise = child(
        growcert("advise", "--model", checkpoint, "--data", data, "--out", str(work / "advice"), *torch_flags)
    )
    settings = stage_settings("advise")
    dump = {key: settings[key] for key in ("train_examples", "test_examples", "batch_size", "max_batch_mb", "seed")}
    store = str(work / "store.zarr")
    stages = [
        child(
            growcert(
                "dump",
                "--checkpoint",
                checkpoint,
                "--data",
                data,
                "--settings",
                json.dumps(dump),
                "--out",
                store,
                *torch_flags,
            )
        ),
        child(
            growcert(
                "estimate-alignment",
                "--store",
                store,
                "--settings",
                json.dumps({"reductions": [settings["reduction"]]}),
                "--out",
                str(work / "a.csv"),
            )
        ),
        child(growcert("estimate-depth", "--store", store, "--out", str(work / "d.csv"), *torch_flags)),
    ]
    print(f"ci llama w16 d2 ({settings['train_examples']} + {settings['test_examples']} examples, {threads} threads):")
    print(f"  growcert advise                        {advise[0]:6.1f} s   peak RSS {advise[1]:7.0f} MB")
    print(
        f"  dump + estimate-alignment + -depth     {sum(s for s, _ in stages):6.1f} s   peak RSS "
        f"{max(m for _, m in stages):7.0f} MB (largest of the three)"
    )
    print(f"  ratio advise / stages                  {advise[0] / sum(s for s, _ in stages):6.2f}")


def large_model(work: Path, threads: int, examples: int, corpus: bytes) -> None:
    import torch
    import transformers

    from growcert.config import stage_settings

    config = transformers.GPTNeoXConfig(
        vocab_size=256,
        hidden_size=768,
        num_hidden_layers=14,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=256,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    parameters = sum(p.numel() for p in model.parameters())
    model.save_pretrained(work / "neox-100m")
    del model
    text = work / "corpus.txt"
    text.write_bytes(corpus)
    settings = stage_settings("advise", {"context": 128})
    bound = 4000 + 2 * settings["max_batch_mb"] + settings["max_gradient_mb"]
    gradients_mb = 3 * examples * parameters * 4 / 2**20  # n_train + 2 n_test rows
    refused = gradients_mb > settings["max_gradient_mb"]
    torch_flags = ["--threads", str(threads), "--device", "cpu"]
    advise = child(
        growcert(
            "advise",
            "--model",
            str(work / "neox-100m"),
            "--data",
            str(text),
            "--out",
            str(work / "advice-large"),
            "--examples",
            str(examples),
            "--settings",
            json.dumps({"context": 128}),
            *torch_flags,
        ),
        allowed=(2,) if refused else (0,),
    )
    # the same dump alone, on the text advise prepared the same way (the prepared folder is advise's own: redo it)
    from growcert.data import prepare_dataset

    chunk = max(1, min(settings["text_chunk_bytes"], len(corpus) // 4))
    prepare_dataset(
        "text",
        work / "text",
        {"path": str(text), "chunk_bytes": chunk, "test_fraction": settings["text_test_fraction"]},
    )
    dump = {
        "train_examples": examples,
        "test_examples": examples,
        "batch_size": settings["batch_size"],
        "max_batch_mb": settings["max_batch_mb"],
    }
    alone = child(
        growcert(
            "dump",
            "--checkpoint",
            str(work / "neox-100m"),
            "--data",
            str(work / "text"),
            "--settings",
            json.dumps(dump),
            "--hf",
            json.dumps({"context": 128}),
            "--out",
            str(work / "large.zarr"),
            *torch_flags,
        )
    )
    print(
        f"GPT-NeoX {parameters / 1e6:.0f}M parameters, context 128, {examples} + {examples} examples, "
        f"{threads} threads:"
    )
    print(
        f"  growcert advise                        {advise[0]:6.1f} s   peak RSS {advise[1]:7.0f} MB "
        f"(bound {bound:.0f} MB: {'within' if advise[1] <= bound else 'ABOVE'})"
        + (
            f"; refused after its dump: the predictions need {gradients_mb:,.0f} MiB > advise.max_gradient_mb"
            if refused
            else ""
        )
    )
    print(f"  growcert dump alone                    {alone[0]:6.1f} s   peak RSS {alone[1]:7.0f} MB")
    print(f"  ratio advise / dump                    {advise[0] / alone[0]:6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--examples", type=int, default=16, help="training and held-out examples of the large model")
    parser.add_argument("--checkpoint", default=None, help="the ci llama checkpoint (default: trained here)")
    parser.add_argument("--data", default=None, help="its prepared Shakespeare folder (default: prepared here)")
    parser.add_argument("--skip-large", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="growcert-advise-bench-") as folder:
        work = Path(folder)
        ci_llama(work, args.threads, args.checkpoint, args.data)
        if not args.skip_large:
            from growcert.data import load_prepared, prepare_dataset

            data = args.data or str(work / "shakespeare")
            if not Path(data).exists():
                prepare_dataset("shakespeare", data, {})
            large_model(work, args.threads, args.examples, load_prepared(data).train_x[:400_000].tobytes())


if __name__ == "__main__":
    main()
