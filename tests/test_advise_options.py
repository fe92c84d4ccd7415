"""`growcert advise`'s options with predictions (docs/science.md, "advise: options with predictions"): the
predicted held-out gain of S Adam steps (`stats.update_gain`) against brute-force runs of torch's own AdamW, and the
decision (`stages.advise.predictions_table`, `report.advice.options_table`) on a residual net one block short of its
task (grow) and on one at a noise floor (never grow)."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from threadpoolctl import threadpool_limits
from torch import nn

from growcert.models.residual import ZeroOutputBlock
from growcert.optim.per_example import gradient_rows, model_drawn_targets
from growcert.report.advice import GROW_AT, NO_EVIDENCE, TRAIN_ON, options_table
from growcert.runtime import torch_runtime
from growcert.stages.advise import predictions_table
from growcert.stats.update_gain import gain_parts, predicted_gain

BATCH, GROUPS, LEVEL = 16, 10, 0.95
RUNS = 20  # brute-force runs (batch orders) averaged into the expected change


@pytest.fixture(autouse=True)
def one_thread():
    """torch and numpy's BLAS on one thread, as advise runs them: tiny models lose far more than they gain from a
    second thread on a shared machine (minutes instead of seconds here)."""
    with torch_runtime(1), threadpool_limits(1):
        yield


class Classifier(nn.Module):
    """A tiny tanh MLP on 8 features, 3 classes."""

    def __init__(self):
        super().__init__()
        self.hidden, self.out = nn.Linear(8, 16), nn.Linear(16, 3)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))

    @staticmethod
    def per_example_loss(outputs, targets):
        return F.cross_entropy(outputs, targets, reduction="none")


def _noisy_labels(count: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian features, labels drawn from a fixed softmax-linear teacher: a floor no model can beat."""
    x = torch.randn(count, 8, generator=generator)
    teacher = torch.randn(8, 3, generator=torch.Generator().manual_seed(99))
    return x, torch.multinomial(torch.softmax(2 * x @ teacher, dim=1), 1, generator=generator)[:, 0]


def _adam_steps(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float, steps: int, seed: int) -> None:
    """`steps` AdamW steps (constant lr, no decay) on batches of BATCH from seeded permutations of (x, y)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr, weight_decay=0.0)
    rng = np.random.default_rng(seed)
    order = np.concatenate([rng.permutation(len(x)) for _ in range(steps * BATCH // len(x) + 1)])
    for step in range(steps):
        batch = order[step * BATCH : (step + 1) * BATCH]
        loss = model.per_example_loss(model(x[batch]), y[batch]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def _held_out_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float(model.per_example_loss(model(x), y).mean())


@pytest.mark.parametrize("trained_steps", [0, 300, 2000], ids=["at init", "training", "overfitting"])
def test_the_train_on_prediction_holds_a_brute_force_run_of_adamw(trained_steps):
    """A checkpoint of the tiny classifier (256 training, 256 held-out examples), trained `trained_steps` steps; the
    predicted gain of S = 20 AdamW steps at lr 1e-3 from its per-example gradients, against the mean held-out gain of
    RUNS brute-force runs (torch's AdamW, fresh state, the dumped training rows as the training set, the dumped
    held-out rows as the held-out set): inside the prediction's interval. At init the interval is narrow (±10 %), so
    a wrong reading fails: Adam's step without the SNR shrinkage (lr·sign μ) predicts 0.071–0.10 against 0.058, SGD's
    (lr·μ) 0.004 (checked by hand); overfitting, the prediction's sign is the run's (held-out loss rises)."""
    generator = torch.Generator().manual_seed(0)
    (x_train, y_train), (x_held, y_held) = _noisy_labels(256, generator), _noisy_labels(256, generator)
    torch.manual_seed(0)
    model = Classifier()
    if trained_steps:
        _adam_steps(model, x_train, y_train, 1e-2, trained_steps, seed=123)
    lr, steps = 1e-3, 20
    parts = gain_parts(
        gradient_rows(model, x_train, y_train),
        gradient_rows(model, x_held, y_held),
        gradient_rows(model, x_held, model_drawn_targets(model, x_held, seed=0)),
        BATCH,
        GROUPS,
    )
    predicted = predicted_gain(parts, lr, steps, BATCH, GROUPS, LEVEL)
    assert predicted.reach < 0.2  # inside the local range the prediction claims (advise.local_reach's default)

    before = _held_out_loss(model, x_held, y_held)
    gains = []
    for run in range(RUNS):
        trained = copy.deepcopy(model)
        _adam_steps(trained, x_train, y_train, lr, steps, seed=run)
        gains.append(before - _held_out_loss(trained, x_held, y_held))
    brute, brute_se = np.mean(gains), np.std(gains, ddof=1) / np.sqrt(RUNS)
    assert brute_se < (predicted.high - predicted.low) / 8  # the runs' own noise is not what the check tolerates
    assert predicted.low <= brute <= predicted.high, (brute, predicted)
    if trained_steps == 2000:
        assert brute < 0 and predicted.estimate < 0


STREAM, NEW_HIDDEN, LOCAL_REACH = 8, 32, 0.2
POINTS = ("block0", "block1")


class ShallowResidual(nn.Module):
    """2 inputs -> a stream of STREAM features -> one residual block of a single tanh unit -> 3 logits; zero-output
    blocks (`models.residual.ZeroOutputBlock`) are inserted at block0 (before the block) or block1 (after it)."""

    def __init__(self):
        super().__init__()
        self.embed, self.head = nn.Linear(2, STREAM), nn.Linear(STREAM, 3)
        self.block_in, self.block_out = nn.Linear(STREAM, 1), nn.Linear(1, STREAM)
        self.inserted = nn.ModuleDict()

    def forward(self, x):
        stream = self.embed(x)
        stream = stream + (self.inserted["block0"](stream) if "block0" in self.inserted else 0)
        stream = stream + self.block_out(torch.tanh(self.block_in(stream)))
        stream = stream + (self.inserted["block1"](stream) if "block1" in self.inserted else 0)
        return self.head(stream)

    per_example_loss = staticmethod(Classifier.per_example_loss)


def _new_block() -> ZeroOutputBlock:
    return ZeroOutputBlock(STREAM, NEW_HIDDEN, -1, "identity", seed=1)


def _grown(model: nn.Module, point: str) -> nn.Module:
    grown = copy.deepcopy(model)
    grown.inserted[point] = _new_block()
    return grown


def _options(model, train, held_out, lr, steps) -> pd.DataFrame:
    """advise's options table for `model` on (x, y) training and held-out examples, grown at POINTS: the base's
    per-example gradients, and each grown model's W_out rows (the only parameter the block adds)."""
    drawn = model_drawn_targets(model, held_out[0], seed=0)

    def parts(net):
        return gain_parts(
            gradient_rows(net, *train),
            gradient_rows(net, *held_out),
            gradient_rows(net, held_out[0], drawn),
            BATCH,
            GROUPS,
        )

    blocks = {}
    for point in POINTS:
        grown = _grown(model, point)
        for parameter in grown.parameters():
            parameter.requires_grad_(parameter is grown.inserted[point].weight)
        blocks[point] = parts(grown)
    options = {"lr": lr, "steps": steps, "batch_size": BATCH, "groups": GROUPS, "level": LEVEL}
    first_order = pd.DataFrame({"point": POINTS, "point_index": [0, 1], "decision": "", "why": ""})
    return options_table(first_order, predictions_table(parts(model), blocks, options, LOCAL_REACH), LOCAL_REACH)


