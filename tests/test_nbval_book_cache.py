"""The nbval outputs stored for the book build are found by the build's own lookup."""

import nbformat
import pytest
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from myst_nb.core.read import read_myst_markdown_notebook

from tests.nbval_book_cache import chapter_with_outputs, is_stored

CHAPTER = """---
kernelspec:
  display_name: Python 3 (ipykernel)
  language: python
  name: python3
---

# A chapter

```{code-cell} ipython3
print("hello")
```

Some prose.

```{code-cell} ipython3
:tags: [hide-input]

1 + 1
```
"""

HELLO = nbformat.v4.new_output("stream", name="stdout", text="hello\n")
TWO = nbformat.v4.new_output(
    "execute_result", data={"text/plain": "2"}, execution_count=2
)


def test_each_code_cell_gets_its_outputs(tmp_path):
    source = tmp_path / "chapter.md"
    source.write_text(CHAPTER)
    executed = chapter_with_outputs(source, {0: [HELLO], 1: [TWO]})
    code = [cell for cell in executed.cells if cell.cell_type == "code"]
    assert [cell.outputs for cell in code] == [[HELLO], [TWO]]


def test_a_chapter_with_a_cell_that_did_not_run_is_not_stored(tmp_path):
    source = tmp_path / "chapter.md"
    source.write_text(CHAPTER)
    assert chapter_with_outputs(source, {0: [HELLO]}) is None


def test_the_build_finds_the_stored_chapter(tmp_path):
    source = tmp_path / "chapter.md"
    source.write_text(CHAPTER)
    cache = get_cache(tmp_path / "cache")
    executed = chapter_with_outputs(source, {0: [HELLO], 1: [TWO]})
    cache.cache_notebook_bundle(
        CacheBundleIn(executed, str(source)), check_validity=False, overwrite=True
    )
    # what myst-nb does when the build reads the chapter (execute_notebooks: cache)
    as_the_build_reads_it = read_myst_markdown_notebook(CHAPTER, path=source)
    _, merged = cache.merge_match_into_notebook(as_the_build_reads_it)
    code = [cell for cell in merged.cells if cell.cell_type == "code"]
    assert [cell.outputs for cell in code] == [[HELLO], [TWO]]
    edited = read_myst_markdown_notebook(CHAPTER.replace("1 + 1", "1 + 2"), path=source)
    with pytest.raises(KeyError):  # changed code: not found; the build executes it
        cache.match_cache_notebook(edited)


def test_a_chapter_is_stored_until_a_cell_changes(tmp_path):
    source = tmp_path / "chapter.md"
    source.write_text(CHAPTER)
    cache = get_cache(tmp_path / "cache")
    assert not is_stored(cache, source)
    executed = chapter_with_outputs(source, {0: [HELLO], 1: [TWO]})
    bundle = CacheBundleIn(executed, str(source), data={})
    cache.cache_notebook_bundle(bundle, check_validity=False, overwrite=True)
    assert is_stored(cache, source)
    source.write_text(CHAPTER.replace("1 + 1", "1 + 2"))
    assert not is_stored(cache, source)
    source.write_text(CHAPTER.replace("Some prose.", "Other prose."))
    assert is_stored(cache, source)  # only the code cells are the key
