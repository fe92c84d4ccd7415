rule prepare_dataset:
    output:
        arrays=artifacts.ARRAYS.under(artifacts.DATASET).path(PREPARED),
        info=INFO,
    params:
        settings=PLAN.settings("prepare"),
        out_dir=output_folder("info"),
    log:
        artifacts.LOG.path(RESULTS, job="prepare_dataset/{dataset}"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="prepare_dataset/{dataset}")
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(20),
    conda:
        CONDA_ENV
    shell:
        "growcert prepare --dataset {wildcards.dataset} --settings {params.settings:q} --out {params.out_dir} > {log} 2>&1"
