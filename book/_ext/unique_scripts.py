"""Sphinx extension: include every script only once per page.

With Sphinx 7.4, scripts that extensions add after the builder has started (sphinx-thebe's
configuration, sphinx-togglebutton's selector) are written into each page twice. sphinx-thebe's
copy declares a ``const``, so the second copy throws "Identifier 'THEBE_JS_URL' has already been
declared" in the browser console. This drops the repeats before the page is rendered.
"""


def _drop_repeated_scripts(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for script in context.get("script_files", []):
        key = (script.filename or "", tuple(sorted(script.attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", _drop_repeated_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
