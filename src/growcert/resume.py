"""Resume states for long jobs: atomic snapshots beside the output, checked against the settings, and
SIGTERM (a SLURM time limit or preemption) turned into a last snapshot and a clean exit.

A job's resume folder is the hidden sibling `.{name}.resume` of its output folder (a P2 unit, whose outputs
are files in a folder of its own, keeps it inside that folder: `experiments.units`). It is not a declared
output, so Snakemake's cleanup of a failed job's outputs leaves it alone; the job removes it once its
outputs are complete. `state.pt` is written to a temporary name and renamed, so a kill at any moment
leaves either the previous snapshot or the new one. A snapshot records the settings hash it was made
under: a rerun with other settings discards it (and says so), a damaged one stops the job in one line.
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from growcert import numerics
from growcert.config import settings_hash
from growcert.errors import CheckpointError, GrowcertError
from growcert.files import atomic_path

STATE_FILE = "state.pt"
FORMAT = "growcert-resume-1"


class Interrupted(GrowcertError):
    """The job was asked to stop (SIGTERM); its resume state is saved and a rerun continues from it."""


def resume_folder(out: str | Path) -> Path:
    """The resume folder of output folder `out`: its hidden sibling `.{name}.resume`."""
    out = Path(out)
    return out.with_name(f".{out.name}.resume")


class ResumeFolder:
    """Snapshots of one job, valid for one settings hash; files saved alongside (checkpoints) live here too."""

    def __init__(
        self,
        out: str | Path,
        settings: dict[str, Any],
        log: Callable[[str], None] = print,
        path: str | Path | None = None,
    ):
        # `path`: the folder itself, for a job whose output is files inside a folder it owns (a P2 unit)
        self.path = resume_folder(out) if path is None else Path(path)
        self.hash, self.log = settings_hash(settings), log

    @property
    def state_file(self) -> Path:
        return self.path / STATE_FILE

    def load(self) -> dict[str, Any] | None:
        """The last snapshot, or None (none yet, or made under other settings: then discarded)."""
        if not self.state_file.is_file():
            return None
        try:
            state = torch.load(self.state_file, map_location="cpu", weights_only=False)
        except Exception as error:  # truncated or foreign file: torch raises several types
            raise CheckpointError(
                f"resume state {self.state_file}: unreadable ({type(error).__name__}); delete {self.path} to start over"
            ) from None
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise CheckpointError(f"resume state {self.state_file}: not a growcert resume state; delete {self.path}")
        if state.get("settings_hash") != self.hash:
            self.log(
                f"resume state {self.state_file} was made with other settings (hash {state.get('settings_hash')}, "
                f"now {self.hash}): discarded, starting over"
            )
            self.clear()
            return None
        return state

    def save(self, state: dict[str, Any]) -> None:
        with atomic_path(self.state_file) as temporary:
            torch.save({**state, "format": FORMAT, "settings_hash": self.hash}, temporary)

    def clear(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class StopRequest:
    """Set by SIGTERM while `termination_requests` is active; the loop checks it between steps."""

    def __init__(self):
        self.requested = False


@contextmanager
def termination_requests() -> Iterator[StopRequest]:
    """Turn SIGTERM into a request the training loop honours at the next step boundary (it then saves its
    state and raises Interrupted); the previous handler is restored afterwards."""
    request = StopRequest()

    def handler(signum, frame):
        request.requested = True

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: no signal handling, the job just runs
        yield request
        return
    try:
        yield request
    finally:
        signal.signal(signal.SIGTERM, previous)


class UnitResume:
    """The resume state of a job made of units run in a fixed order (the arms × seeds of an experiment, the
    phases of a growth comparison): each finished unit's result, and for the unit in progress the snapshot
    its loop hands to `tick`. Saved after every unit, every `every` steps inside one, and at once on SIGTERM
    (then `Interrupted` is raised). Keys are tuples of ints: (seed index, unit index).

    The state keeps the numerics that started the job (`growcert.numerics.record`). A job resumed under other
    kernels (another mode, or under native another CPU) says so in its log and keeps `numerics_changed` for its
    summary: its numbers are then those of neither machine alone."""

    def __init__(
        self,
        out: str | Path,
        settings: dict[str, Any],
        every: int | None,
        log: Callable[[str], None],
        path: str | Path | None = None,
    ):
        self.folder, self.every, self.log = ResumeFolder(out, settings, log, path), every, log
        now = numerics.record()
        self.state = self.folder.load() or {"done": {}, "current": None, "numerics": now, "numerics_changed": False}
        started = self.state.setdefault("numerics", None)  # None: a state made before numerics were recorded
        if started is not None and numerics.kernels(started) != numerics.kernels(now):
            self.log(
                f"resumed under other numerics than those that started this job: started under "
                f"{numerics.kernels(started)}, now {numerics.kernels(now)}; its numbers are those of neither "
                "machine alone (summary column numerics_changed)"
            )
            self.state["numerics_changed"] = True
        self.stop: StopRequest | None = None
        self.key: tuple[int, ...] | None = None

    def numerics_columns(self) -> dict[str, Any]:
        """The summary columns of the job's numerics: the mode that started it, and whether it changed since."""
        started = self.state["numerics"] or numerics.record()
        return {"numerics": started["numerics"], "numerics_changed": bool(self.state.get("numerics_changed"))}

    def done(self, key: tuple[int, ...]) -> bool:
        return key in self.state["done"]

    def result(self, key: tuple[int, ...]) -> Any:
        return self.state["done"][key]

    def start(self, key: tuple[int, ...], stop: StopRequest | None) -> Any:
        """Begin unit `key`; returns the snapshot a killed run left inside it, else None."""
        self.key, self.stop = key, stop
        current = self.state["current"]
        if current is not None and tuple(current["key"]) == key:
            self.log(f"resumed unit {key} at step {current['step']} from {self.folder.state_file}")
            return current["snapshot"]
        return None

    def tick(self, step: int, snapshot: Callable[[], Any]) -> None:
        """Called by a unit's loop after each step: save every `every` steps, and save and stop on SIGTERM."""
        stopping = self.stop is not None and self.stop.requested
        if stopping or (self.every and step % self.every == 0):
            self.state["current"] = {"key": self.key, "step": step, "snapshot": snapshot()}
            self.folder.save(self.state)
        if stopping:
            raise Interrupted(
                f"stopped by SIGTERM in unit {self.key} after step {step}; resume state saved to "
                f"{self.folder.state_file}, a rerun continues from it"
            )

    def finished(self, result: Any) -> None:
        self.state["done"][self.key] = result
        self.state["current"] = None
        self.folder.save(self.state)
        if self.stop is not None and self.stop.requested:  # a unit without snapshots stops at its end
            raise Interrupted(
                f"stopped by SIGTERM after unit {self.key}; resume state saved to "
                f"{self.folder.state_file}, a rerun continues from it"
            )
