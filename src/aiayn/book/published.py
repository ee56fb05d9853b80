"""The book models as the published site serves them, checked before they are used.

The publishing workflow (``python -m aiayn.book.models --publish FOLDER``) copies each
book model's checkpoint (``RUNS/NAME.pt``) into the site's ``models/`` folder, beside
``manifest.json``: each file's size and SHA-256. A reader who runs a chapter on Colab
or Binder gets the model from there (``fetch_model``) instead of training it: the
download goes to a temporary file beside the model's, renamed into place only once its
size and SHA-256 are the manifest's and it holds the run that was asked for. Only the
standard library speaks HTTP, with short timeouts.
"""

import hashlib
import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm import tqdm

from aiayn.train.checkpoints import saved_config
from aiayn.train.config import TrainConfig

MODELS = "models/"  # the folder of the site that holds them
MANIFEST = "manifest.json"
TIMEOUT = 10  # seconds to connect, and between two reads
DEADLINE = 300  # seconds for a whole download, however slowly the bytes arrive
CHUNK = 1 << 16


class NotDownloaded(Exception):
    """Why a model was not downloaded, in a few words a reader can act on."""


def file_digest(path: Path) -> str:
    """The SHA-256 of a file, in hex."""
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def publish_models(runs: Path, names: list[str], folder: Path) -> dict:
    """Copy ``runs/NAME.pt`` of each name into ``folder`` and write its manifest there:
    ``{"NAME.pt": {"sha256": ..., "size": ...}}``. Returns the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for name in names:
        published = folder / f"{name}.pt"
        shutil.copyfile(runs / f"{name}.pt", published)
        manifest[published.name] = {
            "sha256": file_digest(published),
            "size": published.stat().st_size,
        }
    text = json.dumps(manifest, indent=1, sort_keys=True)
    (folder / MANIFEST).write_text(text + "\n")
    return manifest


def opened(url: str):
    """The response to a GET of ``url``; NotDownloaded saying why not."""
    try:
        return urllib.request.urlopen(url, timeout=TIMEOUT)
    except urllib.error.HTTPError as error:
        reason = "not published" if error.code == 404 else "the site failed"
        raise NotDownloaded(f"{reason} (HTTP {error.code} for {url})") from None
    except (urllib.error.URLError, OSError) as error:  # refused, no DNS, timed out
        reason = getattr(error, "reason", error)
        raise NotDownloaded(f"no network ({reason}, for {url})") from None


def expected_file(site: str, filename: str) -> dict:
    """The manifest's entry for ``filename``: its size and SHA-256."""
    url = f"{site}{MODELS}{MANIFEST}"
    with opened(url) as response:
        try:
            manifest = json.loads(response.read(1 << 20))
        except (ValueError, OSError):
            raise NotDownloaded(f"no readable manifest at {url}") from None
    if filename not in manifest:
        raise NotDownloaded(f"not published ({filename} is not in {url})")
    return manifest[filename]


def download(url: str, file, size: int, progress: bool) -> str:
    """Write at most ``size + 1`` bytes from ``url`` into ``file``; their SHA-256."""
    digest, written = hashlib.sha256(), 0
    deadline = time.monotonic() + DEADLINE
    bar = tqdm(total=size, unit="B", unit_scale=True, disable=not progress,
               desc=url.rsplit("/", 1)[-1])
    with opened(url) as response, bar:
        while written <= size:
            try:
                chunk = response.read(CHUNK)
            except OSError as error:  # a read timed out, the connection dropped
                raise NotDownloaded(f"no network ({error}, for {url})") from None
            if not chunk:
                break
            digest.update(chunk)
            file.write(chunk)
            written += len(chunk)
            bar.update(len(chunk))
            if time.monotonic() > deadline:
                raise NotDownloaded(f"too slow (over {DEADLINE} s, for {url})")
    if written != size:
        raise NotDownloaded(f"checksum mismatch ({written} bytes, not {size}: {url})")
    return digest.hexdigest()


def fetch_model(
    site: str, path: Path, config: TrainConfig,
    same_run: Callable[[TrainConfig, TrainConfig], bool], progress: bool = True,
) -> None:
    """Download the published ``path.name`` from ``site`` to ``path``, checked: size and
    SHA-256 as the manifest says, and the run ``config`` (``same_run``). NotDownloaded
    says why not; nothing is left behind but a whole, checked file at ``path``."""
    expected = expected_file(site, path.name)
    url = f"{site}{MODELS}{path.name}"
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".download"
    )
    try:
        with os.fdopen(descriptor, "wb") as file:
            digest = download(url, file, int(expected["size"]), progress)
        if digest != expected["sha256"]:
            raise NotDownloaded(f"checksum mismatch (SHA-256 of {url})")
        published = published_config(Path(temporary))
        if not same_run(published, config):
            raise NotDownloaded("the published run is another configuration")
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)


def published_config(path: Path) -> TrainConfig:
    """The configuration a downloaded checkpoint holds (NotDownloaded if none)."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        return saved_config(saved["config"])
    except Exception as error:  # any file that is not a checkpoint of this library
        raise NotDownloaded(f"the published file does not load ({error})") from None
