"""Plain helpers shared by several test files (imported as `from helpers import ...`; pytest puts tests/
on the path): exactness checks against single-example autograd, a toy module added to a registry."""

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn


def single_example(model, inputs, target, point):
    """z and ∇_z of one example's loss, computed with that example alone in the batch."""
    kept = {}
    handle = model.points[point].register_forward_hook(lambda module, args, output: kept.setdefault("z", output))
    try:
        loss = model.per_example_loss(model(inputs[None]), target[None]).sum()
        (gradient,) = torch.autograd.grad(loss, kept["z"])
    finally:
        handle.remove()
    return kept["z"][0].detach(), gradient[0]


def toy_site(folder, monkeypatch, module: str, source: str, registry_import: str, registry_line: str):
    """`folder` holding toy module `module` (its `source`) and a sitecustomize that runs its one registry line, put on
    sys.path: any Python started with `folder` on PYTHONPATH has the toy registered (the caller registers it in
    this process)."""
    folder.mkdir()
    (folder / f"{module}.py").write_text(source)
    (folder / "sitecustomize.py").write_text(f"{registry_import}\n{registry_line}\n")
    monkeypatch.syspath_prepend(str(folder))
    return folder


def relative_error(a, b):
    """‖a − b‖ / ‖b‖ in float64 (b = 0 counts as a tiny norm, not a division by zero)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


BROWSER_PROBE = """<script>window.addEventListener("load", function () {
  var images = Array.from(document.images), links = Array.from(document.querySelectorAll('a[href^="#"]'));
  var outside = Array.from(document.body.querySelectorAll("*")).filter(function (e) {
    return e.getBoundingClientRect().right > window.innerWidth + 0.5 && !e.closest(".scroll"); });
  var result = {images: images.length,
    undecoded: images.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                     .map(function (i) { return i.alt; }),
    scroll_width: document.documentElement.scrollWidth, viewport: window.innerWidth,
    outside: outside.map(function (e) { return e.tagName + (e.id ? "#" + e.id : ""); }).slice(0, 10),
    links: links.length,
    counts: (function () { var c = document.querySelector("p.counts"); if (!c) { return null; }
      var box = c.getBoundingClientRect();
      return {text: c.textContent, top: box.top, bottom: box.bottom, visible: box.bottom <= window.innerHeight}; })(),
    broken: links.filter(function (a) { return !document.getElementById(a.getAttribute("href").slice(1)); })
                 .map(function (a) { return a.getAttribute("href"); }),
    claims: (function () { var t = document.getElementById("claims-at-a-glance"); if (!t) { return null; }
      var rows = Array.from(t.querySelectorAll("tr.claim-row")), box = t.getBoundingClientRect();
      var after = Array.from(document.querySelectorAll("h3"))
                       .find(function (h) { return h.textContent === "This run's rows"; }) || null;
      return {rows: rows.length, top: box.top, first_screen: box.top < window.innerHeight,
              before_scopes: after !== null && box.bottom <= after.getBoundingClientRect().top,
              words: rows.map(function (r) { var v = r.querySelector(".verdict"); return v ? v.textContent : ""; })};
      })()};
  var pre = document.createElement("pre"); pre.id = "browser-check"; pre.textContent = JSON.stringify(result);
  document.body.appendChild(pre);
});</script>"""


def reference_section(report_dir, references):
    """The "Reference runs" section of a report built from an empty results folder `report_dir` with the
    reference runs under `references`."""
    from pathlib import Path

    from growcert.report.html import build_report

    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    build_report(report_dir, report_dir / "report.html", references=references)
    text = (report_dir / "report.html").read_text()
    return text[text.index('<section id="reference">') :]


def chromium():
    """Debian's headless browser, or None when it is not installed."""
    import shutil

    return shutil.which("chromium") or shutil.which("chromium-browser")


