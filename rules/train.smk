rule train_model:
    input:
        info=INFO,
    output:
        run=directory(RUN_DIR),
    params:
        device=DEVICE,
        settings=PLAN.settings("train"),
        data_dir=input_folder("info"),
    log:
        artifacts.LOG.path(RESULTS, job=f"train_model/{artifacts.RUN}"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job=f"train_model/{artifacts.RUN}")
    threads: config["threads"]["train"]
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(60),
        gpu=GPUS,
    conda:
        CONDA_ENV
    shell:
        "growcert train --data {params.data_dir} --settings {params.settings:q} --out {output.run} "
        "--threads {threads} --device {params.device} > {log} 2>&1"


localrules:
    summarize_training,


rule summarize_training:
    input:
        runs=PLAN.run_folders(),
    output:
        table=artifacts.TRAINING_TABLE.path(RESULTS),
    log:
        artifacts.LOG.path(RESULTS, job="summarize_training"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="summarize_training")
    conda:
        CONDA_ENV
    shell:
        "growcert summarize-training {input.runs} --out {output.table} > {log} 2>&1"
