"""Sphinx extension: the explorer (book/_static/explorer.js), served by the site itself.

A page places an explorer of a trained book model with a raw HTML block::

    :::{raw} html
    <div class="aiayn-explorer" data-model="reverse" data-source="7 2 9 4 0">
    <p class="aiayn-explorer-note">Served over HTTP, this figure becomes a live
    explorer.</p>
    </div>
    :::

Such a page gets explorer.js and explorer.css (no other page does). After the build,
``_static/explorer/`` holds what they load, from this site and nowhere else:

- ``ort/``: ONNX Runtime Web's WebAssembly build, the three files the page loads,
  from ``node_modules/onnxruntime-web/dist`` (``npm ci`` installs the version that
  package-lock.json pins);
- ``NAME/``: each exported model (encoder.onnx, decoder.onnx, model.json, as
  ``aiayn.book.explorer`` writes them), from ``$AIAYN_EXPLORER`` or
  ``_build/explorer/``.

A page that asks for a model that is not there, or a build without the runtime, is a
warning (an error in the strict build).
"""

import os
import re
import shutil
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

RUNTIME = Path("node_modules/onnxruntime-web/dist")
# the runtime's script, and the two files it loads: its WebAssembly and their glue
RUNTIME_FILES = (
    "ort.wasm.min.js",
    "ort-wasm-simd-threaded.mjs",
    "ort-wasm-simd-threaded.wasm",
)
MODELS = Path("_build/explorer")
EXPLORER_MODEL = re.compile(r'class="aiayn-explorer"[^>]*\bdata-model="([^"]+)"')


def models_folder(app) -> Path:
    """Where the exported models are: $AIAYN_EXPLORER, or _build/explorer/."""
    return Path(app.srcdir, os.environ.get("AIAYN_EXPLORER") or MODELS)


def _add_explorer(app, pagename, templatename, context, doctree):
    """Give a page with an explorer its script and style; warn of a missing model."""
    names = EXPLORER_MODEL.findall(context.get("body", ""))
    if not names:
        return
    app.add_js_file("explorer.js")
    app.add_css_file("explorer.css")
    if not (Path(app.srcdir) / RUNTIME).is_dir():
        logger.warning(
            f"explorer: no {RUNTIME}: run `npm ci`", location=pagename
        )
    for name in names:
        if not (models_folder(app) / name / "model.json").is_file():
            logger.warning(
                f"explorer: no exported model {name!r} in {models_folder(app)}",
                location=pagename,
            )


def _copy_assets(app, exception):
    """Copy the runtime and the exported models into _static/explorer/."""
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / "explorer"
    runtime = Path(app.srcdir) / RUNTIME
    if runtime.is_dir():
        (target / "ort").mkdir(parents=True, exist_ok=True)
        for name in RUNTIME_FILES:
            shutil.copy2(runtime / name, target / "ort" / name)
    models = models_folder(app)
    if models.is_dir():
        for folder in sorted(p for p in models.iterdir() if p.is_dir()):
            shutil.copytree(folder, target / folder.name, dirs_exist_ok=True)


def setup(app):
    app.connect("html-page-context", _add_explorer)
    app.connect("build-finished", _copy_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
