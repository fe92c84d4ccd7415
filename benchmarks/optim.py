"""Step time of PopulationRiskAdam's variance sources against torch's AdamW, side by side in one run.

Two models, each at its own batch:
- the grokking transformer (growcert.experiments.grokking.build_model at p = 97: the llama family,
  2 blocks, width 128, 4 heads, context 4, loss on the answer position; ~421k parameters), batch 512;
- a ~1M-parameter LLaMA byte LM (width 128, 5 blocks, context 64, every-token loss), batch 16.
Each timed step is everything a training step of that optimizer needs: AdamW and streaming take
forward + backward + step; exact takes `per_example_square_sums` (one forward, one backward, the
hooks' Σ g² in place of materialised per-example gradients) + step; microbatch takes
`microbatch_square_sums` (K = 4 accumulation backwards) + step. All run gate="update". The
optimizers alternate round by round so that load from other processes hits them alike; medians
over rounds are reported. Goal: exact / AdamW <= 2 on the grokking model.

    PYTHONPATH=src .venv/bin/python benchmarks/optim.py [--rounds 15] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from growcert.config import stage_settings
from growcert.experiments.grokking import build_model
from growcert.models.llama import Llama, LlamaConfig
from growcert.optim import PopulationRiskAdam, microbatch_square_sums, per_example_square_sums

SOURCES = ("adamw", "streaming", "exact", "microbatch")
MICROBATCHES = 4


def answer_loss(logits: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits[:, -1], answers, reduction="none")


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.transpose(1, 2), targets, reduction="none").mean(dim=1)


def make_optimizer(source: str, model: torch.nn.Module, batch: int) -> torch.optim.Optimizer:
    if source == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=0.01)
    extra = {"microbatches": MICROBATCHES} if source == "microbatch" else {}
    return PopulationRiskAdam(
        model.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=0.01, variance=source, batch_size=batch, **extra
    )


def one_step(source, model, optimizer, loss_fn, inputs, targets) -> None:
    optimizer.zero_grad(set_to_none=True)
    if source == "exact":
        optimizer.step(square_sums=per_example_square_sums(model, loss_fn, inputs, targets)[1])
    elif source == "microbatch":
        optimizer.step(
            square_sums=microbatch_square_sums(model, loss_fn, inputs, targets, microbatches=MICROBATCHES)[1]
        )
    else:
        loss_fn(model(inputs), targets).mean().backward()
        optimizer.step()


def measure(name: str, build, batch_of, loss_fn, batch: int, rounds: int) -> None:
    torch.manual_seed(0)
    initial = build().state_dict()
    models = {source: build() for source in SOURCES}
    for model in models.values():
        model.load_state_dict(initial)
    optimizers = {source: make_optimizer(source, models[source], batch) for source in SOURCES}
    generator = torch.Generator().manual_seed(1)
    times = {source: [] for source in SOURCES}
    for round_index in range(rounds + 3):  # 3 warm-up rounds
        inputs, targets = batch_of(generator)
        for source in SOURCES:
            started = time.perf_counter()
            one_step(source, models[source], optimizers[source], loss_fn, inputs, targets)
            if round_index >= 3:
                times[source].append(time.perf_counter() - started)
    parameters = sum(p.numel() for p in models["adamw"].parameters())
    adamw = statistics.median(times["adamw"])
    print(f"{name}: {parameters:,} parameters, batch {batch}, median of {rounds} rounds")
    for source in SOURCES:
        median = statistics.median(times[source])
        print(f"  {source:>10}: {median * 1e3:8.1f} ms/step   ratio to AdamW {median / adamw:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed steps per optimizer (after 3 warm-up rounds)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    print(f"{args.threads} thread(s); gate='update'; microbatch K = {MICROBATCHES}")

    p = 97
    settings = stage_settings("grokking", {"p": p})

    def equations(generator):
        a, b = torch.randint(0, p, (512,), generator=generator), torch.randint(1, p, (512,), generator=generator)
        tokens = torch.stack((a, torch.full_like(a, p), b, torch.full_like(a, p + 1)), dim=1)
        return tokens, torch.randint(0, p, (512,), generator=generator)  # answers: timing only

    measure(f"grokking transformer (p = {p})", lambda: build_model(settings), equations, answer_loss, 512, args.rounds)

    config = LlamaConfig(width=128, depth=5, vocab_size=256, head_dim=32, context=64)

    def text(generator):
        tokens = torch.randint(0, 256, (16, config.context + 1), generator=generator)
        return tokens[:, :-1], tokens[:, 1:]

    measure(
        "LLaMA byte LM (width 128, depth 5, context 64)", lambda: Llama(config), text, next_token_loss, 16, args.rounds
    )


if __name__ == "__main__":
    main()
