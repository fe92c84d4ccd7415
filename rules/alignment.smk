rule estimate_alignment:
    input:
        store=STORE_FILE,
    output:
        table=artifacts.ALIGNMENT.path(RESULTS),
    params:
        store=input_store(),
        settings=PLAN.settings("alignment"),
    log:
        artifacts.LOG.path(RESULTS, job=f"estimate_alignment/{artifacts.STORE_NAME}"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job=f"estimate_alignment/{artifacts.STORE_NAME}")
    priority: STORE_READER_PRIORITY
    threads: 1
    resources:
        mem_mb=per_attempt(2000),
        runtime=PLAN.store_runtime,
    conda:
        CONDA_ENV
    shell:
        "growcert estimate-alignment --store {params.store} --settings {params.settings:q} --out {output.table} > {log} 2>&1"


rule estimate_misalignment:
    input:
        store=STORE_FILE,
        alignment=artifacts.ALIGNMENT.path(RESULTS),
    output:
        table=artifacts.MISALIGNMENT.path(RESULTS),
    params:
        store=input_store(),
        settings=PLAN.settings("alignment"),
    log:
        artifacts.LOG.path(RESULTS, job=f"estimate_misalignment/{artifacts.STORE_NAME}"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job=f"estimate_misalignment/{artifacts.STORE_NAME}")
    priority: STORE_READER_PRIORITY
    threads: 1
    resources:
        mem_mb=per_attempt(2000),
        runtime=PLAN.store_runtime,
    conda:
        CONDA_ENV
    shell:
        "growcert estimate-misalignment --store {params.store} --alignment {input.alignment} "
        "--settings {params.settings:q} --out {output.table} > {log} 2>&1"


localrules:
    summarize_alignment,


rule summarize_alignment:
    input:
        alignment=PLAN.per_store(artifacts.ALIGNMENT),
        # a context sweep feeds d_align only
        misalignment=PLAN.per_store(artifacts.MISALIGNMENT, PLAN.fixed_context_runs(),
                                    config["alignment"]["analyse_misalignment"]),
    output:
        alignment=artifacts.POOLED_ALIGNMENT.path(RESULTS),
        misalignment=artifacts.POOLED_MISALIGNMENT.path(RESULTS),
        summary=report_output(artifacts.ALIGNMENT_SUMMARY),
        claims=report_output(artifacts.ALIGNMENT_CLAIMS),
        checks=artifacts.ALIGNMENT_CHECKS.path(RESULTS),
        figures=[report_output(figure) for figure in PLAN.p1_figures()],
    params:
        settings=PLAN.settings("alignment"),
        figures=output_folder("figures"),
    log:
        artifacts.LOG.path(RESULTS, job="summarize_alignment"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="summarize_alignment")
    conda:
        CONDA_ENV
    shell:
        "growcert summarize-alignment --alignment {input.alignment} --misalignment {input.misalignment} "
        "--settings {params.settings:q} --out-alignment {output.alignment} --out-misalignment {output.misalignment} "
        "--out-summary {output.summary} --out-claims {output.claims} --out-checks {output.checks} --figures {params.figures} > {log} 2>&1"


localrules:
    summarize_regime,


# The P1 regime map of a context sweep (grids[].contexts): width trends at matched budget and matched loss.
rule summarize_regime:
    input:
        alignment=artifacts.POOLED_ALIGNMENT.path(RESULTS),
        training=artifacts.TRAINING_TABLE.path(RESULTS),
    output:
        budget=artifacts.REGIME_STATS["budget"].path(RESULTS),
        loss=artifacts.REGIME_STATS["loss"].path(RESULTS),
        matched=artifacts.REGIME_STATS["matched"].path(RESULTS),
        spread=artifacts.REGIME_STATS["spread"].path(RESULTS),
        map=artifacts.REGIME_MAP.path(RESULTS),
        cells=report_output(artifacts.REGIME_CELLS),
        claims=report_output(artifacts.REGIME_CLAIMS),
        figures=[report_output(figure) for figure in PLAN.regime_figures()],
    params:
        stats=output_folder("budget"),
        figures=results_subfolder("claims", artifacts.FIGURES_DIR.name),
    log:
        artifacts.LOG.path(RESULTS, job="summarize_regime"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="summarize_regime")
    conda:
        CONDA_ENV
    shell:
        "growcert summarize-regime --alignment {input.alignment} --training {input.training} --out-stats {params.stats} "
        "--out-cells {output.cells} --out-claims {output.claims} --out-map {output.map} --figures {params.figures} "
        "> {log} 2>&1"
