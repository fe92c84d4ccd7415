"""The report: self-contained, claims matched to the registry, pending claims listed, figures embedded."""

import base64

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from growcert.report.claims import CLAIMS, claim_row  # noqa: E402
from growcert.report.html import build_report  # noqa: E402


def test_report_embeds_figures_and_matches_claims(tmp_path):
    results = tmp_path / "results"
    (results / "figures").mkdir(parents=True)
    (results / "claims").mkdir()
    (results / "tables").mkdir()
    figure, axis = plt.subplots()
    axis.plot([1, 2], [3, 4])
    figure.savefig(results / "figures" / "p3_depth.png")
    plt.close(figure)
    pd.DataFrame([
        claim_row("p3_depth_plateau", "RUN-VALUE-1", False, "NOTE-1", scope="llama/shakespeare"),
        {"claim_id": "p9_stale", "paper": "P1", "claim": "a claim no registry row names", "paper_value": "x",
         "this_run": "RUN-VALUE-2", "holds": True, "note": None},
    ]).to_csv(results / "claims" / "p3.csv", index=False)
    pd.DataFrame({"width": [1, 2], "recommended": [2, 3]}).to_csv(results / "tables" / "p3_recommended_depth.csv", index=False)
    out = results / "report.html"
    build_report(results, out)
    text = out.read_text()
    encoded = base64.b64encode((results / "figures" / "p3_depth.png").read_bytes()).decode()
    assert encoded in text  # embedded, not linked
    assert "RUN-VALUE-1" in text and "(llama/shakespeare)" in text and "NOTE-1" in text
    assert "RUN-VALUE-2" in text and "p9_stale is not in the registry" in text  # shown, and marked
    pending = len(CLAIMS) - 1
    assert text.count("not measured in this run") == pending
    assert "p3 recommended depth" in text and "<td>3</td>" in text
    assert 'src="http' not in text and "<link" not in text  # nothing fetched from elsewhere
