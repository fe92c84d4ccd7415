"""The report layer: claim rows, figures and the HTML report, built from tidy tables only (the figures'
stems, titles and captions, and every file's name, are growcert.pipeline.artifacts'). Which claims exist and how a
verdict is earned are the referee's (growcert.referee), the layer below.

    figures.py        one figure saver; the trained-grid figure
    training.py       the tidy training table gathered from run folders
    alignment.py      P1 alignment and misalignment: summary table, figures, claim rows
    interventions.py  P1 interventions: summary table, figure, claim rows
    depth.py          P3: saturation decision, depth and growth figures, claim rows
    html.py           results/report.html, self-contained
"""
