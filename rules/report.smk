localrules:
    plot_training,
    report,


rule plot_training:
    input:
        table=artifacts.TRAINING_TABLE.path(RESULTS),
    output:
        figure=report_output(artifacts.TRAINING_GRID),
    log:
        artifacts.LOG.path(RESULTS, job="plot_training"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="plot_training")
    conda:
        CONDA_ENV
    shell:
        "growcert plot-training --table {input.table} --out {output.figure} > {log} 2>&1"


rule report:
    input:
        **PLAN.report_inputs(),
    output:
        html=artifacts.REPORT.path(RESULTS),
    params:
        results=output_folder("html"),
        # The reference runs kept in the repository (docs/reference-results), shown beside this run.
        references=os.path.join(workflow.basedir, "docs", "reference-results"),
    log:
        artifacts.LOG.path(RESULTS, job="report"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="report")
    conda:
        CONDA_ENV
    shell:
        "growcert report --results {params.results} --references {params.references:q} --out {output.html} "
        "--screenshot {params.results}/report-first-screen.png > {log} 2>&1"
