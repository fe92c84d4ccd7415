"""Portable numerics (growcert.numerics; docs/science.md, "Reproducing on another machine").

- the golden units (tests/golden): a grokking unit and a ResNet training made under portable numerics and
  committed; rerun here in a fresh process, they must come out bit for bit (on a machine with another CPU this is
  the check that the pins work; on the old code, which had no pins, they came out with this CPU's own AVX-512
  kernels and differed);
- a unit run under portable in the environment that each node type would bring (the kernel variables preset to
  AVX2, to AVX-512 where this CPU has it, and to the plain default) gives identical curves; under native the same
  presets give curves that differ (so the comparison can fail);
- a unit SIGKILLed under portable and resumed under portable on "another node type" (other presets) gives the
  curves of one uninterrupted run, and a unit resumed under other numerics says so (log and summary column);
- the job's environment: every rule's shell exports the pins, and a bad mode is one line, exit status 2.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from growcert import numerics

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
GROWCERT = str(Path(sys.executable).with_name("growcert"))
TIME_COLUMNS = ["seconds", "cpu_seconds"]
# The node types a cluster might mix, as the environment each would bring (torch and MKL left to choose, or told)
HAS_AVX512 = "avx512f" in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else False
NODE_TYPES = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "default": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    **(
        {"avx512": {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AVX512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}}
        if HAS_AVX512
        else {}
    ),
}
SHORT_UNIT = {
    "p": 23,
    "train_fraction": 0.5,
    "batch_size": 64,
    "lr": 0.003,
    "betas": [0.9, 0.98],
    "seeds": [1],
    "steps": 120,
    "eval_every": 20,
    "stop_at_test_acc": None,
    "resume_every": 10,
    "model": {"architecture": "llama", "width": 32, "depth": 1, "heads": 2},
    "adamw": {"weight_decays": [0.5]},
    "grokfast": {"enabled": False},
    "poprisk": {"gates": ["update"], "variances": ["exact"], "weight_decays": [0.5]},
}
SHORT_ARM = "AdamW_wd_0.5"


def environment(mode: str, node: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment as a job of `mode` on a node that presets `node`, one torch thread."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in (*numerics.KERNEL_VARIABLES, numerics.MODE_VARIABLE)
    }
    return {**env, **(node or {}), numerics.MODE_VARIABLE: mode, "OMP_NUM_THREADS": "1"}


def grokking_unit(settings: dict, arm: str, seed: int, out: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [
            GROWCERT,
            "grokking",
            "--settings",
            json.dumps(settings),
            "--arm",
            arm,
            "--seed",
            str(seed),
            "--out",
            str(out),
            "--threads",
            "1",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def run_grokking_unit(settings: dict, arm: str, seed: int, out: Path, env: dict[str, str]) -> pd.DataFrame:
    process = grokking_unit(settings, arm, seed, out, env)
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output
    return pd.read_csv(out / "curves.csv")


def run_resnet(settings: dict, data: Path, out: Path, env: dict[str, str]) -> tuple[list, str]:
    """(the run's held-out history, sha256 of its final weights' bytes) of `growcert train` in a fresh process."""
    import torch

    result = subprocess.run(
        [
            GROWCERT,
            "train",
            "--data",
            str(data),
            "--settings",
            json.dumps(settings),
            "--out",
            str(out),
            "--threads",
            "1",
            "--device",
            "cpu",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    history = [
        {key: value for key, value in row.items() if key != "elapsed_s"}  # wall time: not a number to keep
        for row in json.loads((out / "metrics.json").read_text())["history"]
    ]
    state = torch.load(out / f"step{settings['train']['steps']}.pt", weights_only=False)["state_dict"]
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].detach().contiguous().numpy().tobytes())
    return history, digest.hexdigest()


def golden_settings(name: str) -> dict:
    return json.loads((GOLDEN / name / "settings.json").read_text())


def test_the_golden_grokking_unit_comes_out_bit_for_bit(tmp_path):
    golden = golden_settings("grokking")
    curves = run_grokking_unit(
        golden["settings"], golden["arm"], golden["seed"], tmp_path / "unit", environment("portable")
    )
    want = (GOLDEN / "grokking" / "curves.csv").read_text()
    assert curves.to_csv(index=False) == pd.read_csv(GOLDEN / "grokking" / "curves.csv").to_csv(index=False)
    assert (tmp_path / "unit" / "curves.csv").read_text() == want


def test_the_golden_resnet_training_comes_out_bit_for_bit(prepared, tmp_path):
    golden = golden_settings("resnet")
    history, weights = run_resnet(
        golden["settings"], prepared("digits").folder, tmp_path / "run", environment("portable")
    )
    assert history == json.loads((GOLDEN / "resnet" / "history.json").read_text())
    assert weights == (GOLDEN / "resnet" / "weights.sha256").read_text().strip()


def curves_by_node(mode: str, tmp_path: Path) -> dict[str, str]:
    """The short unit's curves, as text, run under `mode` in the environment of each node type."""
    processes = {
        node: grokking_unit(SHORT_UNIT, SHORT_ARM, 1, tmp_path / mode / node, environment(mode, preset))
        for node, preset in NODE_TYPES.items()
    }
    for process in processes.values():
        output, _ = process.communicate(timeout=600)
        assert process.returncode == 0, output
    return {node: (tmp_path / mode / node / "curves.csv").read_text() for node in NODE_TYPES}


