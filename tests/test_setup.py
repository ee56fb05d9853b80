"""The setup a reader runs: the CPU build of torch through TORCH_INDEX, and the lock.

On a stock Linux machine pip resolves ``torch==2.13.0`` to the CUDA build on PyPI.
``make book TORCH_INDEX=https://download.pytorch.org/whl/cpu`` gives pip PyTorch's CPU
index as an extra index, where the same release is ``2.13.0+cpu``. These tests check
both halves without the network: the Makefile hands TORCH_INDEX to pip, and pip, given
the plain release on one index and the ``+cpu`` build on the extra one, takes the
``+cpu`` build for the pin in requirements.txt.
"""

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def make_dry_run(*variables: str) -> str:
    """What `make` would run to install the environment, without running it."""
    done = subprocess.run(
        ["make", "-n", "-B", ".venv/.installed", *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.replace("\\\n", " ")  # continued lines joined


def test_the_makefile_hands_torch_index_to_pip():
    with_index = make_dry_run(f"TORCH_INDEX={CPU_INDEX}")
    install = [line for line in with_index.splitlines() if "requirements.txt" in line]
    assert len(install) == 1 and f"--extra-index-url {CPU_INDEX}" in install[0]
    assert "--extra-index-url" not in make_dry_run()


def wheel(directory: Path, version: str) -> Path:
    """A stand-in torch wheel of this version: metadata and an empty module."""
    name = f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version}.dist-info"
    files = {
        "torch/__init__.py": "",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = hashlib.sha256(text.encode()).digest()
        encoded = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        record.append(f"{path},sha256={encoded},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    (directory / "torch").mkdir(parents=True)
    with zipfile.ZipFile(directory / "torch" / name, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    (directory / "torch" / "index.html").write_text(f'<a href="{name}">{name}</a>\n')
    return directory


def test_pip_takes_the_cpu_build_from_the_extra_index(tmp_path):
    pin = next(
        line
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if re.match(r"torch==", line)
    )
    plain = wheel(tmp_path / "pypi", pin.removeprefix("torch=="))
    cpu = wheel(tmp_path / "cpu", pin.removeprefix("torch==") + "+cpu")
    report = tmp_path / "report.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--no-deps",
            "--quiet",
            "--report",
            str(report),
            "--index-url",
            plain.as_uri(),
            "--extra-index-url",
            cpu.as_uri(),
            pin,
        ],
        check=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )
    (chosen,) = json.loads(report.read_text())["install"]
    assert chosen["metadata"]["version"] == pin.removeprefix("torch==") + "+cpu"


# --- the lock ------------------------------------------------------------------------
def locked_pins() -> dict[str, str]:
    """requirements.txt as {normalized name: version}."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line and not line.startswith(("#", "-e")):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_the_lock_pins_every_package_the_book_installs():
    """Every package in requirements.txt has an exact pin, every dependency of a locked
    package (on this platform) is locked too, and this environment holds those versions:
    nothing the book installs is left for pip to choose."""
    pins = locked_pins()
    for name, version in pins.items():
        installed = Version(metadata.version(name))
        # torch is locked without its local label (+cpu): either build matches
        assert installed.public == version, f"{name} {installed}, locked {version}"
    environment = {"extra": ""}
    unlocked = set()
    for name in [*pins, "aiayn"]:
        for requirement in map(Requirement, metadata.requires(name) or []):
            marker = requirement.marker
            if marker is None or marker.evaluate(environment):
                if canonicalize_name(requirement.name) not in pins:
                    unlocked.add(f"{requirement.name} (for {name})")
    assert unlocked == set(), f"dependencies missing from the lock: {sorted(unlocked)}"


def test_the_lock_holds_the_direct_pins_of_pyproject():
    """make lock writes requirements.txt from pyproject.toml's pins: they agree."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    direct = [Requirement(r) for group in project["optional-dependencies"].values()
              for r in group]
    pins = locked_pins()
    for requirement in direct:
        locked = pins.get(canonicalize_name(requirement.name))
        assert locked in requirement.specifier, f"{requirement}: locked {locked}"
