"""Where the book is published: its repository on GitHub, and the site that GitHub
Pages serves from it (the pages, the PDF, the trained models).

The book names no address of its own: a fork publishes its own book. The repository
is, the first that is set:

- ``$AIAYN_REPOSITORY`` (``make book REPOSITORY=owner/name`` sets it);
- ``$GITHUB_REPOSITORY``, which GitHub Actions sets in the publishing workflow;
- the git remote ``origin`` of the checkout the library runs from (a clone, Binder);
- the GitHub repository pip installed the library from (a chapter's first cell on
  Colab installs it from there: ``direct_url.json``, PEP 610).

The site is ``$AIAYN_SITE`` if set (an empty value: none), else GitHub Pages' address
of the repository, ``https://owner.github.io/name/``. Without either, the book leaves
out the links to a site, and ``book_model`` trains a missing model (no download).
"""

import json
import os
import re
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

# owner/name at the end of an https or ssh address of a GitHub repository
GITHUB_URL = re.compile(
    r"github\.com[:/](?P<owner>[\w.-]+)/(?P<name>[\w.-]+?)(?:\.git)?/?$"
)
OWNER_NAME = re.compile(r"[\w.-]+/[\w.-]+")


def github_repository(url: str) -> str | None:
    """``owner/name`` of a GitHub repository's address (https or ssh), else None."""
    found = GITHUB_URL.search(url.strip())
    return f"{found['owner']}/{found['name']}" if found else None


def repository_url(repository: str) -> str:
    """The repository's page on GitHub."""
    return f"https://github.com/{repository}"


def pages_site(repository: str) -> str:
    """Where GitHub Pages serves the repository's site: ``https://owner.github.io/name/``,
    or ``https://owner.github.io/`` for the repository named ``owner.github.io``."""
    owner, name = repository.split("/")
    host = f"{owner.lower()}.github.io"
    return f"https://{host}/" if name.lower() == host else f"https://{host}/{name}/"


def source_checkout() -> Path | None:
    """The repository the library runs from (installed from its ``src/`` in editable
    mode), or None (installed from a wheel or from git)."""
    package = Path(__file__).resolve().parents[1]  # src/aiayn, or site-packages/aiayn
    repository = package.parents[1]
    if package.parent.name == "src" and (repository / "pyproject.toml").is_file():
        return repository
    return None


def origin_repository(checkout: Path | None) -> str | None:
    """The GitHub repository of the checkout's git remote ``origin``, if any."""
    if checkout is None:
        return None
    try:
        done = subprocess.run(
            ["git", "remote", "get-url", "origin"],
            cwd=checkout, capture_output=True, text=True, timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):  # no git
        return None
    return github_repository(done.stdout) if done.returncode == 0 else None


def installed_from_repository() -> str | None:
    """The GitHub repository pip installed the library from (PEP 610), if any."""
    try:
        direct_url = metadata.distribution("aiayn").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not direct_url:
        return None
    return github_repository(json.loads(direct_url).get("url", ""))


def book_repository(
    environ: Mapping[str, str] = os.environ, checkout: Path | None = None
) -> str | None:
    """``owner/name`` of the book's repository on GitHub (the module's docstring says
    where it comes from), or None. ``checkout``: by default ``source_checkout()``."""
    for variable in ("AIAYN_REPOSITORY", "GITHUB_REPOSITORY"):
        named = environ.get(variable, "").strip()
        if named:
            if not OWNER_NAME.fullmatch(named):
                raise ValueError(f"{variable}={named!r} is not owner/name")
            return named
    checkout = source_checkout() if checkout is None else checkout
    return origin_repository(checkout) or installed_from_repository()


def book_site(
    environ: Mapping[str, str] = os.environ, checkout: Path | None = None
) -> str | None:
    """The address of the published book, ending in ``/``, or None: ``$AIAYN_SITE`` if
    set (empty: none), else GitHub Pages' address of ``book_repository``."""
    if "AIAYN_SITE" in environ:
        site = environ["AIAYN_SITE"].strip()
        return site.rstrip("/") + "/" if site else None
    repository = book_repository(environ, checkout)
    return pages_site(repository) if repository else None
