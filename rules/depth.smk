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
        log(RESULTS, "estimate_depth", artifacts.STORE_NAME),
    benchmark:
        benchmark(RESULTS, "estimate_depth", artifacts.STORE_NAME)
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
        run=directory(artifacts.grow_folder(RESULTS)),
    params:
        device=DEVICE,
        settings=PLAN.settings("grow"),
        data_dir=input_folder("info"),
    log:
        log(RESULTS, "grow_model", "{experiment}"),
    benchmark:
        benchmark(RESULTS, "grow_model", "{experiment}")
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
        table=f"{RESULTS}/{artifacts.POOLED_DEPTH}",
        decision=report_output(artifacts.RECOMMENDED_DEPTH),
        figure=report_output(artifacts.DEPTH),
    params:
        settings=PLAN.settings("depth"),
    log:
        log(RESULTS, "summarize_depth"),
    benchmark:
        benchmark(RESULTS, "summarize_depth")
    conda:
        CONDA_ENV
    shell:
        "growcert summarize-depth {input.tables} --settings {params.settings:q} --out-table {output.table} "
        "--out-decision {output.decision} --figure {output.figure} > {log} 2>&1"


rule summarize_growth:
    input:
        runs=[artifacts.grow_folder(RESULTS, experiment) for experiment in PLAN.grow_experiments()],
        depth=f"{RESULTS}/{artifacts.POOLED_DEPTH}",
    output:
        table=report_output(artifacts.GROWTH_TABLE),
        claims=report_output(artifacts.DEPTH_CLAIMS),
        figure=report_output(artifacts.GROWTH),
    log:
        log(RESULTS, "summarize_growth"),
    benchmark:
        benchmark(RESULTS, "summarize_growth")
    conda:
        CONDA_ENV
    shell:
        "growcert summarize-growth {input.runs} --depth {input.depth} --out-table {output.table} "
        "--out-claims {output.claims} --figure {output.figure} > {log} 2>&1"
