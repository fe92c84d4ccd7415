rule prepare_dataset:
    output:
        arrays=f"{PREPARED}/{{dataset}}/arrays.npz",
        info=f"{PREPARED}/{{dataset}}/info.json",
    params:
        settings=dataset_settings,
        out_dir=lambda wildcards, output: os.path.dirname(output.info),
    log:
        f"{RESULTS}/logs/prepare_dataset/{{dataset}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/prepare_dataset/{{dataset}}.tsv"
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 20 * attempt,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert prepare --dataset {wildcards.dataset} --settings {params.settings:q} --out {params.out_dir} > {log} 2>&1"
