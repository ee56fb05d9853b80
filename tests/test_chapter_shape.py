"""Every numbered chapter ends the way GUIDE.md says: a recap, then the exercises.

The recap is a section `## Recap` whose body starts "You can now:" and lists three to
five points, placed right before `## Exercises`.
"""

import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]


def numbered_chapters() -> list[pathlib.Path]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [
        ROOT / f"{chapter['file']}.md"
        for part in toc["parts"]
        if part.get("numbered")
        for chapter in part["chapters"]
    ]


CHAPTERS = numbered_chapters()


def test_the_numbered_parts_are_found():
    assert len(CHAPTERS) >= 20


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_a_recap_comes_before_the_exercises(chapter):
    text = chapter.read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.MULTILINE)
    titles = [s.split("\n", 1)[0].strip() for s in sections[1:]]
    assert "Recap" in titles, f"{chapter.name}: no ## Recap"
    recap = sections[1 + titles.index("Recap")]
    body = recap.split("\n", 1)[1].strip()
    assert body.startswith("You can now:"), f"{chapter.name}: {body[:60]!r}"
    points = re.findall(r"^- ", body, flags=re.MULTILINE)
    assert 3 <= len(points) <= 5, f"{chapter.name}: {len(points)} points"
    after = titles[titles.index("Recap") + 1 :]
    assert after[:1] == ["Exercises"], f"{chapter.name}: then {after}"
