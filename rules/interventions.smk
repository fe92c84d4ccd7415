rule intervene:
    wildcard_constraints:
        family=family_pattern(trained_families()),
    input:
        run=RUN_DIR,
        store=STORE_FILE,
        info=INFO,
    output:
        table=artifacts.INTERVENTION_TABLE.path(RESULTS),
    params:
        device=DEVICE,
        store=input_store(),
        settings=PLAN.settings("intervene"),
        checkpoint=input_checkpoint(),
        data_dir=input_folder("info"),
    log:
        artifacts.LOG.path(RESULTS, job=f"intervene/{artifacts.STORE_NAME}"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job=f"intervene/{artifacts.STORE_NAME}")
    priority: STORE_READER_PRIORITY
    threads: 1
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(30),
        gpu=GPUS,
    conda:
        CONDA_ENV
    shell:
        "growcert intervene --checkpoint {params.checkpoint} --store {params.store} --data {params.data_dir} "
        "--settings {params.settings:q} --out {output.table} --threads {threads} --device {params.device} > {log} 2>&1"


# The same interventions on a pretrained Hugging Face model (config pretrained.intervene).
rule intervene_pretrained:
    input:
        store=PRETRAINED_STORE_FILE,
        info=INFO,
        checkpoint=PLAN.pretrained_input,
    output:
        table=artifacts.INTERVENTION_TABLE.path(RESULTS, **PRETRAINED),
    params:
        device=DEVICE,
        store=input_store(),
        settings=PLAN.settings("intervene"),
        hf=PLAN.settings("pretrained_model"),
        checkpoint=PLAN.pretrained_folder,
        data_dir=input_folder("info"),
    log:
        artifacts.LOG.path(RESULTS, job=f"intervene_pretrained/{artifacts.fill(artifacts.STORE_NAME, **PRETRAINED)}"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS,
                                 job=f"intervene_pretrained/{artifacts.fill(artifacts.STORE_NAME, **PRETRAINED)}")
    threads: config["pretrained"]["threads"]
    resources:
        mem_mb=PLAN.pretrained_mem_mb(8),
        runtime=PLAN.pretrained_runtime,
        gpu=GPUS,
    conda:
        CONDA_ENV
    shell:
        "growcert intervene --checkpoint {params.checkpoint:q} --hf {params.hf:q} --store {params.store} "
        "--data {params.data_dir} --settings {params.settings:q} --out {output.table} --threads {threads} --device {params.device} > {log} 2>&1"


localrules:
    summarize_interventions,


rule summarize_interventions:
    input:
        tables=PLAN.intervention_targets(),
    output:
        table=artifacts.POOLED_INTERVENTIONS.path(RESULTS),
        summary=report_output(artifacts.INTERVENTIONS_SUMMARY),
        checks=artifacts.INTERVENTIONS_CHECKS.path(RESULTS),
        claims=report_output(artifacts.INTERVENTIONS_CLAIMS),
        figure=report_output(artifacts.INTERVENTIONS),
    log:
        artifacts.LOG.path(RESULTS, job="summarize_interventions"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="summarize_interventions")
    conda:
        CONDA_ENV
    shell:
        "growcert summarize-interventions {input.tables} --out-table {output.table} --out-summary {output.summary} "
        "--out-checks {output.checks} --out-claims {output.claims} --figure {output.figure} > {log} 2>&1"
