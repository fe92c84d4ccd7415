# The self-contained P2 experiments of the growcert.experiments registry; outputs from experiment_outputs and
# the tasks each rule runs from p2_tasks (common.smk). This one: the tasks with optimizer arms (a gate figure).
rule p2_experiment:
    output:
        summary=experiment_outputs("{task}")["summary"],
        figure=figure_output(figures.task_figure("{task}")),
        claims=task_report_output("claims"),
        table=task_report_output("table"),
        gate=figure_output(figures.gate_figure("{task}")),
    wildcard_constraints:
        task=p2_tasks(gated=True),
    params:
        device=DEVICE,  # where the job runs; outputs are device-free but not bit-identical across devices
        settings=p2_settings,
        out_dir=lambda wildcards, output: os.path.dirname(output.summary),
    log:
        f"{RESULTS}/logs/{{task}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/{{task}}.tsv"
    threads: p2_threads
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 120 * attempt,
        gpu=GPUS,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert {wildcards.task} --settings {params.settings:q} --out {params.out_dir} --figure {output.figure} "
        "--gate-figure {output.gate} --claims {output.claims} --table {output.table} --threads {threads} --device {params.device} > {log} 2>&1"


# The tasks without optimizer arms (theory): no gate figure; their check rows (an exact identity) go into
# results/checks/, a header-only file for a task that has none.
rule p2_ungated:
    output:
        summary=experiment_outputs("{task}")["summary"],
        figure=figure_output(figures.task_figure("{task}")),
        claims=task_report_output("claims"),
        checks=experiment_outputs("{task}")["checks"],
        table=task_report_output("table"),
    wildcard_constraints:
        task=p2_tasks(gated=False),
    params:
        device=DEVICE,  # where the job runs; outputs are device-free but not bit-identical across devices
        settings=p2_settings,
        out_dir=lambda wildcards, output: os.path.dirname(output.summary),
    log:
        f"{RESULTS}/logs/{{task}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/{{task}}.tsv"
    threads: p2_threads
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
        runtime=lambda wildcards, attempt: 120 * attempt,
        gpu=GPUS,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert {wildcards.task} --settings {params.settings:q} --out {params.out_dir} --figure {output.figure} "
        "--claims {output.claims} --checks {output.checks} --table {output.table} --threads {threads} "
        "--device {params.device} > {log} 2>&1"


# DPO starts from a llama the pipeline pretrained on Shakespeare (config preference.reference), or from a
# local Hugging Face checkpoint (config preference.hf_model), which then replaces that input.
rule preference:
    input:
        reference=preference_reference,
        info=lambda wildcards: prepared_dataset("shakespeare"),
    output:
        summary=experiment_outputs("preference")["summary"],
        figure=figure_output(figures.task_figure("preference")),
        claims=report_output(experiment_outputs("preference")["claims"], "p2_preference_claims", "p2", "preference",
                             "claims: reward accuracy and drift"),
        table=report_output(experiment_outputs("preference")["table"], "p2_preference_table", "p2", "preference",
                            "table: medians per optimizer"),
        gate=figure_output(figures.gate_figure("preference")),
    params:
        device=DEVICE,  # where the job runs; outputs are device-free but not bit-identical across devices
        settings=lambda wildcards: json.dumps(config["preference"], sort_keys=True),
        out_dir=lambda wildcards, output: os.path.dirname(output.summary),
        reference=lambda wildcards, input: f"--reference {input.reference}" if input.reference else "",
        data_dir=lambda wildcards, input: os.path.dirname(input.info),
    log:
        f"{RESULTS}/logs/preference.log",
    benchmark:
        f"{RESULTS}/benchmarks/preference.tsv"
    threads: config["threads"]["preference"]
    resources:
        mem_mb=lambda wildcards, attempt: 8000 * attempt,
        runtime=lambda wildcards, attempt: 120 * attempt,
        gpu=GPUS,
    conda:
        "../envs/growcert.yaml"
    shell:
        "growcert preference --settings {params.settings:q} {params.reference} --data {params.data_dir} --out {params.out_dir} "
        "--figure {output.figure} --gate-figure {output.gate} --claims {output.claims} --table {output.table} "
        "--threads {threads} --device {params.device} > {log} 2>&1"
