"""The report layer: claim rows, figures and the HTML report, built from tidy tables only (every file's name
is growcert.pipeline.artifacts'; how each is shown, its title, label and caption, is labels.py's). Which claims
exist and how a verdict is earned are the referee's (growcert.referee), the layer below.

    labels.py         how each artifact is shown: its title, and the rules' snakemake --report marks
    figures.py        one figure saver; the trained-grid figure
    training.py       the tidy training table gathered from run folders
    alignment.py      P1 alignment and misalignment: summary table, figures, claim rows
    interventions.py  P1 interventions: summary table, figure, claim rows
    depth.py          P3: saturation decision, depth and growth figures, claim rows
    html.py           results/report.html, self-contained
"""
