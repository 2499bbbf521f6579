"""A Jupyter server extension that saves the course's committed notebooks exactly as they are committed.

Opening a notebook in JupyterLab marks it changed (the kernel's
``language_info`` goes into its metadata) and autosave writes it back; running
an explorer adds outputs, execution counts and widget state. In the folders
that git tracks (``notebooks/``, ``release/``, ``source/``) that would leave a
self-study learner's clone modified after merely reading the start page. This
extension registers a ``pre_save_hook`` (jupyter_server's public
``ContentsManager.register_pre_save_hook``) that takes exactly that run state
out before a notebook in those folders is written: outputs and execution counts
go, and ``language_info`` and widget state are written as the file on disk has
them (committed notebooks differ: some carry ``{"name": "python"}``, some none).
So saving a notebook one has only opened and run writes the committed bytes
again (the committed files are in nbformat's canonical form, which a test
checks) and ``git status`` stays empty.
What a learner types into a cell is kept: edits are theirs to keep or revert.
Learners' own copies in ``workspace/`` keep their outputs.

Enabled by ``make lab`` (``--ServerApp.jpserver_extensions``) and, on Binder,
by ``postBuild`` (``jupyter server extension enable --sys-prefix``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# top-level folders of the course whose notebooks are committed without outputs (tests/test_notebooks.py)
COMMITTED_FOLDERS = ("notebooks", "release", "source")
# notebook metadata that running a notebook adds: the kernel's language, saved widget state
RUN_METADATA = ("language_info", "widgets")
# cell metadata that running adds: JupyterLab's execution timing and the older ExecuteTime extension
RUN_CELL_METADATA = ("execution", "ExecuteTime", "widgets")


def is_committed_notebook(path: str) -> bool:
    """Whether ``path`` (a Jupyter contents API path, relative to the server root) is a committed notebook.

    Parameters
    ----------
    path : str
        For example ``"notebooks/00_start_here.ipynb"``; a leading ``/`` is ignored.

    Returns
    -------
    bool
        True for ``.ipynb`` files inside :data:`COMMITTED_FOLDERS`, outside ``.ipynb_checkpoints``.
    """
    parts = path.strip("/").split("/")
    return (len(parts) > 1 and parts[0] in COMMITTED_FOLDERS and parts[-1].endswith(".ipynb")
            and ".ipynb_checkpoints" not in parts)


def strip_run_state(notebook: dict[str, Any], saved_metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """Take what running added out of a notebook, in place.

    Parameters
    ----------
    notebook : dict
        nbformat 4 notebook as JSON-like dicts (the ``content`` of a contents API model).
    saved_metadata : dict, optional
        Notebook metadata of the version on disk: its :data:`RUN_METADATA` entries are kept as they are there
        (absent there: removed).

    Returns
    -------
    dict
        The same ``notebook``, with no outputs or execution counts, no :data:`RUN_CELL_METADATA`, and the
        :data:`RUN_METADATA` of ``saved_metadata``.
    """
    metadata = notebook.setdefault("metadata", {})
    saved_metadata = saved_metadata or {}
    for key in RUN_METADATA:
        if key in saved_metadata:
            metadata[key] = saved_metadata[key]
        else:
            metadata.pop(key, None)
    for cell in notebook.get("cells", []):
        cell_metadata = cell.get("metadata", {})
        for key in RUN_CELL_METADATA:
            cell_metadata.pop(key, None)
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return notebook


def pre_save_hook(model: dict[str, Any], path: str, contents_manager=None, **kwargs) -> None:
    """jupyter_server pre-save hook: save committed notebooks without what running them added.

    Parameters
    ----------
    model : dict
        The contents API model about to be saved; its ``content`` is changed in place.
    path : str
        The model's API path.
    contents_manager : jupyter_server.services.contents.manager.ContentsManager, optional
        The server's contents manager; its ``root_dir`` locates the version on disk.
    """
    if model.get("type") == "notebook" and model.get("content") and is_committed_notebook(path):
        strip_run_state(model["content"], saved_metadata(getattr(contents_manager, "root_dir", None), path))


def saved_metadata(root_dir: str | None, path: str) -> dict[str, Any]:
    """Notebook metadata of the file at ``path`` under ``root_dir``; empty if it does not exist or does not parse."""
    if not root_dir:
        return {}
    try:
        return json.loads((Path(root_dir) / path.strip("/")).read_text(encoding="utf-8")).get("metadata", {})
    except (OSError, ValueError, AttributeError):
        return {}


def _jupyter_server_extension_points():
    # the entry point jupyter_server looks up (`jupyter server extension enable attention_lab.clean_on_save`)
    return [{"module": "attention_lab.clean_on_save"}]


def _load_jupyter_server_extension(serverapp) -> None:
    # called by jupyter_server when the extension is enabled
    serverapp.contents_manager.register_pre_save_hook(pre_save_hook)
    serverapp.log.info("attention_lab.clean_on_save: committed notebooks in %s/ are saved without run state",
                       "/, ".join(COMMITTED_FOLDERS))