def test_portable_numerics_give_one_curve_whatever_the_node_presets_and_native_do_not(tmp_path):
    portable = curves_by_node("portable", tmp_path)
    assert len(set(portable.values())) == 1, "portable: the node's presets changed the curves"
    native = curves_by_node("native", tmp_path)
    assert len(set(native.values())) > 1, "native: every node type gave the same curves (the test could not fail)"
    summaries = {node: pd.read_csv(tmp_path / "portable" / node / "summary.csv") for node in NODE_TYPES}
    assert all(summary["numerics"].tolist() == ["portable"] for summary in summaries.values())
    record = json.loads((tmp_path / "portable" / "default" / "provenance.json").read_text())["numerics"]
    assert record["cpu_capability"] == numerics.PORTABLE_CAPABILITY and record["mkl_cbwr"] == "AVX2,STRICT"
    assert record["cpu_model"] == numerics.cpu_model() and record["cpu_model"]


def killed_and_resumed(tmp_path: Path, mode: str, first: dict, second: dict) -> tuple[Path, str]:
    """The short unit SIGKILLed after its first resume snapshot under (`mode`, node preset `first`), then rerun to
    its end under (`mode`, `second`); returns its folder and the rerun's output."""
    out = tmp_path / f"{mode}-killed"
    process = grokking_unit(SHORT_UNIT, SHORT_ARM, 1, out, environment(mode, first))
    state = out / ".resume" / "state.pt"
    deadline = time.monotonic() + 300
    while not state.is_file() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert state.is_file() and not (out / "summary.csv").exists(), "killed before its first snapshot or after its end"
    rerun = grokking_unit(SHORT_UNIT, SHORT_ARM, 1, out, environment(mode, second))
    output, _ = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, output
    assert "resumed unit" in output
    return out, output


def test_a_unit_killed_under_portable_and_resumed_on_another_node_type_continues_bit_for_bit(tmp_path):
    whole = run_grokking_unit(SHORT_UNIT, SHORT_ARM, 1, tmp_path / "whole", environment("portable"))
    nodes = list(NODE_TYPES)
    out, output = killed_and_resumed(tmp_path, "portable", NODE_TYPES[nodes[-1]], NODE_TYPES["default"])
    assert "other numerics" not in output
    pd.testing.assert_frame_equal(pd.read_csv(out / "curves.csv"), whole, check_exact=True)
    assert pd.read_csv(out / "summary.csv")["numerics_changed"].tolist() == [False]


def test_a_unit_resumed_under_other_numerics_says_so_in_its_log_and_summary(tmp_path):
    out, output = killed_and_resumed(tmp_path, "native", NODE_TYPES["avx2"], NODE_TYPES["default"])
    assert "resumed under other numerics" in output
    summary = pd.read_csv(out / "summary.csv")
    assert summary["numerics"].tolist() == ["native"] and summary["numerics_changed"].tolist() == [True]


