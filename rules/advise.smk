# `snakemake advise`: growcert advise on the model and data of config key advise (model, data), into
# {results}/advise. Not part of `all`: a user asks for it by name, on a laptop or through the SLURM profile.
rule advise:
    input:
        model=lambda wildcards: advise_inputs(config)["model"],
        data=lambda wildcards: advise_inputs(config)["data"],
    output:
        table=f"{RESULTS}/advise/advice.csv",
        page=f"{RESULTS}/advise/advice.md",
        figure=f"{RESULTS}/advise/advice.png",
        provenance=f"{RESULTS}/advise/provenance.json",
    params:
        device=DEVICE,  # where the job runs; outputs are device-free but not bit-identical across devices
        model=lambda wildcards: config["advise"]["model"],
        data=lambda wildcards: config["advise"]["data"],
        settings=lambda wildcards: json.dumps(config["advise"], sort_keys=True),
        out=lambda wildcards, output: os.path.dirname(output.table),
    log:
        f"{RESULTS}/logs/advise.log",
    benchmark:
        f"{RESULTS}/benchmarks/advise.tsv"
    threads: 1
    resources:
        # the dump's batch cap (advise.max_batch_mb) on top of a model and its estimates' working memory
        mem_mb=lambda wildcards, attempt: attempt * (4000 + 2 * int(config["advise"]["max_batch_mb"])),
        runtime=lambda wildcards, attempt: 60 * attempt,
        gpu=GPUS,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert advise --model {params.model:q} --data {params.data:q} --settings {params.settings:q} "
        "--out {params.out} --threads {threads} --device {params.device} > {log} 2>&1"
