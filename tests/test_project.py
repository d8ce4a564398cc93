"""The project around the package: README commands, CI script, environment.yml vs pyproject."""

from __future__ import annotations

import pathlib
import re

import tomllib
import yaml

ROOT = pathlib.Path(__file__).parent.parent


def _norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower()


def test_environment_yml_matches_pyproject():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    wanted = set(map(_norm, pyproject["project"]["dependencies"] + extras["notebook"]))
    dev = {_norm(d.split("#")[0]) for d in extras["dev"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "graphviz" in deps, "conda users need the graphviz `dot` binary"
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    # every runtime and notebook requirement, plus dev ones the test suite cannot do without, pinned alike
    assert wanted <= set(map(_norm, pip)) <= wanted | dev


def test_readme_starts_with_the_two_commands_and_ci_uses_the_second():
    lines = [line for line in (ROOT / "README.md").read_text().splitlines() if line.strip()]
    commands = [line.strip() for line in lines[:12] if line.strip().startswith("bash scripts/run.sh")]
    assert commands[:2] == ["bash scripts/run.sh demo", "bash scripts/run.sh test"], commands
    assert "scripts/run.sh test" in (ROOT / ".ci" / "run").read_text()


def test_pyproject_torch_range_matches_internals_module():
    from fxviz.core.supported import TORCH_RANGE

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    torch_req = next(d for d in pyproject["project"]["dependencies"] if d.startswith("torch"))
    assert _norm(torch_req) == _norm("torch" + TORCH_RANGE)
