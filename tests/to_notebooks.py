"""Convert chapters (MyST Markdown) into notebooks, all in one process.

    python tests/to_notebooks.py OUTDIR book/attention.md book/masks.md ...

writes OUTDIR/attention.ipynb, OUTDIR/masks.ipynb, ... without outputs, as
``jupytext --to ipynb`` does; one process for all of them instead of one per chapter
(each jupytext process spends seconds starting up).
"""

import sys
from pathlib import Path

import jupytext


def main(argv: list[str]) -> int:
    out, chapters = Path(argv[0]), [Path(a) for a in argv[1:]]
    out.mkdir(parents=True, exist_ok=True)
    for chapter in chapters:
        jupytext.write(jupytext.read(chapter), out / f"{chapter.stem}.ipynb")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
