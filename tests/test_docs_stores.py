"""docs/stores.md's recipes run: every python block, in order and in one namespace, on a results folder laid out
as the pipeline lays it out (prepared data, checkpoints, stores and the alignment table of two models of the
configs/ci.yaml grid, at the paths the page names)."""

import re
from pathlib import Path

import pytest

from growcert.config import stage_settings
from growcert.data import load_prepared, prepare_dataset
from growcert.stages.alignment import estimate_alignment
from growcert.stages.dump import dump_gradients

PAGE = Path(__file__).resolve().parents[1] / "docs" / "stores.md"
CI_DUMP = {"train_examples": 48, "test_examples": 32, "batch_size": 16}  # configs/ci.yaml's dump
MODELS = {"resnet": ("digits", 2, 8, None), "llama": ("shakespeare", 16, 1, {"head_dim": 8, "context": 32})}


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", markdown, flags=re.S | re.M)


@pytest.fixture(scope="module")
def results(tmp_path_factory, train_tiny):
    """A working folder holding data/prepared/<dataset> and results/ for one resnet and one llama at step 20."""
    folder = tmp_path_factory.mktemp("stores-page")
    for family, (dataset, width, depth, model) in MODELS.items():
        prepared = folder / "data" / "prepared" / dataset
        prepare_dataset(dataset, prepared, {})
        run = f"{family}/{dataset}/w{width}_d{depth}_s0"
        checkpoint = train_tiny(
            load_prepared(prepared),
            folder / "results" / "models" / run,
            family,
            dataset,
            width,
            depth,
            model=model,
            steps=20,
        )
        store = folder / "results" / "grads" / run / "step20.zarr"
        dump_gradients(
            checkpoint,
            load_prepared(prepared),
            store,
            stage_settings("dump", CI_DUMP),
            log=lambda _: None,
            device="cpu",
        )
        table = folder / "results" / "stats" / "alignment" / run / "step20.csv"
        table.parent.mkdir(parents=True)
        estimate_alignment(store, None, log=lambda _: None).to_csv(table, index=False)
    return folder


def test_every_python_block_of_the_stores_page_runs(results, monkeypatch, capsys):
    blocks = python_blocks(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 8, "docs/stores.md lost its recipes"
    monkeypatch.chdir(results)
    namespace: dict = {}
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"docs/stores.md, python block {number}", "exec"), namespace)
    shown = capsys.readouterr().out
    # the page's claims, as printed: q says what it is, and the hand-made d_align is the stage's
    assert "dℓ_i/dz" in shown and "d_align by hand" in shown and "misclassified of 32 held-out examples" in shown
    # the language model's q says that its loss is a mean over tokens (q includes 1/T), from the family's record
    from growcert.models import family_of

    description = namespace["text"]["block1"].q.attrs["description"]
    assert family_of("llama").loss_description in description and "1/T" in description
