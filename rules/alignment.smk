rule estimate_alignment:
    input:
        store=STORE_FILE,
    output:
        table=artifacts.ALIGNMENT.path(RESULTS),
    params:
        store=input_store(),
        settings=PLAN.settings("alignment"),
    log:
        log(RESULTS, "estimate_alignment", artifacts.STORE_NAME),
    benchmark:
        benchmark(RESULTS, "estimate_alignment", artifacts.STORE_NAME)
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
        log(RESULTS, "estimate_misalignment", artifacts.STORE_NAME),
    benchmark:
        benchmark(RESULTS, "estimate_misalignment", artifacts.STORE_NAME)
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
        alignment=f"{RESULTS}/{artifacts.POOLED_ALIGNMENT}",
        misalignment=f"{RESULTS}/{artifacts.POOLED_MISALIGNMENT}",
        summary=report_output(artifacts.ALIGNMENT_SUMMARY),
        claims=report_output(artifacts.ALIGNMENT_CLAIMS),
        checks=artifacts.ALIGNMENT_CHECKS.path(RESULTS),
        figures=[report_output(figure) for figure in PLAN.p1_figures()],
    params:
        settings=PLAN.settings("alignment"),
        figures=output_folder("figures"),
    log:
        log(RESULTS, "summarize_alignment"),
    benchmark:
        benchmark(RESULTS, "summarize_alignment")
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
        alignment=f"{RESULTS}/{artifacts.POOLED_ALIGNMENT}",
        training=f"{RESULTS}/{artifacts.TRAINING_TABLE}",
    output:
        budget=f"{RESULTS}/{artifacts.REGIME_STATS['budget']}",
        loss=f"{RESULTS}/{artifacts.REGIME_STATS['loss']}",
        matched=f"{RESULTS}/{artifacts.REGIME_STATS['matched']}",
        spread=f"{RESULTS}/{artifacts.REGIME_STATS['spread']}",
        map=f"{RESULTS}/{artifacts.REGIME_MAP}",
        cells=report_output(artifacts.REGIME_CELLS),
        claims=report_output(artifacts.REGIME_CLAIMS),
        figures=[report_output(figure) for figure in PLAN.regime_figures()],
    params:
        stats=output_folder("budget"),
        figures=results_subfolder("claims", artifacts.FIGURES_FOLDER),
    log:
        log(RESULTS, "summarize_regime"),
    benchmark:
        benchmark(RESULTS, "summarize_regime")
    conda:
        CONDA_ENV
    shell:
        "growcert summarize-regime --alignment {input.alignment} --training {input.training} --out-stats {params.stats} "
        "--out-cells {output.cells} --out-claims {output.claims} --out-map {output.map} --figures {params.figures} "
        "> {log} 2>&1"
