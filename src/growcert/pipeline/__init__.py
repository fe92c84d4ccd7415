"""The pipeline's wiring facts, read by the rules (rules/*.smk) and tested here; nothing of the package beyond them.

    artifacts.py   every file the pipeline writes, named once: figures, tables, claims and checks files, the run
                   folder, the per-store files, logs and benchmarks (standard library only: the report reads it too)
    rules.py       what only makes sense inside Snakemake (the one module that imports it): `snakemake --report`
                   marks, a parameter's folder derived from a job's own files

Of these, a stage or the report imports only `artifacts` (a figure's file, a checkpoint's name): `growcert <stage>`
gets explicit paths and settings on its command line. What a config plans (it reads the experiments registry, so
it sits above them) is growcert.plan, with the training grids.
"""
