rule estimate_alignment:
    input:
        store=STORE_INPUT,
    output:
        table=ALIGNMENT,
    params:
        store=lambda wildcards, input: store_folder(input.store),
        settings=alignment_settings,
    log:
        f"{RESULTS}/logs/estimate_alignment/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/estimate_alignment/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.tsv"
    priority: STORE_READER_PRIORITY
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=store_runtime,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert estimate-alignment --store {params.store} --settings {params.settings:q} --out {output.table} > {log} 2>&1"


rule estimate_misalignment:
    input:
        store=STORE_INPUT,
        alignment=ALIGNMENT,
    output:
        table=MISALIGNMENT,
    params:
        store=lambda wildcards, input: store_folder(input.store),
        settings=alignment_settings,
    log:
        f"{RESULTS}/logs/estimate_misalignment/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/estimate_misalignment/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.tsv"
    priority: STORE_READER_PRIORITY
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=store_runtime,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert estimate-misalignment --store {params.store} --alignment {input.alignment} "
        "--settings {params.settings:q} --out {output.table} > {log} 2>&1"


localrules:
    summarize_alignment,


rule summarize_alignment:
    input:
        alignment=per_store(ALIGNMENT),
        # a context sweep feeds d_align only
        misalignment=per_store(MISALIGNMENT, fixed_context_runs(), config["alignment"]["analyse_misalignment"]),
    output:
        alignment=f"{RESULTS}/stats/alignment.csv",
        misalignment=f"{RESULTS}/stats/misalignment.csv",
        summary=report_output(f"{RESULTS}/tables/p1_alignment_summary.csv", "p1_alignment_summary", "p1", "alignment",
                              "table: d_align per cell"),
        claims=report_output(f"{RESULTS}/claims/p1_alignment.csv", "p1_alignment_claims", "p1", "alignment",
                             "claims: width trends and certificates"),
        checks=f"{RESULTS}/checks/p1_alignment.csv",
        figures=[figure_output(figure) for figure in p1_figures()],
    params:
        settings=alignment_settings,
        figures=lambda wildcards, output: os.path.dirname(output.figures[0]),
    log:
        f"{RESULTS}/logs/summarize_alignment.log",
    benchmark:
        f"{RESULTS}/benchmarks/summarize_alignment.tsv"
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert summarize-alignment --alignment {input.alignment} --misalignment {input.misalignment} "
        "--settings {params.settings:q} --out-alignment {output.alignment} --out-misalignment {output.misalignment} "
        "--out-summary {output.summary} --out-claims {output.claims} --out-checks {output.checks} --figures {params.figures} > {log} 2>&1"


localrules:
    summarize_regime,


# The P1 regime map of a context sweep (grids[].contexts): width trends at matched budget and matched loss.
rule summarize_regime:
    input:
        alignment=f"{RESULTS}/stats/alignment.csv",
        training=f"{RESULTS}/stats/training.csv",
    output:
        budget=f"{RESULTS}/stats/p1_regime_budget.csv",
        loss=f"{RESULTS}/stats/p1_regime_loss.csv",
        matched=f"{RESULTS}/stats/p1_regime_matched.csv",
        spread=f"{RESULTS}/stats/p1_regime_spread.csv",
        map=f"{RESULTS}/stats/p1_regime_map.json",
        cells=report_output(f"{RESULTS}/tables/p1_regime_cells.csv", "p1_regime_cells", "p1", "regime map",
                            "table: width trend per (context, progress) cell"),
        claims=report_output(f"{RESULTS}/claims/p1_regime.csv", "p1_regime_claims", "p1", "regime map",
                             "claims: width trend on the regime map"),
        figures=[figure_output(figure) for figure in regime_figures()],
    params:
        stats=lambda wildcards, output: os.path.dirname(output.budget),
        figures=lambda wildcards, output: os.path.join(os.path.dirname(os.path.dirname(output.claims)), "figures"),
    log:
        f"{RESULTS}/logs/summarize_regime.log",
    benchmark:
        f"{RESULTS}/benchmarks/summarize_regime.tsv"
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert summarize-regime --alignment {input.alignment} --training {input.training} --out-stats {params.stats} "
        "--out-cells {output.cells} --out-claims {output.claims} --out-map {output.map} --figures {params.figures} "
        "> {log} 2>&1"
