"""What the publishing workflow publishes beside the pages, opened as a reader would.

- ``make pdf``: the whole book as one PDF; its bookmarks are the chapters' titles,
  numbered as the HTML book's navigation numbers them, in the same order; a contents
  page lists and links them; the cover (the root page) links to the PDF where the
  workflow publishes it.
- The launch links: a chapter's Binder link opens its Markdown source in JupyterLab, and
  JupyterLab, started with the repository's setting (.jupyter/labconfig, which Binder
  reads from the home folder it copies the repository into), shows it as a notebook,
  not as text; the executed notebook its Colab link points at opens as a notebook with
  its outputs.
"""

import json
import os
import socket
import subprocess
import sys
import time
import unicodedata
import urllib.request

import pytest
from conftest import HTML, ROOT, book_addresses
from pypdf import PdfReader

PDF = HTML / "aiayn.pdf"
# chapters opened in JupyterLab: the first page (the cover, the root), one that loads a
# trained model, one of the last
LAUNCHED = ["book/cover.html", "book/looking-inside.html", "book/parsing.html"]


def on_page(browser, url: str, selector: str, script: str):
    """What script makes of the elements that match selector on the page at url."""
    page = browser.new_page()
    try:
        page.goto(url)
        return page.eval_on_selector_all(selector, script)
    finally:
        page.close()


def test_the_pdf_is_the_whole_book_numbered_like_the_html(browser, book_url):
    assert PDF.is_file(), f"no {PDF}: run `make pdf`"
    reader = PdfReader(PDF)
    bookmarks = [item for item in reader.outline if not isinstance(item, list)]
    titles = [item.title for item in bookmarks]
    first_pages = [reader.get_destination_page_number(item) for item in bookmarks]
    assert first_pages == sorted(first_pages), "the bookmarks are out of order"

    cover = f"{book_url}/book/cover.html"
    chapters = on_page(browser, cover, "nav.bd-docs-nav a",
                       "links => links.map(a => a.textContent.trim())")
    pdf_links = on_page(browser, cover, "article.bd-article a[href$='.pdf']",
                        "links => links.map(a => a.href)")
    assert len(chapters) > 30
    missing = [title for title in chapters if title not in titles]
    assert missing == [], f"chapters the PDF's bookmarks lack: {missing}"
    in_pdf_order = sorted(chapters, key=titles.index)
    assert in_pdf_order == chapters, "the PDF orders the chapters differently"
    # every chapter has pages of its own: the whole book, hundreds
    assert len(reader.pages) > 5 * len(chapters)
    # after the title page, a contents page: every chapter, a link to where it starts
    contents = reader.pages[1]
    # NFKC: the PDF's text has ligatures ("ﬁ" for "fi")
    text = unicodedata.normalize("NFKC", " ".join(contents.extract_text().split()))
    assert text.startswith("Contents"), f"page 2 is not the contents: {text[:80]}"
    unlisted = [title for title in chapters if title not in text]
    assert unlisted == [], f"chapters the contents page lacks: {unlisted}"
    links = [annotation.get_object() for annotation in contents.get("/Annots", [])]
    internal = [link for link in links if "/Dest" in link]
    assert len(internal) >= len(chapters), "the contents page does not link chapters"

    # where the workflow publishes it; a build that knows no site links none
    site = book_addresses()["site"]
    expected = [f"{site}{PDF.name}"] if site else []
    assert pdf_links == expected, f"the cover links {pdf_links}"


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """JupyterLab on the repository, with its shipped settings and no user's own."""
    home = tmp_path_factory.mktemp("jupyter")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "JUPYTER_CONFIG_PATH": str(ROOT / ".jupyter"),
           "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "JUPYTER_DATA_DIR": str(home / "data")}
    log = (home / "lab.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=",
         "--ServerApp.password=", "--allow-root", f"--ServerApp.root_dir={ROOT}"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status", timeout=5)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                log.close()
                started = (home / "lab.log").read_text()
                pytest.fail(f"JupyterLab did not start:\n{started}")
            time.sleep(0.5)
    yield url
    server.terminate()  # it shuts its kernels down first, slowly on a busy machine
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    log.close()


def opens_as_notebook(browser, lab_url: str, path: str) -> dict:
    """Open path in JupyterLab: it must show a notebook, not a text editor. Returns the
    notebook as the server reads it (JupyterLab renders only the cells in view, so the
    cells and outputs are counted there)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(f"{lab_url}/lab/tree/{path}")
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell, .jp-FileEditor",
                               timeout=90_000)
        assert page.locator(".jp-FileEditor").count() == 0, f"{path} opened as text"
        assert page.locator(".jp-NotebookPanel .jp-Cell").count() > 0
    finally:
        page.close()
    with urllib.request.urlopen(f"{lab_url}/api/contents/{path}?content=1") as answer:
        model = json.load(answer)
    assert model["type"] == "notebook", f"{path}: the server reads a {model['type']}"
    return model["content"]


def code_cells(notebook: dict) -> list[dict]:
    return [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]


@pytest.mark.parametrize("chapter", LAUNCHED)
def test_launch_links_open_notebooks(browser, book_url, jupyterlab, chapter):
    launches = on_page(browser, f"{book_url}/{chapter}", ".dropdown-launch-buttons a",
                       "links => links.map(a => a.href)")
    if book_addresses()["repository"] is None:  # no launch links: the same files
        assert launches == [], f"{chapter}: launch links without a repository"
        source = chapter.removesuffix(".html") + ".md"
        published = f"_sources/{chapter.removesuffix('.html')}.ipynb"
    else:
        (binder,) = [link for link in launches if "mybinder.org" in link]
        (colab,) = [link for link in launches if "colab.research.google.com" in link]
        # book/<chapter>.md, and _sources/book/<chapter>.ipynb on the published branch
        source = binder.split("?urlpath=lab/tree/")[1]
        published = colab.split("/blob/")[1].split("/", 1)[1]

    chapter_source = opens_as_notebook(browser, jupyterlab, source)
    assert code_cells(chapter_source), f"{source}: no code cell"

    executed = opens_as_notebook(browser, jupyterlab, f"_build/html/{published}")
    outputs = [cell["outputs"] for cell in code_cells(executed)]
    assert any(outputs), f"{published}: the executed notebook has no output"
