rule train_model:
    input:
        info=lambda wildcards: prepared_dataset(wildcards.dataset),
    output:
        run=directory(RUN_DIR),
    params:
        device=DEVICE,  # where the job runs; outputs are device-free but not bit-identical across devices
        settings=run_settings,
        data_dir=lambda wildcards, input: os.path.dirname(input.info),
    log:
        f"{RESULTS}/logs/train_model/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train_model/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}.tsv"
    threads: config["threads"]["train"]
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
        gpu=GPUS,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert train --data {params.data_dir} --settings {params.settings:q} --out {output.run} "
        "--threads {threads} --device {params.device} > {log} 2>&1"


localrules:
    summarize_training,


rule summarize_training:
    input:
        runs=all_run_dirs(),
    output:
        table=f"{RESULTS}/stats/training.csv",
    log:
        f"{RESULTS}/logs/summarize_training.log",
    benchmark:
        f"{RESULTS}/benchmarks/summarize_training.tsv"
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert summarize-training {input.runs} --out {output.table} > {log} 2>&1"