def test_every_rule_exports_the_pins_and_a_bad_mode_is_one_line_and_status_2(tmp_path):
    exports = numerics.shell_exports("portable")
    for name, value in numerics.PORTABLE.items():
        assert f"{name}={value}" in exports.replace("'", "")
    assert numerics.shell_exports("native") == f"export {numerics.MODE_VARIABLE}=native; "
    result = subprocess.run(["bash", "-c", exports + "env"], capture_output=True, text=True, check=True)
    assert "ATEN_CPU_CAPABILITY=avx2" in result.stdout.splitlines()
    bad = subprocess.run([GROWCERT, "inspect", str(tmp_path)], env=environment("fast"), capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "GROWCERT_NUMERICS" in bad.stderr


def test_torch_loaded_before_the_pins_is_refused_under_portable(monkeypatch):
    """In this process torch chose its kernels long ago (with this CPU's own): a stage asked to run portable here
    stops in one line instead of running other kernels than it records."""
    import torch

    from growcert.errors import ConfigError
    from growcert.runtime import torch_runtime

    monkeypatch.setenv(numerics.MODE_VARIABLE, "portable")
    if torch.backends.cpu.get_cpu_capability() == numerics.PORTABLE_CAPABILITY:
        pytest.skip("this process already runs torch's AVX2 kernels (a CPU without AVX-512)")
    with pytest.raises(ConfigError, match="portable pins torch's AVX2 kernels"):
        with torch_runtime():
            pass


def remake() -> None:
    """Write the golden units anew under portable numerics (after a deliberate change of the training code)."""
    import tempfile

    from growcert.data import prepare_dataset

    grokking = {
        "settings": {
            "p": 47,
            "train_fraction": 0.5,
            "batch_size": 128,
            "lr": 0.001,
            "betas": [0.9, 0.98],
            "seeds": [8],
            "steps": 400,
            "eval_every": 50,
            "stop_at_test_acc": None,
            "model": {"architecture": "llama"},
            "adamw": {"weight_decays": [0.15]},
            "grokfast": {"enabled": False},
            "poprisk": {"gates": ["update"], "variances": ["exact"], "weight_decays": [0.15]},
        },
        "arm": "AdamW_wd_0.15",
        "seed": 8,
    }
    resnet = {
        "settings": {
            "family": "resnet",
            "dataset": "digits",
            "width": 1,
            "depth": 8,
            "seed": 0,
            "model": {},
            "train": {
                "steps": 60,
                "batch_size": 32,
                "lr": 0.003,
                "weight_decay": 0.0,
                "betas": [0.9, 0.95],
                "warmup_steps": 5,
                "grad_clip": 1.0,
                "save_steps": [60],
                "eval_every": 20,
                "eval_examples": 128,
            },
        }
    }
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        made = {}
        for name, golden in (("grokking", grokking), ("resnet", resnet)):
            (GOLDEN / name).mkdir(parents=True, exist_ok=True)
            (GOLDEN / name / "settings.json").write_text(json.dumps(golden, indent=1) + "\n")
        run_grokking_unit(
            grokking["settings"], grokking["arm"], grokking["seed"], scratch / "unit", environment("portable")
        )
        (GOLDEN / "grokking" / "curves.csv").write_text((scratch / "unit" / "curves.csv").read_text())
        made["grokking"] = json.loads((scratch / "unit" / "provenance.json").read_text())["numerics"]
        prepare_dataset("digits", scratch / "digits")
        history, weights = run_resnet(resnet["settings"], scratch / "digits", scratch / "run", environment("portable"))
        (GOLDEN / "resnet" / "history.json").write_text(json.dumps(history, indent=1) + "\n")
        (GOLDEN / "resnet" / "weights.sha256").write_text(weights + "\n")
        made["resnet"] = (
            json.loads((scratch / "run" / "metrics.json").read_text())
            .get("provenance", {})
            .get("numerics", made["grokking"])
        )
        for name, record in made.items():
            (GOLDEN / name / "made_on.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--remake"]:
        remake()
    else:
        sys.exit("usage: python tests/test_numerics.py --remake")


def test_the_reference_table_marks_a_seed_whose_unit_was_resumed_under_other_numerics():
    from growcert.reference_runs.grokking import RESUMED_UNDER_OTHER_NUMERICS, numerics_changed, steps_text

    frame = pd.DataFrame({"step_95": [1900.0, float("nan"), 700.0], "numerics_changed": [False, True, "True"]})
    marks = numerics_changed(frame)
    assert marks.tolist() == [False, True, True]
    assert steps_text(frame["step_95"], 4000, marks) == (
        f"1,900, > 4,000{RESUMED_UNDER_OTHER_NUMERICS}, 700{RESUMED_UNDER_OTHER_NUMERICS}"
    )
    before = frame.drop(columns="numerics_changed")  # a unit made before numerics were kept: never marked
    assert steps_text(before["step_95"], 4000, numerics_changed(before)) == "1,900, > 4,000, 700"
