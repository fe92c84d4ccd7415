"""Plain helpers shared by several test files (imported as `from helpers import ...`; pytest puts tests/
on the path): exactness checks against single-example autograd, a toy module added to a registry."""

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
    undecoded: images.filter(function (i) { return !(i.complete && i.naturalWidth > 0); }).map(function (i) { return i.alt; }),
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
      var after = Array.from(document.querySelectorAll("h3")).find(function (h) { return h.textContent === "This run's rows"; }) || null;
      return {rows: rows.length, top: box.top, first_screen: box.top < window.innerHeight,
              before_scopes: after !== null && box.bottom <= after.getBoundingClientRect().top,
              words: rows.map(function (r) { var v = r.querySelector(".verdict"); return v ? v.textContent : ""; })}; })()};
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
    return text[text.index('<section id="reference">'):]


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
        result = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},{height}",
                                 "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
                                capture_output=True, text=True, timeout=120)
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
    return x, torch.stack((x[:, 0] * 2, x[:, 1] - x[:, 2], torch.sin(x[:, 3])), dim=1) + 0.3 * torch.randn(b, 3, generator=generator)


def advice_figures(references: Path) -> int:
    """The figures the report's "Is the advice right?" section embeds from the advise-check reference run (its
    reliability figure, once the run is kept), besides the reference runs' own."""
    folder = Path(references) / "advise-check"
    return int((folder / "scorecard.csv").is_file() and (folder / "reliability.png").is_file())
