rule intervene:
    wildcard_constraints:
        family="resnet|llama",
    input:
        run=RUN_DIR,
        store=STORE_INPUT,
        info=lambda wildcards: prepared_dataset(wildcards.dataset),
    output:
        table=INTERVENTIONS,
    params:
        device=DEVICE,  # where the job runs; outputs are device-free but not bit-identical across devices
        store=lambda wildcards, input: store_folder(input.store),
        settings=intervene_settings,
        checkpoint=lambda wildcards, input: f"{input.run}/step{wildcards.step}.pt",
        data_dir=lambda wildcards, input: os.path.dirname(input.info),
    log:
        f"{RESULTS}/logs/intervene/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/intervene/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.tsv"
    priority: STORE_READER_PRIORITY
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 30 * attempt,
        gpu=GPUS,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert intervene --checkpoint {params.checkpoint} --store {params.store} --data {params.data_dir} "
        "--settings {params.settings:q} --out {output.table} --threads {threads} --device {params.device} > {log} 2>&1"


# The same interventions on a pretrained Hugging Face model (config pretrained.intervene).
rule intervene_pretrained:
    input:
        store=PRETRAINED_STORE_INPUT,
        info=lambda wildcards: prepared_dataset(wildcards.dataset),
        checkpoint=pretrained_input,
    output:
        table=PRETRAINED_INTERVENTIONS,
    params:
        device=DEVICE,  # where the job runs; outputs are device-free but not bit-identical across devices
        store=lambda wildcards, input: store_folder(input.store),
        settings=intervene_settings,
        hf=pretrained_hf_settings,
        checkpoint=pretrained_folder,
        data_dir=lambda wildcards, input: os.path.dirname(input.info),
    log:
        f"{RESULTS}/logs/intervene_pretrained/hf/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/intervene_pretrained/hf/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.tsv"
    threads: config["pretrained"]["threads"]
    resources:
        mem_mb=pretrained_mem_mb(8),
        runtime=pretrained_runtime,
        gpu=GPUS,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert intervene --checkpoint {params.checkpoint:q} --hf {params.hf:q} --store {params.store} "
        "--data {params.data_dir} --settings {params.settings:q} --out {output.table} --threads {threads} --device {params.device} > {log} 2>&1"


localrules:
    summarize_interventions,


rule summarize_interventions:
    input:
        tables=intervention_targets(),
    output:
        table=f"{RESULTS}/stats/interventions.csv",
        summary=report_output(f"{RESULTS}/tables/p1_interventions_summary.csv", "p1_interventions_summary", "p1",
                              "interventions", "table: first-order accuracy per cell"),
        checks=f"{RESULTS}/checks/p1_interventions.csv",
        claims=report_output(f"{RESULTS}/claims/p1_interventions.csv", "p1_interventions_claims", "p1", "interventions",
                             "claims: observed / predicted at the paper's step scale"),
        figure=figure_output(figures.INTERVENTIONS),
    log:
        f"{RESULTS}/logs/summarize_interventions.log",
    benchmark:
        f"{RESULTS}/benchmarks/summarize_interventions.tsv"
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert summarize-interventions {input.tables} --out-table {output.table} --out-summary {output.summary} "
        "--out-checks {output.checks} --out-claims {output.claims} --figure {output.figure} > {log} 2>&1"
