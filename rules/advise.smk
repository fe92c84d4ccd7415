# `snakemake advise`: growcert advise on the model and data of config key advise (model, data), into
# {results}/advise. Not part of `all`: a user asks for it by name, on a laptop or through the SLURM profile.
rule advise:
    input:
        model=PLAN.advise_input("model"),
        data=PLAN.advise_input("data"),
    output:
        table=f"{RESULTS}/advise/advice.csv",
        page=f"{RESULTS}/advise/advice.md",
        figure=f"{RESULTS}/advise/advice.png",
        provenance=f"{RESULTS}/advise/provenance.json",
    params:
        device=DEVICE,
        model=PLAN.advise_path("model"),
        data=PLAN.advise_path("data"),
        settings=PLAN.settings("advise"),
        out=output_folder("table"),
    log:
        log(RESULTS, "advise"),
    benchmark:
        benchmark(RESULTS, "advise")
    threads: 1
    resources:
        mem_mb=PLAN.advise_mem_mb,
        runtime=per_attempt(60),
        gpu=GPUS,
    conda:
        CONDA_ENV
    shell:
        "growcert advise --model {params.model:q} --data {params.data:q} --settings {params.settings:q} "
        "--out {params.out} --threads {threads} --device {params.device} > {log} 2>&1"
