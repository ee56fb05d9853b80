"""The setup a reader runs: the CPU build of torch through TORCH_INDEX, and the lock.

On a stock Linux machine pip resolves ``torch==2.13.0`` to the CUDA build on PyPI.
``make book TORCH_INDEX=https://download.pytorch.org/whl/cpu`` gives pip PyTorch's CPU
index as an extra index, where the same release is ``2.13.0+cpu``. These tests check
both halves without the network: the Makefile hands TORCH_INDEX to pip, and pip, given
the plain release on one index and the ``+cpu`` build on the extra one, takes the
``+cpu`` build for the pin in requirements.txt.

And what a change retrains: the book's trained models are deleted only when what they
were trained with changed, in the Makefile and in the publishing workflow's cache alike.
"""

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import time
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


# --- what a change retrains ---------------------------------------------------------
def make_would_delete(changed: str, target: str, build: Path) -> list[str]:
    """The `rm` lines of ``make -n target`` if ``changed`` were edited now, with the
    book's build folder at ``build`` and every stamp in it up to date."""
    make = ["make", "-n", "-o", ".venv/.installed", f"BUILD={build}"]
    subprocess.run([*make, target], cwd=ROOT, capture_output=True, check=True)
    future = time.time() + 3600  # later than any file another hand writes meanwhile
    for stamp in (".src-stamp", ".models-stamp"):
        (build / stamp).touch()
        os.utime(build / stamp, (future, future))
    done = subprocess.run(
        [*make, "-W", changed, target], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    rewritten = f"rm -rf {build}/nbval"  # the converted chapters, written every run
    return [
        line
        for line in done.stdout.splitlines()
        if line.startswith("rm ") and line != rewritten
    ]


CACHES = (".jupyter_cache", ".doctrees")  # the chapters' outputs, Sphinx's doctrees


def test_a_tool_or_the_cli_changed_empties_the_execution_cache_only(tmp_path):
    for changed in ("src/aiayn/tools/bench.py", "src/aiayn/cli.py"):
        assert make_would_delete(changed, "models", tmp_path) == []
        (removed,) = make_would_delete(changed, "book", tmp_path)
        assert removed.split()[2:] == [f"{tmp_path}/{name}" for name in CACHES]


def test_the_model_or_training_changed_deletes_the_models(tmp_path):
    for changed in ("src/aiayn/model/masks.py", "src/aiayn/train/loop.py"):
        (removed,) = make_would_delete(changed, "models", tmp_path)
        assert removed.split()[2:] == [f"{tmp_path}/runs", f"{tmp_path}/runs-other"]


def model_sources() -> list[str]:
    """The paths of the Makefile's MODEL_SRC: what the trained models depend on."""
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    (line,) = [line for line in makefile.splitlines() if line.startswith("MODEL_SRC ")]
    return line.rstrip(")").split(",")[-1].split()


def test_the_workflow_keeps_the_models_as_the_makefile_does():
    """The publishing workflow restores trained models from its cache under a key that
    hashes the files the Makefile retrains for: the same ones."""
    workflow = (ROOT / ".github" / "workflows" / "publish.yml").read_text()
    (key,) = re.findall(r"key: book-models-.*hashFiles\((.*)\)", workflow)
    hashed = {path.strip(" '") for path in key.split(",")}
    for path in model_sources():
        is_folder = (ROOT / path).is_dir()
        assert (f"{path}/**/*.py" if is_folder else path) in hashed, path
    assert {"requirements.txt", "pyproject.toml"} <= hashed  # the Makefile's $(SETUP)
    assert "touch _build/.models-stamp" in workflow
