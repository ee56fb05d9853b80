"""Where the book is published, derived from its repository: nothing hard-coded, so
that a fork publishes its own book (aiayn.book.site)."""

import subprocess

import pytest

from aiayn.book.site import book_repository, book_site, github_repository, pages_site


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/owner/name",
        "https://github.com/owner/name.git",
        "https://github.com/owner/name/",
        "git@github.com:owner/name.git",
        "ssh://git@github.com/owner/name.git",
        "https://x-access-token:secret@github.com/owner/name.git\n",
    ],
)
def test_a_github_address_names_its_repository(url):
    assert github_repository(url) == "owner/name"


@pytest.mark.parametrize(
    "url", ["https://gitlab.com/owner/name", "/home/me/book", "file:///tmp/aiayn", ""]
)
def test_another_address_names_no_github_repository(url):
    assert github_repository(url) is None


def test_github_pages_serves_a_repository_under_its_owner():
    assert pages_site("Owner/my-book") == "https://owner.github.io/my-book/"
    # a repository named after the owner's pages is served at the root
    assert pages_site("Owner/owner.github.io") == "https://owner.github.io/"


def git_checkout(folder, origin=None):
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    if origin:
        subprocess.run(["git", "-C", str(folder), "remote", "add", "origin", origin],
                       check=True)
    return folder


def test_the_repository_is_named_or_derived_from_origin(tmp_path):
    fork = git_checkout(tmp_path / "fork", "git@github.com:reader/aiayn-fork.git")
    assert book_repository({}, fork) == "reader/aiayn-fork"
    # the workflow's repository, and `make REPOSITORY=...`, before the remote
    assert book_repository({"GITHUB_REPOSITORY": "ci/book"}, fork) == "ci/book"
    both = {"GITHUB_REPOSITORY": "ci/book", "AIAYN_REPOSITORY": "me/book"}
    assert book_repository(both, fork) == "me/book"


def test_a_checkout_not_on_github_has_no_site(tmp_path):
    elsewhere = git_checkout(tmp_path / "b", "https://gitlab.com/someone/book.git")
    assert book_site({}, elsewhere) is None
    assert book_site({}, git_checkout(tmp_path / "c")) is None  # no remote at all


def test_the_site_is_github_pages_unless_named():
    workflow = {"GITHUB_REPOSITORY": "owner/name"}
    assert book_site(workflow) == "https://owner.github.io/name/"
    named = {**workflow, "AIAYN_SITE": "https://book.example.org/aiayn"}
    assert book_site(named) == "https://book.example.org/aiayn/"
    assert book_site({**workflow, "AIAYN_SITE": ""}) is None  # downloads off


def test_a_malformed_repository_is_refused_in_one_line():
    with pytest.raises(ValueError, match="AIAYN_REPOSITORY='owner' is not owner/name"):
        book_repository({"AIAYN_REPOSITORY": "owner"})