def browser_check(report, width=1280, height=900):
    """Open a copy of `report` in headless Chromium at `width` px and return what the page measured after load:
    images (and the undecoded ones), the document's scroll width against the viewport, elements sticking out
    of the viewport outside a scrolling box, and in-page links whose target id does not exist."""
    import json
    import re
    import subprocess
    import tempfile
    from pathlib import Path

    text = Path(report).read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as folder:
        probe = Path(folder) / "probe.html"
        probe.write_text(text.replace("</body>", BROWSER_PROBE + "</body>"), encoding="utf-8")
        result = subprocess.run(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                f"--window-size={width},{height}",
                "--virtual-time-budget=10000",
                "--dump-dom",
                probe.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    found = re.search(r'<pre id="browser-check">(.*?)</pre>', result.stdout)
    assert found, f"the page did not finish loading in Chromium: {result.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


# A small regression net and its data, for the optimizer tests (tests/test_optim*.py).
def small_net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def mse_per_example(outputs, targets):
    return ((outputs - targets) ** 2).mean(dim=1)


def regression_batch(generator, b=16):
    x = torch.randn(b, 6, generator=generator)
    return x, torch.stack((x[:, 0] * 2, x[:, 1] - x[:, 2], torch.sin(x[:, 3])), dim=1) + 0.3 * torch.randn(
        b, 3, generator=generator
    )


def advice_figures(references: Path) -> int:
    """The figures the report's "Is the advice right?" section embeds from the advise-check reference run (its
    reliability figure, once the run is kept, and its calibration figure once it has the matched-compute scores),
    besides the reference runs' own."""
    folder = Path(references) / "advise-check"
    if not (folder / "scorecard.csv").is_file():
        return 0
    calibration = (folder / "matched_scorecard.csv").is_file() and (folder / "advice_calibration.png").is_file()
    return int((folder / "reliability.png").is_file()) + int(calibration)


# Floats in a table recomputed from committed tables agree with the committed ones to the last bits only on the
# machine that wrote them (docs/design.md, "8. Tests"): numpy, torch and MKL pick their kernels by the CPU, and a
# different summation order or a fused multiply-add moves a float64 sum of n terms by up to about n·eps (eps =
# 2.2e-16) of the sum of its terms' magnitudes. The estimators behind a committed table sum at most ~10^5 terms,
# so their results may differ by ~2e-11 of that magnitude; FLOAT_RTOL leaves a factor of 50 above it for
# cancellation (a slope, a difference of two means) and is still 10^6 times finer than the 3-4 significant digits
# any verdict, interval or note is printed to. FLOAT_ATOL does the same for values that cancel to about zero.
FLOAT_RTOL = 1e-9
FLOAT_ATOL = 1e-12
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)\b")


def _is_float_token(token: str) -> bool:
    return any(mark in token for mark in ".eEn") or token.lower().lstrip("+-") in ("inf", "nan")


def _same_cell(got: str, want: str) -> bool:
    """Whether two cells (or two texts) say the same: the words and integers between their numbers exactly,
    each float to FLOAT_RTOL / FLOAT_ATOL."""
    got_numbers, want_numbers = NUMBER.findall(got), NUMBER.findall(want)
    if NUMBER.split(got) != NUMBER.split(want) or len(got_numbers) != len(want_numbers):
        return False
    for a, b in zip(got_numbers, want_numbers):
        if not (_is_float_token(a) or _is_float_token(b)):
            if int(a) != int(b):  # integers, counts, seeds and steps: exactly
                return False
        elif not math.isclose(float(a), float(b), rel_tol=FLOAT_RTOL, abs_tol=FLOAT_ATOL) and not (
            math.isnan(float(a)) and math.isnan(float(b))
        ):
            return False
    return True


def _same_value(got, want) -> bool:
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and got.keys() == want.keys()
            and all(_same_value(got[key], want[key]) for key in want)
        )
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(_same_value, got, want))
    if isinstance(want, float) or isinstance(got, float):
        return isinstance(got, (int, float)) and isinstance(want, (int, float)) and _same_cell(repr(got), repr(want))
    if isinstance(want, str) and isinstance(got, str):
        return _same_cell(got, want)
    return got == want


def assert_tables_match(got, want, name: str = "table") -> None:
    """A recomputed table (a DataFrame read with dtype=str, or a JSON record) says what the committed one says:
    the same columns, rows, words and integers, and floats within FLOAT_RTOL (see above)."""
    import pandas as pd

    if not isinstance(want, pd.DataFrame):
        assert _same_value(got, want), f"{name}: the records differ"
        return
    assert list(got.columns) == list(want.columns), f"{name}: columns {list(got.columns)} != {list(want.columns)}"
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    cells = lambda frame, column: ["" if pd.isna(value) else str(value) for value in frame[column]]  # noqa: E731
    for column in want.columns:
        for row, (a, b) in enumerate(zip(cells(got, column), cells(want, column))):
            assert _same_cell(a, b), f"{name}: column {column!r}, row {row}: {a!r} != {b!r}"


def ci_dry_run(tmp_path: Path, environment: dict[str, str], *configfiles: str) -> subprocess.CompletedProcess:
    """`snakemake --dry-run` of configs/ci.yaml (and `configfiles` over it) from the repository, its results and
    prepared data under `tmp_path`, in `environment` (a PYTHONPATH that puts a test's own package or task first)."""
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "snakemake"),
            "--cores",
            "1",
            "--dry-run",
            "--configfile",
            "configs/ci.yaml",
            *configfiles,
            "--config",
            f"results={tmp_path}/results",
            f"prepared_data={tmp_path}/prepared",
        ],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )
