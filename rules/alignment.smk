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


# Labels of the P1 figures in `snakemake --report` (captions: report/<figure>.rst).
P1_FIGURE_LABELS = {
    "p1_dalign_vs_width": "d_align vs width",
    "p1_plugin_vs_unbiased": "plug-in vs unbiased d_align",
    "p1_misalignment_vs_width": "misalignment vs width",
    "p1_misalignment_vs_MK": "misalignment vs M = K",
}


rule summarize_alignment:
    input:
        alignment=per_store(ALIGNMENT),
        misalignment=per_store(MISALIGNMENT),
    output:
        alignment=f"{RESULTS}/stats/alignment.csv",
        misalignment=f"{RESULTS}/stats/misalignment.csv",
        summary=report(
            f"{RESULTS}/tables/p1_alignment_summary.csv",
            caption="../report/p1_alignment_summary.rst",
            category="P1 width and alignment",
            subcategory="alignment",
            labels={"result": "table: d_align per cell", "paper": "P1"},
        ),
        claims=report(
            f"{RESULTS}/claims/p1_alignment.csv",
            caption="../report/p1_alignment_claims.rst",
            category="P1 width and alignment",
            subcategory="alignment",
            labels={"result": "claims: width trends and certificates", "paper": "P1"},
        ),
        figures=[
            report(
                f"{RESULTS}/figures/{name}.png",
                caption=f"../report/{name}.rst",
                category="P1 width and alignment",
                subcategory="alignment",
                labels={"result": f"figure: {P1_FIGURE_LABELS[name]}", "paper": "P1"},
            )
            for name in P1_FIGURES
        ],
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
