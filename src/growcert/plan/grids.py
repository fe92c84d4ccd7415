"""Training grids: the runs a config trains, their settings and their results-folder wildcards.

A grid (config key `grids[]`) trains family x dataset over widths x depths x seeds with one budget.
A grid that sets `contexts` (llama only) also sweeps the sequence length: each context is its own
run, in a folder tagged with it (`w64_d2_s0_c256`), trained on `tokens_per_step / context`
sequences per step so that every context sees the same tokens per step (P1's fifth pilot, docs/science.md,
"P1: pilots"). A grid without `contexts` keeps the family's `models.<family>.context` and untagged folders.
Several grids may train one family on one dataset (e.g. a width grid and a depth grid, each with its
own budget) as long as no two train the same (width, depth, seed, context) cell.
`check_grids` checks the grids of a config (growcert.plan.validate_config runs it).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from growcert.config import check_budget
from growcert.data.text import grid_budget_problem
from growcert.errors import ConfigError
from growcert.models import check_context_family, check_family, check_model


def check_contexts(where: str, grid: dict[str, Any]) -> None:
    """A context sweep: a family with a sequence length, distinct lengths, and one token budget per step
    that every context divides (batch = tokens_per_step / context, so every context sees the same tokens)."""
    if grid["contexts"] is None:
        if grid["tokens_per_step"] is not None:
            raise ConfigError(f"config key '{where}.tokens_per_step': only used with {where}.contexts")
        return
    check_context_family(f"{where}.contexts", grid["family"])
    if len(set(grid["contexts"])) != len(grid["contexts"]):
        raise ConfigError(f"config key '{where}.contexts': context lengths must be distinct")
    tokens = grid["tokens_per_step"]
    if tokens is None:
        raise ConfigError(
            f"config key '{where}.tokens_per_step': required with {where}.contexts (batch = tokens_per_step / context)"
        )
    for index, context in enumerate(grid["contexts"]):
        if tokens % context:
            raise ConfigError(
                f"config key '{where}.contexts[{index}]': {context} does not divide "
                f"tokens_per_step {tokens} (batch = tokens_per_step / context)"
            )


def check_grids(config: dict[str, Any]) -> None:
    """Every grid of a validated config: its family's rules on its dataset, widths and depths, its contexts and
    budget (a text corpus's side of the budget too), and one run folder per (family, dataset, width, depth, seed,
    context): two grids may share a family/dataset (a width grid and a depth grid) but not a cell, which would
    be two runs in one folder."""
    seen: dict[tuple[str, str, int, int, int, int | None], int] = {}
    for position, grid in enumerate(config["grids"]):
        where = f"grids[{position}]"
        options = config["models"].get(grid["family"], {})
        check_family(where, grid["family"])
        check_contexts(where, grid)
        for cell in sorted(grid_cells(grid), key=str):
            key = (grid["family"], grid["dataset"], *cell)
            if key in seen and seen[key] != position:
                width, depth, seed, context = cell
                raise ConfigError(
                    f"config key '{where}': family/dataset {key[0]}/{key[1]} at width {width}, depth "
                    f"{depth}, seed {seed}"
                    + (f", context {context}" if context else "")
                    + f" is already used by grids[{seen[key]}]"
                )
            seen[key] = position
        check_budget(f"{where}.train", grid["train"])
        if grid["dataset"] == "text":  # the corpus's side of the budget is checked when it is prepared
            if problem := grid_budget_problem(grid["train"], options["context"], config["datasets"]["text"]):
                raise ConfigError(f"config key '{where}.train': {problem}")
        check_model(
            where,
            grid["family"],
            grid["dataset"],
            {f"widths[{index}]": width for index, width in enumerate(grid["widths"])},
            {f"depths[{index}]": depth for index, depth in enumerate(grid["depths"])},
            options,
        )


def sweeps_context(grid: dict[str, Any]) -> bool:
    return grid.get("contexts") is not None


@dataclass(frozen=True)
class Run:
    """One trained model of a grid: the wildcards of its results folder."""

    family: str
    dataset: str
    width: int
    depth: int
    seed: int
    context: int | None = None  # set for a run of a grid that sweeps context (grids[].contexts)


def context_tag(context: int | None) -> str:
    """The suffix a context sweep adds to a run's folder name (w64_d2_s0_c256); empty otherwise, so the
    folders of a grid without `contexts` keep their names."""
    return "" if context is None else f"_c{context}"


def context_of_tag(tag: str) -> int | None:
    """The inverse of context_tag."""
    return int(tag.removeprefix("_c")) if tag else None


def run_wildcards(run: Run) -> dict[str, Any]:
    """The wildcards of a run's paths (growcert.pipeline.artifacts): the run's fields, context as its folder tag."""
    fields = {key: value for key, value in vars(run).items() if key != "context"}
    return {**fields, "context_tag": context_tag(run.context)}


def run_of(wildcards: Any) -> Run:
    """The run a job's wildcards name (family, dataset, width, depth, seed, context_tag)."""
    return Run(
        wildcards.family,
        wildcards.dataset,
        int(wildcards.width),
        int(wildcards.depth),
        int(wildcards.seed),
        context_of_tag(wildcards.context_tag),
    )


