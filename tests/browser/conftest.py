"""Fixtures for the browser check: serve the built book locally, open it in Chromium.

The book must have been built first (``make book`` or the strict build in ``make
test``): a missing build is a failure, not a skip, so the check can never pass by
checking nothing.
"""

import functools
import http.server
import json
import pathlib
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
# Flags for a root user on a machine without a display or outside network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def book_addresses() -> dict:
    """{"repository": "owner/name" or None, "site": its URL or None}: what the build
    linked to (book/_ext/book_site.py wrote them into site.json)."""
    return json.loads((HTML / "site.json").read_text())


@pytest.fixture(scope="session")
def book_url():
    if not (HTML / "index.html").is_file():
        pytest.fail(f"no built book at {HTML}: run `make book` first")
    server, url = serve(HTML)
    yield url
    server.shutdown()


def serve(folder: pathlib.Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve folder on a free local port, in a thread: (server, its URL)."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


# What a reader sees of a page: the article's rendered words (innerText leaves out
# what is folded), its height, whether it has a recap, and its links into the glossary
# (test_first_read.py); null for a page without an article. Measured on a page just
# opened, before any check opens what it folds.
READER_VIEW_JS = """() => {
  const article = document.querySelector("article.bd-article");
  if (!article) return null;  // the search page
  const words = article.innerText.split(/\\s+/).filter(Boolean).length;
  const recap = [...article.querySelectorAll("h2")]
      .some(h => h.textContent.startsWith("Recap"));
  const terms = new Set([...article.querySelectorAll("a[href*='glossary.html#term-']")]
      .map(a => a.href.split("#")[1]));
  return {words, height: document.documentElement.scrollHeight, recap,
          glossary_terms: terms.size};
}"""


@pytest.fixture(scope="session")
def reader_views() -> dict[str, dict]:
    """A page's URL -> READER_VIEW_JS's answer on it, kept by the test that opened it
    (test_page_renders opens every page): the first read's chapters are measured
    without being opened again."""
    return {}


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not pathlib.Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} not found: install it with `apt-get install chromium`")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS
        )
        yield OneProfile(chromium)
        chromium.close()


class OneProfile:
    """Chromium with one profile (browser context) for every page the check opens, as a
    reader's tabs share one: a page loads the scripts, styles and fonts the pages before
    it cached and compiled (about a fifth of the check's time) instead of fetching and
    compiling them anew. A test that needs other settings asks for a context of its own
    (new_context)."""

    def __init__(self, chromium):
        self.chromium = chromium
        self.context = chromium.new_context()

    def new_page(self, viewport=None):
        page = self.context.new_page()
        if viewport:
            page.set_viewport_size(viewport)
        return page

    def new_context(self, **options):
        return self.chromium.new_context(**options)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    # the parameter name `format` is fixed by the base class
    def log_message(self, format, *args):  # noqa: A002
        pass
