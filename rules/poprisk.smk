# One unit of a P2 task that has units (growcert.experiments.units): one optimizer arm at one seed, its own job
# and folder. A killed unit resumes from the resume state in its folder (.resume, not an output, so a failed
# job keeps it) when Snakemake runs it again. Its inputs: the units it reads (grokking.cap paired: a gate
# reading's AdamW unit at its seed), none otherwise.
rule p2_unit:
    input:
        units=PLAN.unit_inputs,
    output:
        curves=artifacts.UNIT_CURVES.path(RESULTS),
        summary=artifacts.UNIT_SUMMARY.path(RESULTS),
    wildcard_constraints:
        task=PLAN.unit_task_pattern(),
        arm=r"[A-Za-z0-9._-]+",
    params:
        device=DEVICE,
        settings=PLAN.unit_settings,
        out_dir=output_folder("summary"),
    log:
        artifacts.UNIT_JOB_LOG.path(RESULTS),
    benchmark:
        artifacts.UNIT_BENCHMARK.path(RESULTS)
    threads: PLAN.task_threads
    resources:
        mem_mb=per_attempt(2000),
        runtime=per_attempt(120),
        gpu=GPUS,
    conda:
        CONDA_ENV
    shell:
        "growcert {wildcards.task} --settings {params.settings:q} --arm {wildcards.arm} --seed {wildcards.seed} "
        "--unit-inputs {input.units} --out {params.out_dir} --threads {threads} --device {params.device} > {log} 2>&1"


# The self-contained P2 experiments of the growcert.experiments registry: each trains its own small models from
# its config section (none: {}) and writes its folder, figure, claim rows and report table; a task with units
# gathers them (--aggregate) instead of training. A task with INPUTS
# (preference) has a rule of its own; the others run in p2_experiment when they draw a gate figure (GATE_TITLE),
# else in p2_ungated (which writes a checks file). This one: the tasks with optimizer arms (a gate figure).
rule p2_experiment:
    input:
        units=PLAN.task_units,
    output:
        summary=artifacts.TASK_SUMMARY.path(RESULTS),
        figure=report_output(artifacts.task_figure("{task}")),
        claims=report_output(artifacts.task_claims("{task}")),
        table=report_output(artifacts.task_table("{task}")),
        gate=report_output(artifacts.gate_figure("{task}")),
    wildcard_constraints:
        task=PLAN.task_pattern(gated=True),
    params:
        device=DEVICE,
        settings=PLAN.task_settings,
        out_dir=output_folder("summary"),
        aggregate=PLAN.aggregate_option,
    log:
        artifacts.LOG.path(RESULTS, job="{task}"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="{task}")
    threads: PLAN.aggregate_threads
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(120),
        gpu=PLAN.aggregate_gpus(GPUS),
    conda:
        CONDA_ENV
    shell:
        "growcert {wildcards.task} --settings {params.settings:q} {params.aggregate} --out {params.out_dir} --figure {output.figure} "
        "--gate-figure {output.gate} --claims {output.claims} --table {output.table} --threads {threads} --device {params.device} > {log} 2>&1"


# The tasks without optimizer arms (theory): no gate figure; their check rows (an exact identity) go into
# results/checks/, a header-only file for a task that has none.
rule p2_ungated:
    output:
        summary=artifacts.TASK_SUMMARY.path(RESULTS),
        figure=report_output(artifacts.task_figure("{task}")),
        claims=report_output(artifacts.task_claims("{task}")),
        checks=artifacts.task_checks("{task}").path(RESULTS),
        table=report_output(artifacts.task_table("{task}")),
    input:
        units=PLAN.task_units,
    wildcard_constraints:
        task=PLAN.task_pattern(gated=False),
    params:
        device=DEVICE,
        settings=PLAN.task_settings,
        out_dir=output_folder("summary"),
        aggregate=PLAN.aggregate_option,
    log:
        artifacts.LOG.path(RESULTS, job="{task}"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="{task}")
    threads: PLAN.aggregate_threads
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(120),
        gpu=GPUS,
    conda:
        CONDA_ENV
    shell:
        "growcert {wildcards.task} --settings {params.settings:q} {params.aggregate} --out {params.out_dir} --figure {output.figure} "
        "--claims {output.claims} --checks {output.checks} --table {output.table} --threads {threads} "
        "--device {params.device} > {log} 2>&1"


# DPO starts from a language model the pipeline pretrained on Shakespeare (config preference.reference), or from
# a local Hugging Face checkpoint (config preference.hf_model), which then replaces that input.
rule preference:
    input:
        reference=PLAN.preference_reference,
        info=PLAN.prepared_info(PREFERENCE_DATASET),
    output:
        summary=artifacts.TASK_SUMMARY.path(RESULTS, task="preference"),
        figure=report_output(artifacts.task_figure("preference")),
        claims=report_output(artifacts.task_claims("preference")),
        table=report_output(artifacts.task_table("preference")),
        gate=report_output(artifacts.gate_figure("preference")),
    params:
        device=DEVICE,
        settings=PLAN.settings("preference"),
        out_dir=output_folder("summary"),
        reference=PLAN.reference_option,
        data_dir=input_folder("info"),
    log:
        artifacts.LOG.path(RESULTS, job="preference"),
    benchmark:
        artifacts.BENCHMARK.path(RESULTS, job="preference")
    threads: config["threads"]["preference"]
    resources:
        mem_mb=per_attempt(8000),
        runtime=per_attempt(120),
        gpu=GPUS,
    conda:
        CONDA_ENV
    shell:
        "growcert preference --settings {params.settings:q} {params.reference} --data {params.data_dir} --out {params.out_dir} "
        "--figure {output.figure} --gate-figure {output.gate} --claims {output.claims} --table {output.table} "
        "--threads {threads} --device {params.device} > {log} 2>&1"
