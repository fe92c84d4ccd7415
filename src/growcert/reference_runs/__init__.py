"""Reference runs: the committed long runs under docs/reference-results/, exported and re-judged by one command
(`growcert reference`; docs/reproducing.md, "Reference runs")."""
