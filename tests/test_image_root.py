"""Where sandbox images are kept when another user owns the shared directory (a hub's instructors, several graders).

Each image is a copy of the grading environment (hundreds of MiB when hard links are refused, as they are
across users). Before, a grader whose shared directory belonged to another user built its image in a fresh
temporary directory in every process and never removed it: each hub test run left two 644 MiB copies in /tmp.
"""

import os
import tempfile

import pytest

from autograder.sandbox import image

NOBODY = 65534


@pytest.fixture
def tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_the_shared_directory_is_used_when_this_user_owns_it(tmp):
    assert image.image_root() == tmp / "attention-lab-sandbox"
    assert image.image_root() == tmp / "attention-lab-sandbox"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_another_user_s_directory_gives_this_user_one_stable_directory_of_its_own(tmp):
    shared = tmp / "attention-lab-sandbox"
    shared.mkdir()
    os.chown(shared, NOBODY, NOBODY)
    first, second = image.image_root(), image.image_root()
    assert first == second == tmp / f"attention-lab-sandbox-uid{os.geteuid()}"
    assert first.stat().st_uid == os.geteuid() and not first.is_symlink()
    assert sorted(p.name for p in tmp.iterdir()) == ["attention-lab-sandbox", f"attention-lab-sandbox-uid{os.geteuid()}"]


def test_links_in_the_way_give_a_private_directory_that_is_removed_at_exit(tmp, monkeypatch):
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    for name in ("attention-lab-sandbox", f"attention-lab-sandbox-uid{os.geteuid()}"):
        (tmp / name).symlink_to(elsewhere)
    registered = []
    monkeypatch.setattr(image.atexit, "register", lambda *call, **keywords: registered.append((call, keywords)))
    root = image.image_root()
    assert root.parent == tmp and root.name.startswith("attention-lab-sandbox-") and not root.is_symlink()
    assert root not in (tmp / "attention-lab-sandbox", tmp / f"attention-lab-sandbox-uid{os.geteuid()}")
    (call, keywords), = registered
    assert call[1] == root and keywords == {"ignore_errors": True}
    call[0](*call[1:], **keywords)  # what runs at exit
    assert not root.exists() and list(elsewhere.iterdir()) == []
