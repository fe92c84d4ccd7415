"""The conda environment pins the same versions as requirements.txt."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def pins(lines):
    result = {}
    for line in lines:
        line = line.strip()
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            result[name.lower().replace("_", "-")] = version
    return result


def test_conda_env_pins_agree_with_requirements():
    required = pins((ROOT / "requirements.txt").read_text().splitlines())
    for env_file in sorted((ROOT / "envs").glob("*.yaml")):
        env = yaml.safe_load(env_file.read_text())
        pip_section = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict))
        env_pins = pins(pip_section)
        assert env_pins, f"{env_file.name} pins nothing"
        for name, version in env_pins.items():
            assert name in required, f"{env_file.name}: {name} is not in requirements.txt"
            assert required[name] == version, (
                f"{env_file.name}: {name}=={version} but requirements.txt has {required[name]}"
            )
        python = next(item for item in env["dependencies"] if isinstance(item, str) and item.startswith("python="))
        assert python == "python=3.11"
