"""The DPO reference of a config: whether the pipeline runs the preference task, and the trained language-model
run it starts from (config preference.reference)."""

from __future__ import annotations

from typing import Any

from growcert.errors import ConfigError
from growcert.models import family_of, trained_families
from growcert.plan.grids import Run, training_runs

# The dataset DPO's reference language model is trained on (config preference.reference)
PREFERENCE_DATASET = "shakespeare"


def _preference_families() -> list[str]:
    """The trained families DPO can start from: the language models (families that read text)."""
    return [name for name in trained_families() if family_of(name).data_kind == "text"]


def preference_runs(config: dict[str, Any]) -> bool:
    """Whether the pipeline runs the DPO experiment: it needs a local Hugging Face model (preference.hf_model)
    or a language model trained on Shakespeare; a config without either (an image-only study) skips it."""
    return bool(config["preference"]["hf_model"]) or any(
        grid["family"] in _preference_families() and grid["dataset"] == PREFERENCE_DATASET for grid in config["grids"]
    )


def preference_reference_run(config: dict[str, Any]) -> Run | None:
    """The language-model run on Shakespeare DPO starts from: config preference.reference, or the first such run;
    None when preference.hf_model replaces it or the config trains no such run (DPO is then skipped)."""
    preference = config["preference"]
    if preference["hf_model"] or not preference_runs(config):
        return None
    families = _preference_families()
    runs = [run for run in training_runs(config) if run.family in families and run.dataset == PREFERENCE_DATASET]
    if preference["reference"] is None:
        return runs[0]
    reference = preference["reference"]
    matching = [
        run
        for run in runs
        if (run.width, run.depth, run.seed, run.context)
        == (reference["width"], reference["depth"], reference["seed"], None)
    ]
    if not matching:
        raise ConfigError(
            f"config key 'preference.reference': no {'/'.join(families)}/{PREFERENCE_DATASET} grid "
            f"trains width {reference['width']}, depth {reference['depth']}, seed {reference['seed']}; "
            f"name one of its runs, null for its first, or set preference.hf_model"
        )
    return matching[0]
