rule dump_gradients:
    wildcard_constraints:
        family="resnet|llama",
    input:
        run=RUN_DIR,
        info=lambda wildcards: prepared_dataset(wildcards.dataset),
    output:
        store=STORE_OUTPUT,
    params:
        device=DEVICE,  # where the job runs; outputs are device-free but not bit-identical across devices
        store=lambda wildcards, output: store_folder(output.store),
        settings=dump_settings,
        checkpoint=lambda wildcards, input: f"{input.run}/step{wildcards.step}.pt",
        data_dir=lambda wildcards, input: os.path.dirname(input.info),
    log:
        f"{RESULTS}/logs/dump_gradients/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/dump_gradients/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.tsv"
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 30 * attempt,
        gpu=GPUS,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert dump --checkpoint {params.checkpoint} --data {params.data_dir} --settings {params.settings:q} "
        "--out {params.store} --threads {threads} --device {params.device} > {log} 2>&1"


# A pretrained Hugging Face model (config key pretrained): the same dump, from its checkpoint folder.
rule dump_pretrained:
    input:
        info=lambda wildcards: prepared_dataset(wildcards.dataset),
        checkpoint=pretrained_input,
    output:
        store=PRETRAINED_STORE_OUTPUT,
    params:
        device=DEVICE,  # where the job runs; outputs are device-free but not bit-identical across devices
        store=lambda wildcards, output: store_folder(output.store),
        settings=pretrained_dump_settings,
        hf=pretrained_hf_settings,
        checkpoint=pretrained_folder,
        data_dir=lambda wildcards, input: os.path.dirname(input.info),
    log:
        f"{RESULTS}/logs/dump_pretrained/hf/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/dump_pretrained/hf/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.tsv"
    threads: config["pretrained"]["threads"]
    resources:
        mem_mb=pretrained_mem_mb(4),
        runtime=pretrained_runtime,
        gpu=GPUS,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert dump --checkpoint {params.checkpoint:q} --hf {params.hf:q} --data {params.data_dir} "
        "--settings {params.settings:q} --out {params.store} --threads {threads} --device {params.device} > {log} 2>&1"
