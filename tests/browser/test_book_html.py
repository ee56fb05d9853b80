"""Open every page of the built book in headless Chromium and check what a reader would see.

For each page: it loads with no console error; every image has loaded; MathJax typeset
every formula and no raw TeX delimiter is left in the text; the navigation lists every
chapter. Screenshots of two pages are saved under _build/screenshots/.
"""

import pathlib

import pytest
import yaml
from conftest import ROOT, SCREENSHOTS

# The one console message the book theme is known to log, harmlessly, on
# a fresh profile.
ALLOWED_CONSOLE_ERRORS = {"Got invalid theme mode: . Resetting to auto."}
SCREENSHOT_PAGES = {"book/preface.html", "book/paper-at-a-glance.html"}


def chapter_pages() -> list[str]:
    """Every page listed in _toc.yml, as paths relative to the HTML root."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part["chapters"]]
    return [f"{pathlib.PurePosixPath(f).with_suffix('')}.html" for f in files]


PAGES = chapter_pages() + ["genindex.html", "search.html"]


def open_page(browser, url):
    """Load a page, wait for its images and for MathJax; return (page, console errors)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on(
        "console", lambda msg: errors.append(msg.text) if msg.type == "error" else None
    )
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    page.goto(url, wait_until="load")
    page.evaluate(
        """() => Promise.all([...document.images].map(img => {
               img.loading = "eager";
               return img.complete ? null : new Promise(done => {
                   img.onload = img.onerror = done; });
           }))"""
    )
    page.evaluate("() => window.MathJax?.startup?.promise ?? null")
    page.wait_for_load_state("networkidle")
    return page, [e for e in errors if e not in ALLOWED_CONSOLE_ERRORS]


@pytest.mark.parametrize("path", PAGES)
def test_page_renders(browser, book_url, path):
    page, console_errors = open_page(browser, f"{book_url}/{path}")
    try:
        assert page.title(), f"{path}: no <title>"
        assert console_errors == [], f"{path}: console errors {console_errors}"

        broken_images = page.evaluate(
            "() => [...document.images].filter(i => !(i.naturalWidth > 0)).map(i => "
            "i.src)"
        )
        assert broken_images == [], f"{path}: images that did not load: {broken_images}"

        math = page.evaluate(
            """() => {
                 const formulas = [...document.querySelectorAll(".math")];
                 const untypeset = formulas.filter(f => !f.querySelector("mjx-container"));
                 const prose = document.querySelector("main").cloneNode(true);
                 prose.querySelectorAll("pre, code, script, style, mjx-container")
                      .forEach(node => node.remove());
                 const raw = ["$$", "\\\\(", "\\\\["].filter(d => prose.textContent.includes(d));
                 return {count: formulas.length,
                         untypeset: untypeset.map(f => f.textContent.slice(0, 60)),
                         raw};
               }"""
        )
        assert math["untypeset"] == [], f"{path}: formulas MathJax did not typeset"
        assert math["raw"] == [], (
            f"{path}: raw TeX delimiters left in the text: {math['raw']}"
        )

        nav_links = page.evaluate(
            "() => [...document.querySelectorAll('nav.bd-docs-nav a')]"
            ".map(a => a.href.split('#')[0])"
        )
        missing = [p for p in chapter_pages() if f"{book_url}/{p}" not in nav_links]
        assert missing == [], f"{path}: navigation does not list {missing}"

        if path in SCREENSHOT_PAGES:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            name = pathlib.PurePosixPath(path).stem
            page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
    finally:
        page.close()



def test_math_check_is_not_vacuous(browser, book_url):
    """At least one page has formulas, so the MathJax assertions above really ran on some."""
    page, _ = open_page(browser, f"{book_url}/book/preface.html")
    try:
        typeset = page.evaluate(
            "() => document.querySelectorAll('.math mjx-container').length"
        )
        assert typeset > 0
    finally:
        page.close()


def test_book_has_repository_and_download_buttons(browser, book_url):
    page, _ = open_page(browser, f"{book_url}/book/preface.html")
    try:
        assert page.locator(".btn-source-repository-button").count() >= 1
        assert page.locator(".dropdown-download-buttons").count() >= 1
    finally:
        page.close()
