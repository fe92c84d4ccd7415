rule dump_gradients:
    input:
        run=RUN_DIR,
        info=lambda wildcards: prepared_dataset(wildcards.dataset),
    output:
        store=directory(STORE),
    params:
        settings=dump_settings,
        checkpoint=lambda wildcards, input: f"{input.run}/step{wildcards.step}.pt",
        data_dir=lambda wildcards, input: os.path.dirname(input.info),
    log:
        f"{RESULTS}/logs/dump_gradients/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/dump_gradients/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 30 * attempt,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert dump --checkpoint {params.checkpoint} --data {params.data_dir} --settings {params.settings:q} "
        "--out {output.store} --threads {threads} > {log} 2>&1"