def _brute_gain(model, train, held_out, lr, steps, runs=5) -> float:
    """Mean held-out gain of `runs` AdamW runs of `steps` steps (every parameter of `model` trains)."""
    before = _held_out_loss(model, *held_out)
    gains = []
    for run in range(runs):
        trained = copy.deepcopy(model)
        _adam_steps(trained, *train, lr, steps, seed=run)
        gains.append(before - _held_out_loss(trained, *held_out))
    return float(np.mean(gains))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_net_one_block_short_of_its_task_is_told_to_grow(seed):
    """The task's labels are drawn from the net itself with one more block at block1 (the new block's own features,
    W_out drawn large): the net advised is that net without the block, so growing must help, and more than training
    on, which can only bend the one-unit block and the linear maps towards it. Checked here by brute force too:
    growing at the point advise picks beats training on, over the same S AdamW steps."""
    generator = torch.Generator().manual_seed(seed)
    x_train, x_held = torch.randn(512, 2, generator=generator), torch.randn(512, 2, generator=generator)
    torch.manual_seed(seed)
    model = ShallowResidual()
    teacher = _grown(model, "block1")
    with torch.no_grad():
        teacher.inserted["block1"].weight.copy_(
            torch.randn(STREAM, NEW_HIDDEN, generator=generator) * 3 / NEW_HIDDEN**0.5
        )
        y_train, y_held = (torch.distributions.Categorical(logits=teacher(x)).sample() for x in (x_train, x_held))
    lr, steps = 5e-4, 20
    table = _options(model, (x_train, y_train), (x_held, y_held), lr, steps)
    decision = table["decision"].iloc[0]
    assert decision.startswith(GROW_AT), table[["option", "gain", "gain_lo", "added", "added_lo", "reach", "why"]]
    chosen = table.loc[table["chosen"], "point"].iloc[0]
    trained_on = _brute_gain(model, (x_train, y_train), (x_held, y_held), lr, steps)
    assert _brute_gain(_grown(model, chosen), (x_train, y_train), (x_held, y_held), lr, steps) > trained_on


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_net_at_a_noise_floor_is_never_told_to_grow(seed):
    """Labels independent of the inputs, the net trained to the floor (the classes' frequencies): whatever the new
    block's steps fit is noise, so advise says train on or no evidence, never grow."""
    generator = torch.Generator().manual_seed(seed)
    x_train, x_held = torch.randn(512, 2, generator=generator), torch.randn(512, 2, generator=generator)
    y_train, y_held = (torch.randint(0, 3, (512,), generator=generator) for _ in range(2))
    torch.manual_seed(seed)
    model = ShallowResidual()
    _adam_steps(model, x_train, y_train, 1e-2, 2000, seed=seed)
    table = _options(model, (x_train, y_train), (x_held, y_held), 5e-4, 20)
    assert table["decision"].iloc[0] in (TRAIN_ON, NO_EVIDENCE), table[["option", "gain", "added", "added_lo", "why"]]
