rule grokking:
    output:
        summary=f"{RESULTS}/grokking/summary.csv",
        curves=f"{RESULTS}/grokking/curves.csv",
        figure=f"{RESULTS}/figures/p2_grokking.png",
        claims=f"{RESULTS}/claims/p2_grokking.csv",
        table=f"{RESULTS}/tables/p2_grokking_steps.csv",
    params:
        settings=lambda wildcards: json.dumps(config["grokking"], sort_keys=True),
        out_dir=lambda wildcards, output: os.path.dirname(output.summary),
    log:
        f"{RESULTS}/logs/grokking.log",
    benchmark:
        f"{RESULTS}/benchmarks/grokking.tsv"
    threads: config["threads"]["grokking"]
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 60 * attempt,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert grokking --settings {params.settings:q} --out {params.out_dir} --figure {output.figure} "
        "--claims {output.claims} --table {output.table} --threads {threads} > {log} 2>&1"
