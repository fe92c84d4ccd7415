rule dump_gradients:
    wildcard_constraints:
        family=family_pattern(trained_families()),
    input:
        run=RUN_DIR,
        info=INFO,
    output:
        store=STORE_OUTPUT,
    params:
        device=DEVICE,
        store=output_store(),
        settings=PLAN.settings("dump"),
        checkpoint=input_checkpoint(),
        data_dir=input_folder("info"),
    log:
        artifacts.LOG.path(RESULTS, job=f"dump_gradients/{artifacts.STORE_NAME}"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job=f"dump_gradients/{artifacts.STORE_NAME}")
    threads: 1
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(30),
        gpu=GPUS,
    conda:
        CONDA_ENV
    shell:
        "growcert dump --checkpoint {params.checkpoint} --data {params.data_dir} --settings {params.settings:q} "
        "--out {params.store} --threads {threads} --device {params.device} > {log} 2>&1"


# A pretrained Hugging Face model (config key pretrained): the same dump, from its checkpoint folder.
rule dump_pretrained:
    input:
        info=INFO,
        checkpoint=PLAN.pretrained_input,
    output:
        store=PRETRAINED_STORE_OUTPUT,
    params:
        device=DEVICE,
        store=output_store(),
        settings=PLAN.settings("dump", pretrained=True),
        hf=PLAN.settings("pretrained_model"),
        checkpoint=PLAN.pretrained_folder,
        data_dir=input_folder("info"),
    log:
        artifacts.LOG.path(RESULTS, job=f"dump_pretrained/{artifacts.fill(artifacts.STORE_NAME, **PRETRAINED)}"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job=f"dump_pretrained/{artifacts.fill(artifacts.STORE_NAME, **PRETRAINED)}")
    threads: config["pretrained"]["threads"]
    resources:
        mem_mb=PLAN.pretrained_mem_mb(4),
        runtime=PLAN.pretrained_runtime,
        gpu=GPUS,
    conda:
        CONDA_ENV
    shell:
        "growcert dump --checkpoint {params.checkpoint:q} --hf {params.hf:q} --data {params.data_dir} "
        "--settings {params.settings:q} --out {params.store} --threads {threads} --device {params.device} > {log} 2>&1"
