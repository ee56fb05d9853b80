r"""Open every page of the built book in headless Chromium and check what a reader sees.

For each page: it loads with no console error; every image has loaded; MathJax typeset
every formula and no raw TeX delimiter is left in the text; the navigation lists every
chapter; a chapter with code offers itself for download as .md and as an executed .ipynb
that installs the library, at the book's commit, where it is missing, and launches on
Binder (at that commit) and on Colab (that notebook, published); and `page_defects`
finds none of the rendering defects a reader trips over:

- ``raw-table``: a Markdown table shown as raw pipes instead of a table;
- ``admonition-title``: an admonition whose body starts with what should be its title
  (``:::{note} Not in the paper`` renders "Note", then "Not in the paper The paper…");
- ``code-overflow``: a code or output block whose lines are wider than its box, which
  cuts them off (measured at the 1280-pixel viewport, hidden cells opened);
- ``math-overflow``: a displayed formula wider than the text column, whose right end
  a reader does not see (it scrolls, without a visible cue);
- ``image-alt``: an image whose alt text is missing, empty, or a file name or path;
- ``figure-caption``: an image in a cell output without a numbered caption;
- ``cell-stderr``, ``cell-warning``, ``cell-traceback``: warnings, errors or anything
  else written to stderr in a cell's output;
- ``progress-bar``: tqdm progress-bar frames in a cell's output;
- ``raw-tex``: TeX a reader sees as text, outside any formula: a delimiter (``$$``,
  ``\(``, ``\[``), a command (``\frac``) or a braced index (``_{``, ``^{``);
- ``raw-html``: a token such as ``<s>`` written in prose without backticks, which the
  browser reads as an HTML tag (``<s>`` strikes out the rest of the page);
- ``math-prose``: prose typeset as a formula, as when a broken delimiter swallows a
  sentence (four or more words in a row in a formula's TeX, outside ``\text{}``).

`test_defect_check_catches_each_class` seeds a synthetic page with one defect of each
class and asserts that `page_defects` reports exactly that class, and nothing on a
clean page: the check cannot pass by checking nothing. Screenshots of two pages are
saved under _build/screenshots/.
"""

import json
import pathlib
import subprocess

import pytest
import yaml
from conftest import HTML, READER_VIEW_JS, ROOT, SCREENSHOTS, book_addresses
from test_figure_legibility import figure_sizes, shrunk_figures

# Where a chapter launches: Binder builds the repository at the commit the book was
# built from; Colab opens the executed notebook from the branch the workflow publishes
# to (both need the book's repository on GitHub: a build without one has no launch).
BINDER = "https://mybinder.org/v2/gh/{repository}/"
PAGES_BRANCH = "gh-pages"
COLAB = "https://colab.research.google.com/github/{repository}/blob/"
BOOK_COMMIT = subprocess.run(
    ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
).stdout.strip()
# The one console message the theme is known to log, harmlessly, on a fresh profile.
ALLOWED_CONSOLE_ERRORS = {"Got invalid theme mode: . Resetting to auto."}
SCREENSHOT_PAGES = {"book/cover.html", "book/paper-at-a-glance.html"}
VIEWPORT = {"width": 1280, "height": 900}


