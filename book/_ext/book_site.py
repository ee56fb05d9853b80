"""Sphinx extension: the book's addresses, derived from the repository it is built in.

``aiayn.book.site`` names the repository (``make book REPOSITORY=owner/name``, the
publishing workflow's ``GITHUB_REPOSITORY``, or the git remote ``origin`` on GitHub)
and the site GitHub Pages serves from it (or ``$AIAYN_SITE``). From them, when the
configuration is read: ``html_baseurl``; the repository button and the launch buttons
(Binder and Colab need the repository on GitHub: without one there are none); and
substitutions the pages use where they name an address:

- ``{{ book_pdf }}``: the whole book as one PDF, linked where the site publishes it;
- ``{{ where_published }}``: "at <site>", or where it will be once published;
- ``{{ clone }}``: the command that clones the repository.

The role ``{source}`` `aiayn/train/loop.py` links a file of the library to its text in
the repository, at the book's commit (plain code where there is no repository).
``site.json``, at the root of the built site, records the addresses the build used.
"""

import json
from pathlib import Path

from docutils import nodes
from notebook_download import book_commit

from aiayn.book.site import book_repository, book_site, repository_url

BOOK_PDF = "aiayn.pdf"  # what make pdf writes, beside the pages


def substitutions(repository: str | None, site: str | None) -> dict[str, str]:
    """The pages' words for the addresses, with or without a repository and a site."""
    if site:
        book_pdf = f"[one PDF]({site}{BOOK_PDF})"
        where = f"at <{site}>"
    else:
        book_pdf = f"one PDF (`make pdf` builds it: `_build/html/{BOOK_PDF}`)"
        where = ("on its repository's GitHub Pages, `https://<owner>.github.io/<name>/`,"
                 " once its publishing workflow has run")
    if repository:
        clone = f"`git clone {repository_url(repository)}`"
    else:
        clone = "`git clone` and the address of the repository you got it from"
    return {"book_pdf": book_pdf, "where_published": where, "clone": clone}


def set_addresses(app, config) -> None:
    """The addresses, into the configuration, before anything reads it."""
    repository, site = book_repository(), book_site()
    config.book_repository, config.book_site = repository, site
    config.html_baseurl = site or ""
    options = config.html_theme_options
    options["use_repository_button"] = repository is not None
    if repository:
        options["repository_url"] = repository_url(repository)
    else:  # no repository to launch: no launch buttons
        options.pop("launch_buttons", None)
    config.myst_substitutions = {
        **config.myst_substitutions, **substitutions(repository, site)
    }


def source_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{source}`aiayn/x.py```: the library's file, linked in the repository at the
    book's commit where there is one."""
    config = inliner.document.settings.env.config
    code = nodes.literal(text, text)
    if not config.book_repository:
        return [code], []
    branch = config.html_theme_options["repository_branch"]
    commit = book_commit(inliner.document.settings.env.srcdir, branch)
    url = f"{repository_url(config.book_repository)}/blob/{commit}/src/{text}"
    return [nodes.reference(rawtext, "", code, refuri=url)], []


def record_addresses(app, exception) -> None:
    """site.json in the built site: what the pages link to (the browser check reads it)."""
    if exception is None and app.builder.format == "html":
        addresses = {"repository": app.config.book_repository,
                     "site": app.config.book_site}
        Path(app.outdir, "site.json").write_text(json.dumps(addresses) + "\n")


def setup(app):
    app.add_config_value("book_repository", None, "html")
    app.add_config_value("book_site", None, "html")
    # before myst reads its substitutions and the theme its options (builder-inited)
    app.connect("config-inited", set_addresses, priority=100)
    app.add_role("source", source_role)
    app.connect("build-finished", record_addresses)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
