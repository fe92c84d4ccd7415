localrules:
    plot_training,
    report,


rule plot_training:
    input:
        table=f"{RESULTS}/stats/training.csv",
    output:
        figure=figure_output(figures.TRAINING_GRID),
    log:
        f"{RESULTS}/logs/plot_training.log",
    benchmark:
        f"{RESULTS}/benchmarks/plot_training.tsv"
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert plot-training --table {input.table} --out {output.figure} > {log} 2>&1"


rule report:
    input:
        training=f"{RESULTS}/stats/training.csv",
        figures=[figure_path(figure) for figure in [figures.TRAINING_GRID, figures.INTERVENTIONS] + p1_figures()]
        + [experiment_outputs(name)["figure"] for name in P2_EXPERIMENTS]
        + [figure_path(figure) for figure in [figures.DEPTH, figures.GROWTH] + regime_figures()],
        checks=[f"{RESULTS}/checks/p1_interventions.csv", f"{RESULTS}/checks/p1_alignment.csv"]
        + [experiment_outputs(name)["checks"] for name in P2_EXPERIMENTS if re.fullmatch(p2_tasks(gated=False), name)],
        claims=[f"{RESULTS}/claims/p1_alignment.csv",
                f"{RESULTS}/claims/p1_interventions.csv",
                f"{RESULTS}/claims/p1_regime.csv",
                f"{RESULTS}/claims/p3_depth.csv"]
        + [experiment_outputs(name)["claims"] for name in P2_EXPERIMENTS],
        tables=[f"{RESULTS}/tables/p1_interventions_summary.csv", f"{RESULTS}/tables/p1_alignment_summary.csv",
                f"{RESULTS}/tables/p1_regime_cells.csv", f"{RESULTS}/stats/p1_regime_map.json",
                f"{RESULTS}/tables/p3_recommended_depth.csv", f"{RESULTS}/tables/p3_growth.csv"]
        + [experiment_outputs(name)["table"] for name in P2_EXPERIMENTS],
    output:
        html=f"{RESULTS}/report.html",
    params:
        results=lambda wildcards, output: os.path.dirname(output.html),
        # The reference runs kept in the repository (docs/reference-results), shown beside this run.
        references=os.path.join(workflow.basedir, "docs", "reference-results"),
    log:
        f"{RESULTS}/logs/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report.tsv"
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert report --results {params.results} --references {params.references:q} --out {output.html} "
        "--screenshot {params.results}/report-first-screen.png > {log} 2>&1"
