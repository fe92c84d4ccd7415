rule estimate_depth:
    input:
        store=STORE_INPUT,
    output:
        table=DEPTH,
    params:
        device=DEVICE,  # where the job runs; outputs are device-free but not bit-identical across devices
        store=lambda wildcards, input: store_folder(input.store),
        settings=depth_settings,
    log:
        f"{RESULTS}/logs/estimate_depth/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/estimate_depth/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.tsv"
    priority: STORE_READER_PRIORITY
    threads: 1
    resources:
        mem_mb=depth_mem_mb,
        runtime=store_runtime,
        gpu=GPUS,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert estimate-depth --store {params.store} --settings {params.settings:q} --out {output.table} "
        "--threads {threads} --device {params.device} > {log} 2>&1"


rule grow_model:
    input:
        info=grow_dataset,
    output:
        run=directory(GROW),
    params:
        device=DEVICE,  # where the job runs; outputs are device-free but not bit-identical across devices
        settings=grow_settings_json,
        data_dir=lambda wildcards, input: os.path.dirname(input.info),
    log:
        f"{RESULTS}/logs/grow_model/{{experiment}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/grow_model/{{experiment}}.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
        gpu=GPUS,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert grow --data {params.data_dir} --settings {params.settings:q} --out {output.run} "
        "--threads {threads} --device {params.device} > {log} 2>&1"


localrules:
    summarize_depth,
    summarize_growth,


rule summarize_depth:
    input:
        tables=per_store(DEPTH, fixed_context_runs(), config["depth"]["analyse"]),
    output:
        table=f"{RESULTS}/stats/depth.csv",
        decision=report_output(f"{RESULTS}/tables/p3_recommended_depth.csv", "p3_recommended_depth", "p3", "depth",
                               "table: saturation decision"),
        figure=figure_output(figures.DEPTH),
    params:
        settings=lambda wildcards: json.dumps(config["depth"], sort_keys=True),
    log:
        f"{RESULTS}/logs/summarize_depth.log",
    benchmark:
        f"{RESULTS}/benchmarks/summarize_depth.tsv"
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert summarize-depth {input.tables} --settings {params.settings:q} --out-table {output.table} "
        "--out-decision {output.decision} --figure {output.figure} > {log} 2>&1"


rule summarize_growth:
    input:
        runs=expand(GROW, experiment=grow_experiments()),
        depth=f"{RESULTS}/stats/depth.csv",
    output:
        table=report_output(f"{RESULTS}/tables/p3_growth.csv", "p3_growth_table", "p3", "growth",
                            "table: held-out loss per arm and step"),
        claims=report_output(f"{RESULTS}/claims/p3_depth.csv", "p3_depth_claims", "p3", "growth",
                             "claims: depth plateau and grown vs scratch"),
        figure=figure_output(figures.GROWTH),
    log:
        f"{RESULTS}/logs/summarize_growth.log",
    benchmark:
        f"{RESULTS}/benchmarks/summarize_growth.tsv"
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert summarize-growth {input.runs} --depth {input.depth} --out-table {output.table} "
        "--out-claims {output.claims} --figure {output.figure} > {log} 2>&1"
