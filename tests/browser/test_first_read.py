"""The first read: the cover's shortest path reads in about an hour.

The cover lists the chapters of the first read. Opened at 1280×900 as a reader sees
them, the cover and those chapters together show at most 8,000 words (prose, shown code,
outputs and captions; folded cells and closed dropdowns do not show) on at most 40
screens. Every chapter of the path ends with a recap and links terms to the glossary.
The measurements are written to _build/first-read.json.
"""

import json

from conftest import READER_VIEW_JS, ROOT
from test_book_html import VIEWPORT, open_page

MAX_WORDS = 8_000
MAX_SCREENS = 40
MIN_GLOSSARY_TERMS = 20

PATH_JS = """() => {
  const intro = [...document.querySelectorAll("article strong")]
      .find(s => s.textContent.startsWith("The first read"));
  const list = intro?.closest("p")?.nextElementSibling;
  return list?.tagName === "OL" ? [...list.querySelectorAll("a")].map(a => a.href) : [];
}"""


def reader_view(browser, url: str, reader_views: dict) -> dict:
    """What a reader sees of the page at url: as measured when a test opened it, or
    measured now."""
    if url not in reader_views:
        page, _ = open_page(browser, url)
        try:
            reader_views[url] = page.evaluate(READER_VIEW_JS)
        finally:
            page.close()
    return reader_views[url]


def test_the_first_read_fits_an_hour(browser, book_url, reader_views):
    page, _ = open_page(browser, f"{book_url}/book/cover.html")
    try:
        path = page.evaluate(PATH_JS)
        pages = {"book/cover.html": page.evaluate(READER_VIEW_JS)}
    finally:
        page.close()
    assert len(path) >= 8, f"the cover lists no first read: {path}"
    for url in path:
        name = url.removeprefix(f"{book_url}/")
        pages[name] = reader_view(browser, url, reader_views)

    for measured in pages.values():
        measured["screens"] = round(measured["height"] / VIEWPORT["height"], 1)
    words = sum(m["words"] for m in pages.values())
    screens = sum(m["screens"] for m in pages.values())
    report = {"words": words, "screens": round(screens, 1), "pages": pages}
    (ROOT / "_build" / "first-read.json").write_text(json.dumps(report, indent=1))

    assert words <= MAX_WORDS, f"the first read shows {words} words: {report}"
    assert screens <= MAX_SCREENS, f"the first read is {screens:.1f} screens: {report}"
    chapters = {name: m for name, m in pages.items() if name != "book/cover.html"}
    no_recap = [name for name, m in chapters.items() if not m["recap"]]
    assert no_recap == [], f"chapters of the first read without a recap: {no_recap}"
    unlinked = [name for name, m in chapters.items() if m["glossary_terms"] < 2]
    assert unlinked == [], f"chapters that link (almost) no glossary term: {unlinked}"


def test_the_glossary_defines_the_terms(browser, book_url):
    page, _ = open_page(browser, f"{book_url}/book/glossary.html")
    try:
        terms = page.evaluate(
            "() => document.querySelectorAll('dl.glossary > dt').length"
        )
    finally:
        page.close()
    assert terms >= MIN_GLOSSARY_TERMS