def chapter_pages() -> list[str]:
    """Every page listed in _toc.yml, as paths relative to the HTML root."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part["chapters"]]
    return [f"{pathlib.PurePosixPath(f).with_suffix('')}.html" for f in files]


def is_notebook_chapter(path: str) -> bool:
    """Whether the page comes from a chapter with code (a jupytext notebook)."""
    source = (ROOT / path).with_suffix(".md")
    return source.is_file() and "\nkernelspec:" in source.read_text(encoding="utf-8")


PAGES = chapter_pages() + ["genindex.html", "search.html"]


SETTLED_EXPLORERS_JS = """() => [...document.querySelectorAll(".aiayn-explorer")]
    .every(e => ["ready", "unavailable", "error"].includes(e.dataset.state))"""


def open_page(browser, url):
    """Open a page; wait for its images, MathJax, fonts and explorers: (page, console
    errors)."""
    page = browser.new_page(viewport=VIEWPORT)
    errors = []
    page.on(
        "console",
        lambda msg: errors.append(msg.text) if msg.type == "error" else None,
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
    # the fonts MathJax asked for while typesetting: the last requests a page makes
    # (when this was written, no page of the book started one later), so no idle
    # network to wait for
    page.evaluate("() => document.fonts.ready.then(() => null)")
    # an explorer has answered its first source, or says why it cannot: the page as a
    # reader sees it a moment later (test_explorer.py checks what it answered)
    page.wait_for_function(SETTLED_EXPLORERS_JS)
    return page, [e for e in errors if e not in ALLOWED_CONSOLE_ERRORS]


# Titles the book gives its admonitions; a generic title ("Note") followed by one of
# them in the body is the `:::{note} Not in the paper` mistake.
BOOK_ADMONITION_TITLES = ["Not in the paper"]

# Returns a list of "class: detail" strings, one per defect found on the current page.
DEFECTS_JS = r"""(bookTitles) => {
  const defects = [];
  const add = (kind, detail) => defects.push(`${kind}: ${detail.trim().slice(0, 120)}`);
  const main = document.querySelector("main") ?? document.body;

  // Text a reader sees as prose: no code, no formulas, no scripts.
  const prose = main.cloneNode(true);
  prose.querySelectorAll("pre, code, script, style, mjx-container, .math")
       .forEach(node => node.remove());
  const proseText = prose.textContent;
  const separator = /\|\s*:?-{3,}:?\s*\|/;
  const row = /(^|\s)\|(\s[^|\n]+\s\|){2,}/;
  for (const pattern of [separator, row]) {
    const found = proseText.match(pattern);
    if (found) {
      const at = found.index;
      add("raw-table", proseText.slice(Math.max(0, at - 20), at + 80));
      break;
    }
  }

  // TeX outside formulas: delimiters, commands, braced sub- and superscripts.
  const tex = proseText.match(/.{0,30}(\$\$|\\[(\[)\]]|\\[A-Za-z]{2,}|[_^]\{).{0,30}/);
  if (tex) add("raw-tex", tex[0]);

  // Tokens written in prose without backticks ("<s> 5 1 4"): the browser reads them
  // as HTML, <s> striking out the rest of the page, <pad> or </s> vanishing. The book
  // writes no strike-through and no element HTML does not know.
  for (const element of main.querySelectorAll("*")) {
    const unknown = element instanceof HTMLUnknownElement;
    if (unknown || ["S", "STRIKE", "DEL"].includes(element.tagName)) {
      const around = element.parentElement?.textContent ?? element.textContent;
      add("raw-html", `<${element.tagName.toLowerCase()}> in "${around.trim()}"`);
      break;
    }
  }

  // Prose inside formulas: the TeX MathJax typeset (or was to typeset), with text
  // commands removed, holds no run of four words.
  const sources = [];
  for (const item of window.MathJax?.startup?.document?.math ?? []) {
    sources.push(item.math);
  }
  for (const formula of main.querySelectorAll(".math")) {
    if (!formula.querySelector("mjx-container")) sources.push(formula.textContent);
  }
  const textCommand =
      /\\(text|mathrm|textrm|mbox|operatorname|textit|mathit)\s*\{[^{}]*\}/g;
  const words = /(^|[^\\A-Za-z])(([A-Za-z]{3,}\s+){3,}[A-Za-z]{3,})/;
  for (const source of sources) {
    const found = source.replace(textCommand, " ").match(words);
    if (found) add("math-prose", found[2]);
  }

  // Admonitions (not the theme's <details> that hides a cell's source).
  const generic = new Set(["note", "important", "warning", "tip", "hint", "caution",
                           "attention", "danger", "error", "seealso", "see also"]);
  for (const box of main.querySelectorAll("div.admonition")) {
    const titleNode = box.querySelector(":scope > .admonition-title");
    const title = (titleNode?.textContent ?? "").trim();
    const bodyNodes = [...box.children].filter(child => child !== titleNode);
    const body = bodyNodes.map(n => n.textContent).join(" ").trim();
    const first = bodyNodes[0];
    const startsBold = first?.tagName === "P" &&
        first.firstChild?.nodeName === "STRONG";
    const repeatsTitle = title && body.toLowerCase().startsWith(title.toLowerCase());
    const bookTitle = bookTitles.find(t => body.startsWith(t));
    const genericTitle = generic.has(title.toLowerCase());
    if (repeatsTitle || (genericTitle && (bookTitle || startsBold))) {
      add("admonition-title", `title "${title}", body "${body.slice(0, 60)}"`);
    }
  }

  // Code and output blocks wider than their box. Hidden cells are opened first.
  main.querySelectorAll("details").forEach(d => { d.open = true; });
  for (const pre of main.querySelectorAll("pre")) {
    if (pre.clientWidth > 0 && pre.scrollWidth > pre.clientWidth + 1) {
      const longest = pre.textContent.split("\n")
                         .reduce((a, b) => (b.length > a.length ? b : a), "");
      add("code-overflow",
          `${pre.scrollWidth}px in ${pre.clientWidth}px: ${longest.trim()}`);
    }
  }

  // Tables wider than the box they sit in: the theme lets them scroll, so a column
  // past the edge is cut off unseen (at 1280 px every table fits its column).
  for (const table of main.querySelectorAll("table")) {
    const box = table.parentElement;
    if (box.clientWidth > 0 && table.offsetWidth > box.clientWidth + 1) {
      const header = table.querySelector("tr")?.textContent.replace(/\s+/g, " ") ?? "";
      add("table-overflow",
          `${table.offsetWidth}px in ${box.clientWidth}px: ${header.trim()}`);
    }
  }

  // Displayed formulas wider than the column: MathJax lets them scroll, unseen.
  for (const formula of main.querySelectorAll('mjx-container[display="true"]')) {
    if (formula.clientWidth > 0 && formula.scrollWidth > formula.clientWidth + 1) {
      add("math-overflow", `${formula.scrollWidth}px in ${formula.clientWidth}px: ` +
          (formula.closest(".math")?.textContent ?? "").trim().slice(0, 60));
    }
  }

  // Images: a real alt text, and a numbered caption for every cell output image.
  for (const img of main.querySelectorAll("img")) {
    const alt = (img.getAttribute("alt") ?? "").trim();
    const fileLike = /^\S*[\\/]\S*$/.test(alt)
                     || /\.(png|jpe?g|svg|gif|webp)$/i.test(alt)
                     || /^<Figure size/.test(alt);
    if (!alt || fileLike) {
      add("image-alt", `alt "${alt}" for ${img.getAttribute("src")}`);
    }
    if (img.closest(".cell_output")) {
      const figure = img.closest("figure");
      const number = figure?.querySelector("figcaption .caption-number");
      const text = figure?.querySelector("figcaption .caption-text");
      if (!number || !text || !text.textContent.trim()) {
        add("figure-caption", `no numbered caption for ${img.getAttribute("src")}`);
      }
    }
  }

  // What cells printed: no stderr, warnings, tracebacks or progress bars.
  const outputs = [...main.querySelectorAll(".cell_output")];
  for (const stderr of main.querySelectorAll(".cell_output .stderr")) {
    add("cell-stderr", stderr.textContent);
  }
  for (const output of outputs) {
    const text = output.textContent;
    const warning = text.match(/\b\w*Warning:.*/);
    if (warning) add("cell-warning", warning[0]);
    const traceback = text.match(/Traceback.*/);
    if (traceback) add("cell-traceback", traceback[0]);
    const bar = text.match(/.{0,40}(\d+%\||\bit\/s\]|\bstep\/s\]|\d+\.\d+s\/it\]).*/);
    if (bar) add("progress-bar", bar[0]);
  }
  return defects;
}"""


def page_defects(page) -> list[str]:
    """The rendering defects on an open page, each as "class: detail"."""
    return page.evaluate(DEFECTS_JS, BOOK_ADMONITION_TITLES)


@pytest.mark.parametrize("path", PAGES)
def test_page_renders(browser, book_url, reader_views, path):
    url = f"{book_url}/{path}"
    page, console_errors = open_page(browser, url)
    try:
        if view := page.evaluate(READER_VIEW_JS):  # before anything unfolds
            reader_views[url] = view
        assert page.title(), f"{path}: no <title>"
        assert console_errors == [], f"{path}: console errors {console_errors}"

        broken_images = page.evaluate(
            "() => [...document.images].filter(i => !(i.naturalWidth > 0))"
            ".map(i => i.src)"
        )
        assert broken_images == [], f"{path}: images that did not load: {broken_images}"

        math = page.evaluate(
            """() => {
                 const formulas = [...document.querySelectorAll(".math")];
                 const untypeset = formulas.filter(
                     f => !f.querySelector("mjx-container"));
                 const prose = document.querySelector("main").cloneNode(true);
                 prose.querySelectorAll("pre, code, script, style, mjx-container")
                      .forEach(node => node.remove());
                 const raw = ["$$", "\\\\(", "\\\\["]
                     .filter(d => prose.textContent.includes(d));
                 return {count: formulas.length,
                         untypeset: untypeset.map(f => f.textContent.slice(0, 60)),
                         raw};
               }"""
        )
        assert math["untypeset"] == [], f"{path}: formulas MathJax did not typeset"
        assert math["raw"] == [], f"{path}: raw TeX delimiters left: {math['raw']}"

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

        defects = page_defects(page)
        listed = "\n".join(defects)
        assert defects == [], f"{path}: {len(defects)} rendering defects:\n{listed}"
        # legible figures: none shrunk to fit the column (test_figure_legibility.py)
        shrunk = shrunk_figures(figure_sizes(page), path)
        assert shrunk == [], f"{path}: figures shrunk below their drawn size:\n" + (
            "\n".join(shrunk)
        )
        if is_notebook_chapter(path):
            check_downloads(page, path, book_url)
    finally:
        page.close()


def check_downloads(page, path: str, book_url: str) -> None:
    """A chapter offers its .md and its executed .ipynb, both files of the built site,
    the notebook opening with the cell that installs aiayn; and a Binder launch."""
    links = page.evaluate(
        "() => [...document.querySelectorAll('.dropdown-download-buttons a')]"
        ".map(a => a.href)"
    )
    files = [link for link in links if link.endswith((".md", ".ipynb"))]
    suffixes = sorted(pathlib.PurePosixPath(link).suffix for link in files)
    assert suffixes == [".ipynb", ".md"], f"{path}: download links {links}"
    for link in files:
        local = HTML / link.removeprefix(f"{book_url}/")
        assert local.is_file(), f"{path}: {link} is not in the built site"
    # the whole book's PDF where the site is published, else beside the pages
    repository, site = book_addresses()["repository"], book_addresses()["site"]
    book_pdf = [link for link in links if link.endswith(".pdf")]
    expected = f"{site}aiayn.pdf" if site else f"{book_url}/aiayn.pdf"
    assert book_pdf == [expected], f"{path}: download links {links}"
    # (that the PDF is there, the whole book: test_published.py, once `make pdf` ran)
    launches = page.evaluate(
        "() => [...document.querySelectorAll('.dropdown-launch-buttons a')]"
        ".map(a => a.href)"
    )
    ipynb = (HTML / "_sources" / path).with_suffix(".ipynb")
    notebook = json.loads(ipynb.read_text(encoding="utf-8"))
    first, *cells = notebook["cells"]
    install = "".join(first["source"])
    outputs = [cell["outputs"] for cell in cells if cell["cell_type"] == "code"]
    assert any(outputs), f"{path}: the notebook has no outputs"
    if site:  # book_model downloads the trained models from there
        assert f'"AIAYN_SITE", "{site}"' in install, f"{path}: no site: {install}"
    if repository is None:  # nothing to launch, nothing to install from
        assert launches == [], f"{path}: launch links without a repository {launches}"
        assert "make setup" in install, f"{path}: {install}"
        return
    binder_url = BINDER.format(repository=repository)
    colab_url = COLAB.format(repository=repository)
    binder = [link for link in launches if link.startswith(binder_url)]
    colab = [link for link in launches if link.startswith(colab_url)]
    assert len(binder) == 1 and len(colab) == 1, f"{path}: launch links {launches}"
    # Binder: the repository at the book's commit, opening this chapter's source
    ref, chapter = binder[0].removeprefix(binder_url).split("?urlpath=lab/tree/")
    assert ref == BOOK_COMMIT, f"{path}: Binder opens {ref}, not {BOOK_COMMIT}"
    assert (ROOT / chapter).is_file(), f"{path}: Binder opens {chapter}, no such file"
    # Colab: the executed notebook, where the publishing workflow puts the site
    published = colab[0].removeprefix(f"{colab_url}{PAGES_BRANCH}/")
    assert HTML / published == ipynb, f"{path}: Colab opens {colab[0]}"
    assert "%pip install" in install, f"{path}: no install cell"
    assert f"@{BOOK_COMMIT}" in install, f"{path}: the library is not pinned: {install}"

# --- the check of the check ----------------------------------------------------------
# A synthetic page in the theme's markup: a code column about as wide as the book's, and
# one clean example of every element the defect check looks at.
PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
    "z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
CELL_CODE = (
    '<div class="cell docutils container"><div class="cell_input docutils container">'
    '<div class="highlight-ipython3 notranslate"><div class="highlight">'
    "<pre>{code}</pre>"
    "</div></div></div>{output}</div>"
)
STREAM = (
    '<div class="cell_output docutils container"><div class="output {kind} '
    'highlight-myst-ansi notranslate"><div class="highlight"><pre>{text}</pre></div>'
    "</div></div>"
)
FIGURE = (
    '<div class="cell_output docutils container"><figure class="align-default" '
    'id="fig-x"><img alt="{alt}" src="{src}"><figcaption><p>'
    '<span class="caption-number">Fig. 4.1 </span>'
    '<span class="caption-text">{caption}</span></p></figcaption></figure></div>'
)
CLEAN = {
    "table": "<table><tr><th>id</th><th>symbol</th></tr><tr><td>0</td><td>pad</td>"
    "</tr></table><p>A sentence that mentions |x| and a b | c.</p>",
    "admonition": '<div class="note admonition"><p class="admonition-title">Not in the '
    "paper</p><p>The paper never pads.</p></div>"
    '<div class="admonition warning"><p class="admonition-title">Warning</p>'
    "<p>Load only your own checkpoints.</p></div>",
    "code": CELL_CODE.format(
        code="x = 1  # " + "a" * 70,
        output=STREAM.format(kind="stream", text="loss 0.25, 12 steps"),
    ),
    "figure": FIGURE.format(
        alt="Heatmap of attention weights, queries as rows and keys as columns",
        src=PNG,
        caption="Attention weights.",
    ),
    "math": '<p>The bound <span class="math notranslate nohighlight">'
    "\\(s(Y) \\le \\ell / \\max(lp(t + 1), lp(L)) \\text{ for any beam of the batch}"
    "\\)</span> holds; costs $5 and $7.</p>",
}
SEEDED = {
    "raw-table": ("table", "<p>| id | symbol | role | | ---: | :---: | --- |</p>"),
    "admonition-title": (
        "admonition",
        '<div class="admonition note"><p class="admonition-title">Note</p>'
        "<p>Not in the paper The paper never pads.</p></div>",
    ),
    "code-overflow": (
        "code",
        CELL_CODE.format(code="x = 1  # " + "a" * 200, output=""),
    ),
    "table-overflow": (
        "table",
        '<div style="overflow-x: auto"><table><tr><th>number</th><th>German</th>'
        "<th>subword tokens</th></tr><tr><td>747321</td><td>"
        + "siebenhundertsiebenundvierzigtausend" * 3
        + "</td><td>sieben · hundert</td></tr></table></div>",
    ),
    "math-overflow": (
        "math",
        '<div class="math notranslate nohighlight">'
        '<mjx-container display="true" style="display: block; overflow-x: auto; '
        'width: 200px"><span style="display: inline-block; width: 900px">x = '
        "a + b</span></mjx-container></div>",
    ),
    "image-alt": (
        "figure",
        FIGURE.format(
            alt="../_build/jupyter_execute/abc.png", src=PNG, caption="Weights."
        ),
    ),
    "figure-caption": (
        "figure",
        '<div class="cell_output docutils container"><img alt="A heatmap of weights"'
        f' src="{PNG}"></div>',
    ),
    "cell-stderr": (
        "code",
        CELL_CODE.format(code="x = 1", output=STREAM.format(kind="stderr", text="3")),
    ),
    "cell-warning": (
        "code",
        CELL_CODE.format(
            code="x = 1",
            output=STREAM.format(kind="stream", text="UserWarning: careful"),
        ),
    ),
    "cell-traceback": (
        "code",
        CELL_CODE.format(
            code="x = 1",
            output=STREAM.format(
                kind="stream", text="Traceback (most recent call last):"
            ),
        ),
    ),
    "raw-tex": (
        "math",
        "<p>The score $\\(s(Y) \\le \\frac{\\ell}{lp}\\)$ grows with the length.</p>",
    ),
    "raw-html": (
        "table",
        '<p>Swap the target tokens ("<s> 5 1 4" becomes "<s> 1 5 4") and look.</p>',
    ),
    "math-prose": (
        "math",
        '<p>The score <span class="math notranslate nohighlight">'
        "\\(s(Y) grows with the length for every beam\\)</span>.</p>",
    ),
    "progress-bar": (
        "code",
        CELL_CODE.format(
            code="x = 1",
            output=STREAM.format(
                kind="stream",
                text=" 40%|####      | 40/100 [00:02&lt;00:03, 19.9step/s]",
            ),
        ),
    ),
}


def synthetic_page(parts: dict[str, str]) -> str:
    body = "".join(parts.values())
    return (
        "<!doctype html><html><head><style>"
        "main { width: 760px; margin: 0 auto; font: 16px sans-serif; }"
        "pre { overflow: auto; font: 14px monospace; }"
        "</style></head><body><main>" + body + "</main></body></html>"
    )


def test_defect_check_catches_each_class(browser):
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.set_content(synthetic_page(CLEAN))
        assert page_defects(page) == [], "the clean synthetic page has defects"
        for kind, (replaced, html) in SEEDED.items():
            page.set_content(synthetic_page({**CLEAN, replaced: html}))
            found = page_defects(page)
            classes = sorted({defect.split(":")[0] for defect in found})
            assert classes == [kind], f"seeded {kind}, found {found}"
    finally:
        page.close()


def test_figure_check_is_not_vacuous(browser, book_url):
    """The figures of a chapter are found and measured, so the check above ran."""
    page, _ = open_page(browser, f"{book_url}/book/attention.html")
    try:
        assert len(figure_sizes(page)) >= 2
    finally:
        page.close()


def test_math_check_is_not_vacuous(browser, book_url):
    """At least one page has formulas, so the MathJax assertions above really ran."""
    page, _ = open_page(browser, f"{book_url}/book/attention.html")
    try:
        typeset = page.evaluate(
            "() => document.querySelectorAll('.math mjx-container').length"
        )
        assert typeset > 0
    finally:
        page.close()


def test_book_has_repository_and_download_buttons(browser, book_url):
    """A download menu always; a repository button where the build knows the repository
    (book_addresses), none where it would link an address that does not exist."""
    repository = book_addresses()["repository"]
    page, _ = open_page(browser, f"{book_url}/book/cover.html")
    try:
        buttons = page.locator(".btn-source-repository-button").count()
        assert (buttons >= 1) if repository else (buttons == 0), (repository, buttons)
        assert page.locator(".dropdown-download-buttons").count() >= 1
    finally:
        page.close()
