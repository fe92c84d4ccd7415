"""Step time of PopulationRiskAdam against torch's Adam, measured side by side in one run.

A ~1M-parameter LLaMA-style byte LM (width 128, 5 blocks, context 64), batch 16. Each timed step is
forward + backward + optimizer step; the optimizers alternate round by round so that load from other
processes hits them alike, and the median over rounds is reported. Goal: streaming / Adam <= 1.3.
The exact variant also pays for per-example gradients (torch.func vmap), which is its real cost.

    .venv/bin/python benchmarks/optim.py [--rounds 30] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
import torch.nn.functional as F

from growcert.models.llama import Llama, LlamaConfig
from growcert.optim import PopulationRiskAdam, per_example_gradients


def per_example_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.transpose(1, 2), targets, reduction="none").mean(dim=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="timed steps per optimizer (after 3 warm-up rounds)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--batch", type=int, default=16, help="sequences per step")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    warnings.filterwarnings("ignore", message="There is a performance drop")  # vmap's SDPA fallback, known

    config = LlamaConfig(width=128, depth=5, vocab_size=256, head_dim=32, context=64)
    torch.manual_seed(0)
    initial = Llama(config).state_dict()
    models, optimizers = {}, {}
    for name in ("adam", "streaming", "exact"):
        models[name] = Llama(config)
        models[name].load_state_dict(initial)
        parameters = models[name].parameters()
        optimizers[name] = (torch.optim.Adam(parameters, lr=1e-3) if name == "adam" else
                            PopulationRiskAdam(parameters, lr=1e-3, variance=name, batch_size=args.batch))
    generator = torch.Generator().manual_seed(1)
    total, step_only = {name: [] for name in models}, {name: [] for name in models}

    for round_index in range(args.rounds + 3):
        tokens = torch.randint(0, 256, (args.batch, config.context + 1), generator=generator)
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        for name, model in models.items():
            optimizer = optimizers[name]
            started = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            if name == "exact":
                _, grads = per_example_gradients(model, per_example_loss, inputs, targets)
            else:
                per_example_loss(model(inputs), targets).mean().backward()
                grads = None
            stepping = time.perf_counter()
            optimizer.step(per_example_grads=grads) if grads is not None else optimizer.step()
            finished = time.perf_counter()
            if round_index >= 3:
                total[name].append(finished - started)
                step_only[name].append(finished - stepping)

    parameters = sum(p.numel() for p in models["adam"].parameters())
    print(f"model: LLaMA width {config.width}, depth {config.depth}, {parameters:,} parameters; batch {args.batch} x "
          f"{config.context} tokens; {args.threads} thread(s); median of {args.rounds} rounds")
    adam_total, adam_step = statistics.median(total["adam"]), statistics.median(step_only["adam"])
    for name in models:
        full, step = statistics.median(total[name]), statistics.median(step_only[name])
        print(f"{name:>10}: {full * 1e3:8.2f} ms/step (optimizer.step {step * 1e3:6.2f} ms)   "
              f"ratio to Adam: full step {full / adam_total:5.2f}, optimizer.step {step / adam_step:5.2f}")
    ratio = statistics.median(total["streaming"]) / adam_total
    print(f"streaming / Adam full-step ratio {ratio:.2f} (goal <= 1.30): {'met' if ratio <= 1.3 else 'NOT met'}")


if __name__ == "__main__":
    main()
