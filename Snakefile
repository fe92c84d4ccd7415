# growcert: when does growing a trained residual network help on unseen data?
# Thin workflow: rules/common.smk validates the config and takes the plan, the paths and the wildcard
# constraints from the package (growcert.plan, growcert.pipeline), the stages live in rules/*.smk, and every
# rule shells out to the `growcert` command line.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


# `snakemake --report results/snakemake-report.zip`: this page, then every output the rules mark with report_output
# (growcert.pipeline.rules).
report: "src/growcert/resources/report/workflow.rst"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/train.smk"
include: "rules/dump.smk"
include: "rules/alignment.smk"
include: "rules/interventions.smk"
include: "rules/depth.smk"
include: "rules/poprisk.smk"
include: "rules/report.smk"
include: "rules/advise.smk"
include: "rules/advise_check.smk"


rule all:
    input:
        artifacts.REPORT.path(RESULTS),
    default_target: True
