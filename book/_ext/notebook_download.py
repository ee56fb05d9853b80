"""Sphinx extension: the chapter a reader downloads as .ipynb runs anywhere.

With a launch provider configured (``launch_buttons`` in ``html_theme_options``),
sphinx-book-theme copies each chapter from ``_build/jupyter_execute`` to ``_sources/``
and offers it in the page's download menu. That copy lacks the outputs of a chapter
whose outputs came from the execution cache (myst-nb writes the notebook it read, not
the one merged with the cache), so this takes them from the cache, and puts one cell in
front: it installs the ``aiayn`` library from the book's repository when the notebook
runs where the library is missing (Binder, Colab, a laptop without the repository). In
the book's own environment the cell does nothing.
"""

from pathlib import Path

import nbformat
from jupyter_cache import get_cache

INSTALL_CELL = """\
# This chapter imports the book's library, aiayn. Where it is missing (on Binder, on
# Colab, on a computer without the book's repository), install it from the repository.
import importlib.util

if importlib.util.find_spec("aiayn") is None:
    %pip install --quiet "aiayn @ git+{repository}"
"""


def add_install_cell(app, pagename, templatename, context, doctree):
    """Give the downloadable copy of a chapter its outputs and the install cell."""
    source = context.get("ipynb_source")  # set by the theme once it copied the notebook
    if not source:
        return
    path = Path(app.outdir) / "_sources" / source
    notebook = nbformat.read(path, as_version=4)
    if app.config.nb_execution_cache_path:
        cache = get_cache(Path(app.srcdir, app.config.nb_execution_cache_path))
        try:
            _, notebook = cache.merge_match_into_notebook(notebook)
        except KeyError:  # not in the cache: the build executed it, outputs and all
            pass
    repository = app.config.html_theme_options["repository_url"]
    cell = nbformat.v4.new_code_cell(INSTALL_CELL.format(repository=repository))
    cell.metadata["tags"] = ["install"]
    notebook.cells.insert(0, cell)
    nbformat.write(notebook, path)


def setup(app):
    # after sphinx-book-theme's add_launch_buttons (priority 501) copied the notebook
    app.connect("html-page-context", add_install_cell, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
