"""What a user installing tpcore relies on: ``python -m tpcore``, the changelog's version, the
licence and the type-hint marker."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import tpcore

pytestmark = pytest.mark.host_only("packaging metadata and a child process")

REPO = Path(__file__).resolve().parents[1]


def test_python_m_tpcore_prints_the_version():
    out = subprocess.run([sys.executable, "-m", "tpcore", "--version"], capture_output=True,
                         text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"tpcore {tpcore.__version__}"


def test_changelog_names_the_current_version():
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## \[([^\]]+)\]", text, flags=re.M)
    assert versions[0] == "Unreleased"
    assert versions[1] == tpcore.__version__, "the latest release section of CHANGELOG.md"


def test_license_and_typed_marker():
    assert (REPO / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert (Path(tpcore.__file__).parent / "py.typed").is_file()


def test_every_package_is_listed_for_the_wheel():
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "tpcore").rglob(
        "__init__.py")} | {"tpcore.kernels"}
    assert found == listed, "pyproject.toml's packages must list every package"
