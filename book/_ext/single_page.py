"""Sphinx extension: the whole book on one page, the source of its PDF (``make pdf``).

Sphinx gives a node the visitors an extension registered for the builder's own name and
falls back to those of its format (``html``) only when no extension registered any for
that name. Some extensions register visitors for ``singlehtml``, so the nodes that others
register for ``html`` alone (myst-nb's hidden cells among them) would have none there and
the build would stop. This gives ``singlehtml`` every ``html`` visitor it lacks.
"""


def _share_html_visitors(app):
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single_page = handlers.setdefault("singlehtml", {})
    for node, visitors in handlers.get("html", {}).items():
        single_page.setdefault(node, visitors)


def setup(app):
    app.connect("builder-inited", _share_html_visitors)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
