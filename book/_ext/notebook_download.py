"""Sphinx extension: the chapter a reader downloads or launches runs anywhere, against
the library of the commit the book was built from.

With a launch provider configured (``launch_buttons`` in ``html_theme_options``),
sphinx-book-theme copies each chapter from ``_build/jupyter_execute`` to ``_sources/``
and offers it in the page's download menu. That copy lacks the outputs of a chapter
whose outputs came from the execution cache (myst-nb writes the notebook it read, not
the one merged with the cache), so this takes them from the cache, and puts one cell in
front: it installs the ``aiayn`` library, at the book's commit, from the book's
repository when the notebook runs where the library is missing (Binder, Colab, a laptop
without the repository). In the book's own environment the cell does nothing.

The download menu offers the whole book's PDF (``make pdf``), where the site is published
(beside the pages where there is no site), instead of the theme's button that prints the
one page. The first cell also tells ``book_model`` where the site is (``AIAYN_SITE``), to
download a trained model rather than train it. Without a repository on GitHub
(book_site.py), there are no launch buttons and nothing to install from: the cell says
so, and this copies the executed notebook into ``_sources/`` itself.

The launch menu gets the same commit: Binder builds the repository at that commit, and a
Colab button opens the executed copy above where the publishing workflow puts the site,
the branch ``colab_branch`` of the repository (Colab opens notebooks from GitHub only).
"""

import shutil
import subprocess
from functools import cache
from pathlib import Path

import nbformat
from jupyter_cache import get_cache

INSTALL_CELL = """\
# This chapter imports the book's library, aiayn. Where it is missing (on Binder, on
# Colab, on a computer without the book's repository), install it from the repository,
# at the commit this book was built from.
import importlib.util

if importlib.util.find_spec("aiayn") is None:
    %pip install --quiet "aiayn @ git+{repository}@{commit}"
"""
# where book_model downloads a trained model it does not have (aiayn.book.site)
SITE_LINE = """
import os

os.environ.setdefault("AIAYN_SITE", "{site}")  # where the trained models are published
"""
# a book built without a repository on GitHub: no address to install from
NO_REPOSITORY_CELL = """\
# This chapter imports the book's library, aiayn: install it from the book's repository
# (make setup) before you run it.
import importlib.util

if importlib.util.find_spec("aiayn") is None:
    raise ModuleNotFoundError("aiayn: install the book's library (make setup)")
"""
COLAB = "https://colab.research.google.com/github"


@cache
def book_commit(source_dir: str, branch: str) -> str:
    """The commit the book is built from; the branch where there is no git checkout."""
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source_dir,
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else branch


def add_install_cell(app, notebook_path: Path, commit: str) -> None:
    """Give the downloadable copy of a chapter its outputs and the install cell."""
    notebook = nbformat.read(notebook_path, as_version=4)
    if app.config.nb_execution_cache_path:
        execution_cache = get_cache(Path(app.srcdir, app.config.nb_execution_cache_path))
        try:
            _, notebook = execution_cache.merge_match_into_notebook(notebook)
        except KeyError:  # not in the cache: the build executed it, outputs and all
            pass
    repository = app.config.html_theme_options.get("repository_url")
    if repository:
        text = INSTALL_CELL.format(repository=repository, commit=commit)
    else:
        text = NO_REPOSITORY_CELL
    if app.config.book_site:
        text += SITE_LINE.format(site=app.config.book_site)
    cell = nbformat.v4.new_code_cell(text)
    cell.metadata["tags"] = ["install"]
    notebook.cells.insert(0, cell)
    nbformat.write(notebook, notebook_path)


def pin_launch_buttons(app, context, commit: str) -> None:
    """Binder at the book's commit; a Colab button for the published executed notebook."""
    options = app.config.html_theme_options
    branch = options["repository_branch"]
    org, repo = options["repository_url"].rstrip("/").split("/")[-2:]
    for group in context["header_buttons"]:
        if group.get("label") != "launch-buttons":
            continue
        for button in group["buttons"]:
            if button.get("text") == "Binder":
                button["url"] = button["url"].replace(
                    f"/{org}/{repo}/{branch}?", f"/{org}/{repo}/{commit}?")
        group["buttons"].append({
            "type": "link",
            "text": "Colab",
            "tooltip": "Open the executed notebook in Colab",
            "icon": "_static/images/logo_colab.png",
            "url": f"{COLAB}/{org}/{repo}/blob/{app.config.colab_branch}"
                   f"/_sources/{context['ipynb_source']}",
        })


def offer_book_pdf(app, context) -> None:
    """In the download menu, the whole book's PDF in place of printing this page."""
    pdf = {
        "type": "link",
        # where the site publishes it, else beside this build's pages
        "url": f"{app.config.book_site}{app.config.book_pdf}" if app.config.book_site
        else context["pathto"](app.config.book_pdf, 1),
        "text": "Book (PDF)",
        "tooltip": "The whole book as one PDF",
        "icon": "fas fa-file-pdf",
        "label": "download-book-pdf-button",
    }
    for group in context.get("header_buttons", []):
        if group.get("label") == "download-buttons":
            group["buttons"] = [
                pdf if button.get("label") == "download-pdf-button" else button
                for button in group["buttons"]
            ]


def copy_executed_notebook(app, pagename, templatename, context, doctree):
    """Without launch buttons (no repository), sphinx-book-theme copies no executed
    notebook for the download menu: copy it to ``_sources/`` as the theme would."""
    if "launch_buttons" in app.config.html_theme_options:
        return
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.is_file():  # a page without code
        return
    copy = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executed, copy)
    context["ipynb_source"] = f"{pagename}.ipynb"


def publish_notebook(app, pagename, templatename, context, doctree):
    offer_book_pdf(app, context)
    source = context.get("ipynb_source")  # set once the notebook was copied
    if not source:
        return
    options = app.config.html_theme_options
    commit = book_commit(app.srcdir, options["repository_branch"])
    add_install_cell(app, Path(app.outdir) / "_sources" / source, commit)
    if "repository_url" in options:
        pin_launch_buttons(app, context, commit)


def setup(app):
    app.add_config_value("colab_branch", "gh-pages", "html")
    app.add_config_value("book_pdf", "aiayn.pdf", "html")  # what make pdf writes
    # before the theme's download buttons (priority 501) read ipynb_source
    app.connect("html-page-context", copy_executed_notebook, priority=500)
    # after sphinx-book-theme's add_launch_buttons (priority 501) copied the notebook
    app.connect("html-page-context", publish_notebook, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
