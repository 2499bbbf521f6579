"""The tiny GPT's committed weights, as the learner's functions take them.

The student package reads ``weights.npz`` and ``training.json`` itself so that it
never imports the grader (the same files are written by ``make train-gpt``, see
``autograder/assignments/a09_tiny_gpt/train.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WEIGHTS_FILE = HERE / "weights.npz"
TRAINING_FILE = HERE / "training.json"

#: The config keys the learner's functions read; ``d_model`` and ``d_head`` follow from the arrays.
CONFIG_KEYS = ("vocab_size", "block_size", "n_heads", "n_layers", "ln_eps")


def training_summary(path: Path = TRAINING_FILE) -> dict:
    """The training record written with the weights (config, task, schedule, evaluation).

    Returns
    -------
    dict
        Parsed ``training.json``; ``["evaluation"]["predictable_accuracy"]`` is the
        committed model's next-token accuracy on the predictable positions of fresh sequences.
    """
    return json.loads(Path(path).read_text(encoding="utf-8"))


def load_weights(path: Path = WEIGHTS_FILE, training_path: Path = TRAINING_FILE) -> tuple[dict, dict]:
    """The trained parameters and the config the learner's ``model_forward`` takes.

    Parameters
    ----------
    path : pathlib.Path
        The ``.npz`` of float64 arrays: ``W_emb`` (vocab_size, d_model), ``W_pos``
        (block_size, d_model), per layer ``i`` the arrays ``block{i}.ln1.gain`` … ``block{i}.b_2``,
        then ``ln_f.gain``, ``ln_f.bias`` and ``W_out`` (d_model, vocab_size).
    training_path : pathlib.Path
        ``training.json``, whose ``"config"`` gives the sizes.

    Returns
    -------
    params : dict of str to numpy.ndarray
        Name → float64 array, read from the file on every call (a learner who edits one changes only their copy).
    config : dict
        ``{"vocab_size", "block_size", "n_heads", "n_layers", "ln_eps"}``.

    Raises
    ------
    ValueError
        If the arrays do not have the shapes the config describes.
    """
    stored_config = training_summary(training_path)["config"]
    config = {key: stored_config[key] for key in CONFIG_KEYS}
    with np.load(path) as stored:
        params = {name: np.asarray(stored[name], dtype=np.float64) for name in stored.files}
    d_model = stored_config["d_model"]
    expected = {"W_emb": (config["vocab_size"], d_model), "W_pos": (config["block_size"], d_model),
                "W_out": (d_model, config["vocab_size"])}
    for name, shape in expected.items():
        if name not in params or params[name].shape != shape:
            got = params[name].shape if name in params else "missing"
            raise ValueError(f"{path}: {name} must have shape {shape}; received {got}")
    for layer in range(config["n_layers"]):
        if f"block{layer}.W_q" not in params:
            raise ValueError(f"{path}: block{layer}.W_q is missing for n_layers = {config['n_layers']}")
    return params, config
