"""Print the one-page build of the book (``jupyter-book build --builder singlehtml``) to
a PDF with the browser check's Chromium (``make pdf``). Nothing is downloaded.

Usage: python tests/print_pdf.py SINGLEHTML_DIR OUTPUT.pdf
"""

import logging
import subprocess
import sys
import time
from pathlib import Path

import yaml
from playwright.sync_api import sync_playwright
from pypdf import PdfReader, PdfWriter
from pypdf.generic import NameObject, TextStringObject

sys.path.insert(0, str(Path(__file__).parent / "browser"))
from conftest import CHROMIUM, CHROMIUM_ARGS, ROOT, serve  # noqa: E402

# Page numbers at the foot of every page; Chromium fills in the two spans.
FOOTER = (
    '<div style="font-size: 8px; width: 100%; text-align: center;">'
    '<span class="pageNumber"></span> / <span class="totalPages"></span></div>'
)
# A title page in front of the cover (the root page): the book's title, and where it
# came from.
TITLE_PAGE = """(about) => {
  const page = document.createElement("section");
  page.style.cssText = "padding-top: 30vh; text-align: center;";
  const title = document.createElement("h1");
  title.textContent = document.title.split(" — ").slice(0, 2).join(" — ");
  const note = document.createElement("p");
  note.textContent = about;
  page.append(title, note);
  document.querySelector("main article, article, main").prepend(page);
}"""


# Sphinx puts every chapter inside the root document (the cover), one heading level
# down: the chapters' headings go up a level, so that each chapter is a top-level entry
# of the PDF's outline, as it is in the HTML book's navigation.
PROMOTE_CHAPTERS = """() => {
  const first = document.querySelector('span[id^="document-"]');
  const headings = [...document.querySelectorAll("h2, h3, h4, h5, h6")];
  for (const heading of headings) {
    if (!(first.compareDocumentPosition(heading) & Node.DOCUMENT_POSITION_FOLLOWING)) {
      continue;
    }
    const promoted = document.createElement("h" + (Number(heading.tagName[1]) - 1));
    for (const name of heading.getAttributeNames()) {
      promoted.setAttribute(name, heading.getAttribute(name));
    }
    promoted.append(...heading.childNodes);
    heading.replaceWith(promoted);
  }
}"""
# The theme prints one page of the HTML book under a title of its own and hides the
# page's first h1; the whole book keeps every chapter's title, each on a new page.
WHOLE_BOOK_STYLE = """
#jb-print-docs-body { display: none !important; }
.bd-main .bd-content .bd-article h1:first-of-type { display: block !important; }
.bd-article h1 { break-before: page; }
"""
# The headings as a reader reads them, in the order of the outline Chromium makes from
# them: its own titles lose the space where a heading wraps onto a second line.
HEADINGS = """() => [...document.querySelectorAll("h1, h2, h3, h4, h5, h6")]
  .filter(h => h.getClientRects().length > 0)
  .map(h => [...h.childNodes]
    .filter(n => !n.classList?.contains("headerlink"))
    .map(n => n.textContent).join("").replace(/\\s+/g, " ").trim())"""


def retitle_outline(pdf: Path, titles: list[str]) -> None:
    """Give the PDF's bookmarks, in order, the headings' own text."""
    # Chromium's cross-reference table undercounts its objects; pypdf reads it anyway
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    writer = PdfWriter(clone_from=PdfReader(pdf))
    items = []

    def walk(item):
        while item is not None:
            item = item.get_object()
            items.append(item)
            walk(item.get("/First"))
            item = item.get("/Next")

    walk(writer.root_object["/Outlines"].get_object().get("/First"))
    if len(items) != len(titles):
        raise SystemExit(f"{len(items)} bookmarks for {len(titles)} headings")
    for item, title in zip(items, titles, strict=True):
        item[NameObject("/Title")] = TextStringObject(title)
    writer.write(pdf)
# A contents page after the title page: the parts of _toc.yml and their chapters, each a
# link to where the chapter starts (Sphinx marks it with a span "document-<file>").
CONTENTS = """(parts) => {
  const text = heading => [...heading.childNodes]
    .filter(n => !n.classList?.contains("headerlink")).map(n => n.textContent).join("");
  const entry = start => {
    const link = document.createElement("a");
    link.href = "#" + start.id;
    link.textContent = text(start.querySelector("h1"));
    const item = document.createElement("li");
    item.append(link);
    return item;
  };
  const book = document.querySelector("main article, article, main");
  const contents = document.createElement("nav");
  contents.style.cssText = "break-before: page; line-height: 1.35;";  // one page
  const title = document.createElement("p");
  title.style.cssText = "font-size: 2em; font-weight: bold;";
  title.textContent = "Contents";
  const front = document.createElement("ul");
  front.style.cssText = "list-style: none; margin: 0; padding-left: 0;";
  front.append(entry(book.querySelector("section[id]")));  // the root: the cover
  contents.append(title, front);
  for (const [caption, files] of parts) {
    const part = document.createElement("p");
    part.style.cssText = "font-weight: bold; margin: 0.8em 0 0.2em;";
    part.textContent = caption;
    const list = document.createElement("ul");
    list.style.cssText = "list-style: none; margin: 0; padding-left: 1.5em;";
    for (const file of files) {
      const start = document.getElementById("document-" + file)?.nextElementSibling;
      if (!start?.querySelector("h1")) {
        throw new Error("no chapter " + file + " in the one-page book");
      }
      list.append(entry(start));
    }
    contents.append(part, list);
  }
  book.firstElementChild.after(contents);
}"""


def toc_parts() -> list[tuple[str, list[str]]]:
    """The book's parts and their chapters' files, from _toc.yml."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [(part["caption"], [chapter["file"] for chapter in part["chapters"]])
            for part in toc["parts"]]


def provenance() -> str:
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    built = time.strftime("%Y-%m-%d")
    return f"Printed {built} from commit {commit}" if commit else f"Printed {built}"


def print_book(folder: Path, pdf: Path) -> None:
    # The one page is written where the root document lives (book/cover.html), but
    # its links to styles, scripts and images are relative to the folder's root: a copy
    # there finds them.
    (page_file,) = folder.glob("book/*.html")
    whole_book = folder / "whole-book.html"
    whole_book.write_bytes(page_file.read_bytes())
    server, url = serve(folder)
    started = time.perf_counter()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                                 args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.emulate_media(media="print")
            page.goto(f"{url}/{whole_book.name}", wait_until="load", timeout=600_000)
            # every formula typeset before the page is printed
            page.evaluate("() => window.MathJax?.startup?.promise ?? null")
            page.evaluate(TITLE_PAGE, provenance())
            page.evaluate(PROMOTE_CHAPTERS)
            page.evaluate(CONTENTS, toc_parts())
            page.add_style_tag(content=WHOLE_BOOK_STYLE)
            titles = page.evaluate(HEADINGS)
            pdf.parent.mkdir(parents=True, exist_ok=True)
            page.pdf(path=str(pdf), format="A4", scale=0.85, print_background=True,
                     outline=True, tagged=True, display_header_footer=True,
                     header_template="<div></div>", footer_template=FOOTER,
                     margin={"top": "15mm", "bottom": "15mm", "left": "12mm",
                             "right": "12mm"})
            browser.close()
    finally:
        server.shutdown()
    retitle_outline(pdf, titles)
    print(f"{pdf}: {pdf.stat().st_size / 1e6:.1f} MB in "
          f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    print_book(Path(sys.argv[1]), Path(sys.argv[2]))
