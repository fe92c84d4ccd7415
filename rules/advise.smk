# `snakemake advise`: growcert advise on the model and data of config key advise (model, data), into
# {results}/advise. Not part of `all`: a user asks for it by name, on a laptop or through the SLURM profile.
rule advise:
    input:
        model=PLAN.advise_input("model"),
        data=PLAN.advise_input("data"),
    output:
        table=artifacts.ADVICE_TABLE.under(artifacts.ADVISE).path(RESULTS),
        page=artifacts.ADVICE_PAGE.under(artifacts.ADVISE).path(RESULTS),
        figure=artifacts.ADVICE_FIGURE.under(artifacts.ADVISE).path(RESULTS),
        provenance=artifacts.PROVENANCE.under(artifacts.ADVISE).path(RESULTS),
    params:
        device=DEVICE,
        model=PLAN.advise_path("model"),
        data=PLAN.advise_path("data"),
        settings=PLAN.settings("advise"),
        out=output_folder("table"),
    log:
        artifacts.LOG.path(RESULTS, job="advise"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="advise")
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
