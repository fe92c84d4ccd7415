rule estimate_depth:
    input:
        store=STORE_FILE,
    output:
        table=artifacts.DEPTH_VALUES.path(RESULTS),
    params:
        device=DEVICE,
        store=input_store(),
        settings=PLAN.settings("depth"),
    log:
        artifacts.LOG.path(RESULTS, job=f"estimate_depth/{artifacts.STORE_NAME}"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job=f"estimate_depth/{artifacts.STORE_NAME}")
    priority: STORE_READER_PRIORITY
    threads: 1
    resources:
        mem_mb=PLAN.depth_mem_mb,
        runtime=PLAN.store_runtime,
        gpu=GPUS,
    conda:
        CONDA_ENV
    shell:
        "growcert estimate-depth --store {params.store} --settings {params.settings:q} --out {output.table} "
        "--threads {threads} --device {params.device} > {log} 2>&1"


rule grow_model:
    input:
        info=PLAN.grow_info,
    output:
        run=directory(artifacts.GROW.path(RESULTS)),
    params:
        device=DEVICE,
        settings=PLAN.settings("grow"),
        data_dir=input_folder("info"),
    log:
        artifacts.LOG.path(RESULTS, job="grow_model/{experiment}"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="grow_model/{experiment}")
    threads: 1
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(60),
        gpu=GPUS,
    conda:
        CONDA_ENV
    shell:
        "growcert grow --data {params.data_dir} --settings {params.settings:q} --out {output.run} "
        "--threads {threads} --device {params.device} > {log} 2>&1"


localrules:
    summarize_depth,
    summarize_growth,


rule summarize_depth:
    input:
        tables=PLAN.per_store(artifacts.DEPTH_VALUES, PLAN.fixed_context_runs(), config["depth"]["analyse"]),
    output:
        table=artifacts.POOLED_DEPTH.path(RESULTS),
        decision=report_output(artifacts.RECOMMENDED_DEPTH),
        figure=report_output(artifacts.DEPTH),
    params:
        settings=PLAN.settings("depth"),
    log:
        artifacts.LOG.path(RESULTS, job="summarize_depth"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="summarize_depth")
    conda:
        CONDA_ENV
    shell:
        "growcert summarize-depth {input.tables} --settings {params.settings:q} --out-table {output.table} "
        "--out-decision {output.decision} --figure {output.figure} > {log} 2>&1"


rule summarize_growth:
    input:
        runs=[artifacts.GROW.path(RESULTS, experiment=experiment) for experiment in PLAN.grow_experiments()],
        depth=artifacts.POOLED_DEPTH.path(RESULTS),
    output:
        table=report_output(artifacts.GROWTH_TABLE),
        claims=report_output(artifacts.DEPTH_CLAIMS),
        figure=report_output(artifacts.GROWTH),
    log:
        artifacts.LOG.path(RESULTS, job="summarize_growth"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="summarize_growth")
    conda:
        CONDA_ENV
    shell:
        "growcert summarize-growth {input.runs} --depth {input.depth} --out-table {output.table} "
        "--out-claims {output.claims} --figure {output.figure} > {log} 2>&1"
