"""The `cluster` marker and the `slurm_cluster` fixture: which SLURM cluster, if any, the tests may use.

Tests here submit real jobs. They run when a SLURM controller answers and it is the throwaway
single-node cluster of tests/cluster/slurm_up.sh (ClusterName `growcertci`: root on Debian brings
it up in seconds), so `make test` on a real cluster's login node never submits jobs unasked.
GROWCERT_SLURM=1 requires a cluster (any reachable one; no cluster is then a failure, not a skip,
which is what CI wants); GROWCERT_SLURM=0 skips them.
"""

import os
import re
import shutil
import subprocess

import pytest

TEST_CLUSTER = "growcertci"
START_HINT = "start one with `sudo tests/cluster/slurm_up.sh`"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "cluster: submits the pipeline to a real SLURM cluster (tests/cluster/slurm_up.sh starts one); "
        "skipped when none is reachable",
    )


def _scontrol(*args):
    return subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=20)


def find_slurm_cluster():
    """(cluster name, None) when tests may submit to a reachable SLURM cluster, else (None, why not)."""
    if not shutil.which("sbatch") or not shutil.which("scontrol"):
        return None, f"no SLURM client commands (sbatch, scontrol) on PATH; {START_HINT}"
    try:
        ping = _scontrol("ping")
        if "is UP" not in ping.stdout:
            said = [line for line in (ping.stdout + ping.stderr).splitlines() if line.strip()]
            telling = [line for line in said if "fatal" in line or "DOWN" in line] or said or ["no output"]
            return None, f"no SLURM controller answers `scontrol ping` ({telling[0]}); {START_HINT}"
        config = _scontrol("show", "config")
    except subprocess.TimeoutExpired:
        return None, f"the SLURM controller did not answer `scontrol` within 20 s; {START_HINT}"
    match = re.search(r"^ClusterName\s*=\s*(\S+)", config.stdout, re.MULTILINE)
    name = match.group(1) if match else "?"
    if name != TEST_CLUSTER and os.environ.get("GROWCERT_SLURM") != "1":
        return None, (
            f"SLURM cluster {name!r} is not the throwaway test cluster {TEST_CLUSTER!r} of "
            "tests/cluster/slurm_up.sh; set GROWCERT_SLURM=1 to submit the test workflow to it"
        )
    return name, None


@pytest.fixture(scope="session")
def slurm_cluster():
    """The name of the SLURM cluster to submit to; skips (or fails under GROWCERT_SLURM=1) without one."""
    flag = os.environ.get("GROWCERT_SLURM", "")
    if flag == "0":
        pytest.skip("SLURM cluster tests disabled by GROWCERT_SLURM=0")
    name, why_not = find_slurm_cluster()
    if name is None:
        if flag == "1":
            pytest.fail(f"GROWCERT_SLURM=1 but no usable SLURM cluster: {why_not}")
        pytest.skip(f"needs a SLURM cluster: {why_not}")
    return name
