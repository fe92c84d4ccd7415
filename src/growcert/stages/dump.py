"""`growcert dump`: per-example (z, q) of a checkpoint at every insertion point, into a gradient store.

Examples: `train_examples` drawn from the training split the model was fit on and
`test_examples` from the held-out split (seeded, the same rows for every width and depth of a
grid), train first. Batches go through `capture.capture_batch`; results are buffered until
they fill whole store chunks and then written, so memory stays at one batch plus one chunk.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import zarr

from growcert.data import PreparedDataset
from growcert.data.batches import dump_examples
from growcert.errors import NumericalError
from growcert.models import family_of
from growcert.models.capture import capture_batch, native_dims
from growcert.models.checkpoint import load_model
from growcert.provenance import provenance
from growcert.runtime import capped_batch_size, device_record, torch_runtime
from growcert.store import GroupSpec, StoreWriter, sample_chunk
from growcert.store.encoding import StoreOptions
from growcert.training import text_context, to_device


class ChunkBuffer:
    """Collects one group's captured rows and hands them out in whole chunks of that group."""

    def __init__(self, group: str, chunk: int):
        self.group, self.chunk = group, chunk
        self.parts: list[dict[str, np.ndarray]] = []
        self.buffered = self.written = 0

    def add(self, rows: dict[str, np.ndarray]) -> list[tuple[str, int, dict[str, np.ndarray]]]:
        self.parts.append(rows)
        self.buffered += len(rows["loss"])
        return self._take((self.buffered // self.chunk) * self.chunk)

    def drain(self) -> list[tuple[str, int, dict[str, np.ndarray]]]:
        return self._take(self.buffered)

    def _take(self, count: int) -> list[tuple[str, int, dict[str, np.ndarray]]]:
        if count == 0:
            return []
        joined = {key: np.concatenate([part[key] for part in self.parts]) for key in self.parts[0]}
        self.parts = [{key: array[count:] for key, array in joined.items()}]
        start, self.written, self.buffered = self.written, self.written + count, self.buffered - count
        return [(self.group, start, {key: array[:count] for key, array in joined.items()})]


def dump_gradients(
    checkpoint: str | Path,
    data: PreparedDataset,
    out: str | Path,
    settings: dict[str, Any],
    threads: int = 1,
    log: Callable[[str], None] = print,
    hf: dict[str, Any] | None = None,
    *,
    device: str,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Write the gradient store of `checkpoint` to `out`, capturing on `device`; returns the store path.
    q, z and the losses are captured in the checkpoint's fp32 and copied to the host before they are stored.
    `progress(captured, total)`, if given, is called after every batch (a progress bar's feed).

    `settings` is the dump section as resolved once by the caller (`growcert.config.stage_settings("dump", ...)`:
    the command line, or advise); with `hf` settings, `checkpoint` is a pretrained Hugging Face causal LM
    (`models.checkpoint.load_model`).
    """
    # The template's writes run in zarr's thread pool and the chunks' compression on the store's own workers:
    # as many as the job's cores (zarr's default would take every core of a shared node).
    with torch_runtime(threads, device=device) as runtime, zarr.config.set({"threading.max_workers": threads}):
        return _dump(
            checkpoint, data, Path(out), settings, log, hf, runtime.device, progress or (lambda *_: None), threads
        )


def _dump(
    checkpoint: str | Path,
    data: PreparedDataset,
    out: Path,
    settings: dict[str, Any],
    log: Callable[[str], None],
    hf: dict[str, Any] | None,
    device,
    progress: Callable[[int, int], None],
    workers: int,
) -> Path:
    model, meta, data = load_model(checkpoint, data, hf)
    model = model.to(device)
    family = meta["family"]
    context = text_context(data, meta["model_options"])
    examples, split = dump_examples(data, settings, context)
    points = tuple(settings["points"] or model.points.keys())

    rules = family_of(family)
    specs = _group_specs(model, examples, points, family, rules, device)
    labels = examples.targets.numpy() if data.info["kind"] == "image" else np.full(len(examples), -1)
    attrs = _store_attrs(meta, data, rules, model, checkpoint, split, settings, device)
    group_attrs = {spec.name: {"native_dims": list(spec.dims)} for spec in specs}
    options = StoreOptions.from_settings(settings)
    chunks = {spec.name: sample_chunk(spec, len(examples), itemsize=options.itemsize) for spec in specs}
    log(
        f"dumping {len(examples)} examples ({attrs['n_train']} train, {attrs['n_test']} test) at {len(points)} points "
        f"of {checkpoint} -> {out} (chunks of {min(chunks.values())}-{max(chunks.values())} samples; "
        f"{'+'.join(options.variables)} as {options.dtype}, shards of {options.shards or 1} chunks)"
    )
    # Buffers hand out whole chunks, the writer's alignment rule (also when sharded).
    buffers = {name: ChunkBuffer(name, chunks[name]) for name in points}
    started = time.perf_counter()
    writer = _BackgroundWriter(
        out,
        specs,
        split,
        examples.index,
        labels,
        attrs,
        group_attrs,
        options=options,
        workers=workers,
        loss_description=rules.loss_description,
    )
    # q and z of every stored point, float32, are what one batch captures on the device
    captured_bytes = sum(2 * 4 * int(np.prod(spec.shape)) for spec in specs)
    batch_size = capped_batch_size(settings["batch_size"], captured_bytes, settings["max_batch_mb"])
    log(
        f"capturing on {device} in batches of {batch_size} (dump.batch_size {settings['batch_size']}, "
        f"max_batch_mb {settings['max_batch_mb']}: {captured_bytes * batch_size / 2**20:.1f} MiB of q and z)"
    )
    total_batches = -(-len(examples) // batch_size)
    try:
        for number, (inputs, targets) in enumerate(examples.batches(batch_size), start=1):
            captured = capture_batch(model, to_device(inputs, device), to_device(targets, device), points)
            _check_finite(captured, points, out, (number - 1) * batch_size)
            # point by point, so that one point's host copy is in its buffer before the next is made
            writer.submit(
                [
                    item
                    for name in points
                    for item in buffers[name].add(_point_arrays(captured, name, options.variables))
                ]
            )
            progress(min(number * batch_size, len(examples)), len(examples))
            if number % max(1, total_batches // 10) == 0 or number == total_batches:
                captured_so_far = number * batch_size if number < total_batches else len(examples)
                log(
                    f"batch {number}/{total_batches}: {captured_so_far} examples captured, "
                    f"{time.perf_counter() - started:.1f}s"
                )
        # The last chunks of every group: no more capturing, so its core takes a writer too.
        writer.submit([item for name in points for item in buffers[name].drain()], workers + 1)
        path = writer.finish()
    finally:
        writer.shutdown()
    log(f"done: {path} in {time.perf_counter() - started:.1f}s")
    return path


def _group_specs(model, examples, points: tuple[str, ...], family: str, rules, device) -> list[GroupSpec]:
    """The store's group of each point, its shape from one example captured on `device`."""
    probe = capture_batch(
        model, to_device(examples.inputs[:1], device), to_device(examples.targets[:1], device), points
    )
    return [
        GroupSpec(
            name,
            native_dims(family, tuple(probe.z[name].shape[1:])),
            tuple(probe.z[name].shape[1:]),
            rules.position_dims,
        )
        for name in points
    ]


def _point_arrays(captured, name: str, variables: tuple[str, ...]) -> dict[str, np.ndarray]:
    """One batch's arrays at point `name` as its buffer takes them: the loss and each stored variable."""
    return {"loss": captured.loss.cpu().numpy(), **{v: getattr(captured, v)[name].cpu().numpy() for v in variables}}


class _BackgroundWriter:
    """One background writer: it creates the store's template (a `StoreWriter` of the arguments given), then
    compresses and writes whole chunks (blosc and file writes release the GIL) while the next batches are captured.
    At most one batch of chunks waits for it, so memory stays at a few chunks; each batch is one `write_many` (on the
    store's workers), in capture order, and `finish` runs only after the last one."""

    def __init__(self, *args, **kwargs):
        self.background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="growcert-dump-writer")
        self.creating = self.background.submit(StoreWriter, *args, **kwargs)
        self.writing: list[Future] = []

    def submit(self, ready: list[tuple[str, int, dict[str, np.ndarray]]], batch_workers: int | None = None) -> None:
        if not ready:
            return
        self.wait()
        self.writing.append(self.background.submit(lambda: self.creating.result().write_many(ready, batch_workers)))

    def wait(self) -> None:
        while self.writing:
            self.writing.pop().result()  # waits for the previous batch; re-raises a failed write here

    def finish(self) -> Path:
        self.wait()
        return self.creating.result().finish()

    def shutdown(self) -> None:
        # On an error (a failed write, a non-finite batch), the write in progress ends before the error
        # leaves: nothing writes into the `.partial` folder afterwards, and nothing queued starts.
        self.background.shutdown(wait=True, cancel_futures=True)


def _store_attrs(
    meta: dict[str, Any],
    data: PreparedDataset,
    rules,
    model,
    checkpoint: str | Path,
    split: np.ndarray,
    settings: dict[str, Any],
    device,
) -> dict[str, Any]:
    """The store's root attributes: the model, data and checkpoint it was dumped from, and the run's provenance."""
    attrs = {
        "family": meta["family"],
        "width": meta["width"],
        "depth": meta["depth"],
        "seed": meta["provenance"]["seed"],
        "step": meta["step"],
        "dataset": data.name,
        "data_sha256": data.info.get("sha256"),
        "loss_function": rules.loss_name,
        "model_dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
        "checkpoint": str(checkpoint),
        "training_config_hash": meta["provenance"]["config_hash"],
        "n_train": int((split == "train").sum()),
        "n_test": int((split == "test").sum()),
        "provenance": {
            **provenance(settings, settings["seed"]),
            **device_record(device),
            "zarr": zarr.__version__,
            "xarray": xr.__version__,
        },
        **meta.get("store_attrs", {}),  # hf: model name, source folder, architecture, tokenizer
    }
    swept = meta["provenance"].get("settings", {}).get("context")
    if swept is not None:  # a run of a context sweep: context joins the store's identity (and its tables' keys)
        attrs["context"] = swept
    return attrs


def _check_finite(captured, points: tuple[str, ...], out: Path, first: int) -> None:
    """A NaN or infinite q, z or loss is never stored: the dump stops, naming the store, point and examples
    (the store stays a `.partial` folder, which no reader takes for a store)."""
    import torch

    checked = [("loss", captured.loss)] + [(f"{v} at {p}", getattr(captured, v)[p]) for p in points for v in ("q", "z")]
    # One pass per tensor and one device sync: min and max propagate NaN and show an infinity.
    extremes = torch.stack([torch.stack(torch.aminmax(values)).float() for _, values in checked])
    if bool(torch.isfinite(extremes).all()):
        return
    for name, values in checked:
        bad = ~torch.isfinite(values.reshape(len(values), -1)).all(dim=1)
        if bad.any():
            rows = bad.nonzero().flatten() + first
            raise NumericalError(
                f"store {out}: non-finite {name} for examples {rows[:5].tolist()} (of "
                f"{int(bad.sum())} in this batch); nothing stored. Check the checkpoint"
            )
