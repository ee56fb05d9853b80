"""Figures a reader can read: no figure of the built book is shrunk to fit its column.

matplotlib draws at 100 dpi, so text set at 8 pt, the smallest the book allows, is
about 11 pixels in the image. The text column is about 672 CSS pixels wide at a
1280-pixel window, and a wider image is scaled down to fit, its text with it. So at a
1280 x 800 window every figure image in the article (an image in a figure or in a cell
output, hidden cells opened; logos, icons and images under 100 pixels wide skipped) must
be shown at least 0.9 of its natural width: 8-pt text then stays at about 10 CSS pixels
or more. Each offender is reported as ``page: src (figure) natural→displayed px
(scale)``, the figure named by its id (``fig-attention-figure-2``) or caption number.

The measure is the image's own pixels against CSS pixels: a figure saved at a higher dpi
and shown at half size on purpose (for sharp screens) would be reported, and its text
judged too small although it is not; the book saves none.

`test_legibility_check_catches_a_shrunk_figure` seeds a synthetic page with figures
drawn by matplotlib, one wider than the column and one that fits: the check must report
the first and not the second, so it cannot pass by measuring nothing. It always runs.
Every page of the built book is measured in test_book_html.py's test_page_renders,
which has the page open anyway (the source-level twin, tests/test_figures.py, says
without a build which chapters draw too wide).
"""

import base64
import io

VIEWPORT = {"width": 1280, "height": 800}
MIN_SCALE = 0.9  # displayed width / natural width
MIN_NATURAL = 100  # pixels: smaller images are icons, not figures

# Every figure image of the article, as {src, name, natural, shown}: its figure's id or
# caption number, its own width and its displayed width (CSS pixels).
FIGURES_JS = r"""(minNatural) => {
  const article = document.querySelector("main article")
      ?? document.querySelector("main") ?? document.body;
  article.querySelectorAll("details").forEach(d => { d.open = true; });
  const figures = [];
  for (const img of article.querySelectorAll("figure img, .cell_output img")) {
    if (img.closest("header, nav, .logo, .navbar-brand")) continue;
    if (img.naturalWidth < minNatural) continue;
    const shown = img.getBoundingClientRect().width;
    if (shown === 0) continue;  // not displayed at all (another tab, say)
    const figure = img.closest("figure");
    const name = figure?.id ||
        figure?.querySelector(".caption-number")?.textContent.trim() || "";
    figures.push({src: img.getAttribute("src") ?? "", name: name,
                  natural: img.naturalWidth, shown: shown});
  }
  return figures;
}"""


def figure_sizes(page) -> list[dict]:
    """Every figure image on an open page: {src, name, natural, shown}."""
    return page.evaluate(FIGURES_JS, MIN_NATURAL)


def shrunk_figures(figures: list[dict], name: str) -> list[str]:
    """Those shown at less than MIN_SCALE of their natural width, as
    "name: src (figure) natural→displayed px (scale)"."""
    found = []
    for figure in figures:
        scale = figure["shown"] / figure["natural"]
        if scale < MIN_SCALE:
            src = figure["src"]
            src = src if len(src) <= 60 else f"{src[:40]}…"
            which = f" ({figure['name']})" if figure.get("name") else ""
            found.append(
                f"{name}: {src}{which} {figure['natural']}→{figure['shown']:.0f} px "
                f"({scale:.2f})"
            )
    return found


# --- the check of the check ----------------------------------------------------------
def matplotlib_png(width: float, height: float) -> tuple[str, int]:
    """A figure of figsize (width, height) with some text, as a PNG data URI saved at
    100 dpi, and the PNG's width in pixels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height), dpi=100)
    ax.plot([0, 1], [0, 1])
    ax.set_title("text at 8 pt", fontsize=8)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    data = buffer.getvalue()
    png_width = int.from_bytes(data[16:20], "big")  # the IHDR chunk's width
    return "data:image/png;base64," + base64.b64encode(data).decode(), png_width


def legibility_page(body: str) -> str:
    """A page in the theme's markup, with a text column as wide as the book's."""
    return (
        "<!doctype html><html><head><style>"
        "main { width: 672px; margin: 0 auto; } figure { margin: 0; }"
        "img { max-width: 100%; }"
        "</style></head><body><header><img src='{logo}' style='width: 50px'></header>"
        "<main><article class='bd-article'>" + body + "</article></main></body></html>"
    )


def cell_figure(src: str, hidden: bool = False) -> str:
    figure = (
        '<div class="cell_output docutils container">'
        '<figure class="align-default" id="fig-line">'
        f'<img alt="A line" src="{src}"><figcaption><p>'
        '<span class="caption-number">Fig. 1 </span>'
        '<span class="caption-text">A line.</span></p></figcaption></figure></div>'
    )
    return f"<details><summary>Show</summary>{figure}</details>" if hidden else figure


def test_legibility_check_catches_a_shrunk_figure(browser):
    wide, wide_px = matplotlib_png(11, 3)  # 1100 px, in a 672-px column
    fitting, fitting_px = matplotlib_png(6.5, 3)  # 650 px
    icon, _ = matplotlib_png(0.6, 0.6)  # 60 px, shrunk but an icon
    assert (wide_px, fitting_px) == (1100, 650)
    page = browser.new_page(viewport=VIEWPORT)
    try:
        clean = cell_figure(fitting) + (
            f'<figure><img alt="icon" src="{icon}" style="width: 20px"></figure>'
        )
        page.set_content(legibility_page(clean).replace("{logo}", wide))
        figures = figure_sizes(page)
        assert [f["natural"] for f in figures] == [650], figures
        assert shrunk_figures(figures, "clean") == [], figures

        for hidden in (False, True):
            seeded = clean + cell_figure(wide, hidden=hidden)
            page.set_content(legibility_page(seeded).replace("{logo}", wide))
            found = shrunk_figures(figure_sizes(page), "seeded")
            assert len(found) == 1, found
            assert found[0].endswith("(fig-line) 1100→672 px (0.61)"), found
    finally:
        page.close()
