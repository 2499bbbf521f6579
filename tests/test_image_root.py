"""Where sandbox images are kept when another user owns the shared directory (a hub's instructors, several graders),
and when they are removed.

Each image is a copy of the grading environment (hundreds of MiB when hard links are refused, as they are
across users). Before, a grader whose shared directory belonged to another user built its image in a fresh
temporary directory in every process and never removed it: each hub test run left two 644 MiB copies in /tmp.
"""

import os
import shutil
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


def _installation(folder):
    """A stand-in for a Python installation (the image copies whatever tree it is given)."""
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").write_text("")
    (folder / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    return folder


def _image_of(folder):
    (mounted, _), = image.python_image(str(folder / "bin" / "python"), str(folder), str(folder)).mounts
    return mounted.parent


def test_an_image_whose_environment_was_deleted_is_removed_when_the_next_is_built(tmp):
    """Images are hard links into their environment: one left behind by a deleted environment (a removed clone's
    .venv) kept its files on disk, 43 GiB of them after two days of test runs in fresh clones."""
    gone, kept = _installation(tmp / "gone"), _installation(tmp / "kept")
    gone_image, kept_image = _image_of(gone), _image_of(kept)
    assert gone_image != kept_image and gone_image.is_dir() and kept_image.is_dir()
    (gone_image.parent / "older").mkdir()  # an image from before images recorded their environment: left alone
    shutil.rmtree(gone)
    new_image = _image_of(_installation(tmp / "new"))
    assert sorted(p.name for p in new_image.parent.iterdir()) == sorted([kept_image.name, new_image.name, "older"])
    assert (kept_image / "python" / "bin" / "python").is_file()