def training_runs(config: dict[str, Any]) -> list[Run]:
    """Every (family, dataset, width, depth, seed[, context]) the config trains, in grid order."""
    return [
        Run(g["family"], g["dataset"], w, d, s, c)
        for g in config["grids"]
        for c in (g.get("contexts") or [None])
        for w in g["widths"]
        for d in g["depths"]
        for s in g["seeds"]
    ]


def grid_cells(grid: dict[str, Any]) -> set[tuple[int, int, int, int | None]]:
    """The (width, depth, seed, context) cells a grid trains: one run folder each."""
    contexts = grid["contexts"] if sweeps_context(grid) else [None]
    return set(itertools.product(grid["widths"], grid["depths"], grid["seeds"], contexts))


def grid_of(config: dict[str, Any], run: Run) -> dict[str, Any]:
    """The grid that trains `run`: of its family and dataset, a context sweep when the run has a context,
    and holding its width, depth, seed and context (config validation keeps the grids' cells disjoint)."""
    for grid in config["grids"]:
        if (grid["family"], grid["dataset"]) == (run.family, run.dataset) and (
            run.width,
            run.depth,
            run.seed,
            run.context,
        ) in grid_cells(grid):
            return grid
    sweep = f" at context {run.context}" if run.context is not None else ""
    raise ConfigError(
        f"config key 'grids': no grid trains {run.family} on {run.dataset} at width {run.width}, "
        f"depth {run.depth}, seed {run.seed}{sweep}"
    )


def train_settings(config: dict[str, Any], run: Run) -> dict[str, Any]:
    """Everything `growcert train` needs for one run (and nothing else, so unrelated edits do not retrain).

    A run of a context sweep also carries `context` (the axis value), sets the model's context to it,
    and trains batch_size = tokens_per_step / context sequences per step: every context sees the same
    tokens per step and, over the budget, the same tokens in all.
    """
    grid = grid_of(config, run)
    settings = {
        "family": run.family,
        "dataset": run.dataset,
        "width": run.width,
        "depth": run.depth,
        "seed": run.seed,
        "model": dict(config["models"].get(run.family, {})),
        "train": dict(grid["train"]),
    }
    if run.context is not None:
        settings["context"] = run.context
        settings["model"]["context"] = run.context
        settings["train"]["batch_size"] = grid["tokens_per_step"] // run.context
    return settings


def run_steps(config: dict[str, Any], run: Run) -> list[int]:
    """The checkpoint steps of a run (each gets a gradient store)."""
    return sorted(grid_of(config, run)["train"]["save_steps"])
