rule estimate_alignment:
    input:
        store=STORE,
    output:
        table=ALIGNMENT,
    params:
        settings=alignment_settings,
    log:
        f"{RESULTS}/logs/estimate_alignment/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/estimate_alignment/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=store_runtime,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert estimate-alignment --store {input.store} --settings {params.settings:q} --out {output.table} > {log} 2>&1"


rule estimate_misalignment:
    input:
        store=STORE,
        alignment=ALIGNMENT,
    output:
        table=MISALIGNMENT,
    params:
        settings=alignment_settings,
    log:
        f"{RESULTS}/logs/estimate_misalignment/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/estimate_misalignment/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 2000 * attempt,
        runtime=store_runtime,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert estimate-misalignment --store {input.store} --alignment {input.alignment} "
        "--settings {params.settings:q} --out {output.table} > {log} 2>&1"


localrules:
    summarize_alignment,


rule summarize_alignment:
    input:
        alignment=per_store(ALIGNMENT),
        misalignment=per_store(MISALIGNMENT),
    output:
        alignment=f"{RESULTS}/stats/alignment.csv",
        misalignment=f"{RESULTS}/stats/misalignment.csv",
        summary=f"{RESULTS}/tables/p1_alignment_summary.csv",
        claims=f"{RESULTS}/claims/p1_alignment.csv",
        figures=[f"{RESULTS}/figures/{name}.png" for name in P1_FIGURES],
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
        "--out-summary {output.summary} --out-claims {output.claims} --figures {params.figures} > {log} 2>&1"
