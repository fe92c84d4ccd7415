# `snakemake summarize_advise_check`: growcert advise-check on every checkpoint of every trained run (early and late),
# pooled into {results}/advise-check/scores. Not part of `all`: the advise-check reference run asks for it by name.
rule advise_check:
    wildcard_constraints:
        family=family_pattern(trained_families()),
    input:
        run=RUN_DIR,
        info=INFO,
    output:
        table=artifacts.ADVISE_CHECK_TABLE.path(RESULTS),
    params:
        device=DEVICE,
        settings=PLAN.settings("advise_check"),
        checkpoint=input_checkpoint(),
        data_dir=input_folder("info"),
        out=output_folder("table"),
    log:
        artifacts.LOG.path(RESULTS, job=f"advise_check/{artifacts.STORE_NAME}"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job=f"advise_check/{artifacts.STORE_NAME}")
    threads: 1
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(30),
        gpu=GPUS,
    conda:
        CONDA_ENV
    shell:
        "growcert advise-check --model {params.checkpoint} --data {params.data_dir} --settings {params.settings:q} "
        "--out {params.out} --threads {threads} --device {params.device} > {log} 2>&1"


rule summarize_advise_check:
    input:
        tables=PLAN.advise_check_tables(),
    output:
        scorecard=artifacts.SCORECARD.under(artifacts.ADVISE_CHECK_SCORES).path(RESULTS),
        reliability=artifacts.RELIABILITY.under(artifacts.ADVISE_CHECK_SCORES).path(RESULTS),
        figure=artifacts.RELIABILITY_FIGURE.under(artifacts.ADVISE_CHECK_SCORES).path(RESULTS),
        claims=artifacts.CLAIM_ROWS.under(artifacts.ADVISE_CHECK_SCORES).path(RESULTS),
        table=artifacts.ADVISE_CHECK_ROWS.under(artifacts.ADVISE_CHECK_SCORES).path(RESULTS),
    params:
        settings=PLAN.settings("advise_check"),
        out=output_folder("table"),
    log:
        artifacts.LOG.path(RESULTS, job="summarize_advise_check"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="summarize_advise_check")
    threads: 1
    resources:
        mem_mb=per_attempt(2000),
        runtime=per_attempt(10),
    conda:
        CONDA_ENV
    shell:
        "growcert summarize-advise-check {input.tables} --settings {params.settings:q} --out {params.out} > {log} 2>&1"
