"""Train the tiny GPT of assignment 9 on repeated random tokens, with Adam, from a fixed seed; save the weights.

``python -m autograder.assignments.a09_tiny_gpt.train`` retrains the committed weights
(``attention_lab/a09_tiny_gpt/weights.npz`` and ``training.json``). Everything
is seeded: the initial parameters (:data:`INIT_SEED`), every batch
(:data:`DATA_SEED`, one fresh batch per step) and the evaluation sequences
(:data:`EVAL_SEED`, never used for training), so a rerun on the same machine
reproduces the same numbers (bit for bit with OPENBLAS_NUM_THREADS=1).

Optimiser: Adam (Kingma & Ba 2015, Algorithm 1, with bias correction),
β₁ = 0.9, β₂ = 0.99, ε = 1e-8, no weight decay; the learning rate rises
linearly over the first ``warmup`` steps to ``lr`` and then follows a
cosine down to ``lr / 10``; the gradient is clipped to global norm 1.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from dataclasses import dataclass
from typing import Mapping

from attention_lab.core import KERNEL_ENVIRONMENT  # noqa: E402 — before NumPy: BLAS reads it when it loads

for _name, _value in KERNEL_ENVIRONMENT.items():  # OPENBLAS_NUM_THREADS=1: small matrices, threads only contend
    os.environ.setdefault(_name, _value)

import numpy as np  # noqa: E402

from . import data  # noqa: E402
from .backward import global_norm, loss_and_gradients  # noqa: E402
from .model import TRAINING_FILE, WEIGHTS_FILE, Config, forward, init_parameters, save_weights  # noqa: E402

INIT_SEED = 0
DATA_SEED = 1
EVAL_SEED = 2
#: Block lengths L of the training and evaluation sequences (inclusive).
BLOCK_LENGTHS = (3, 12)


@dataclass(frozen=True)
class Schedule:
    """Training hyper-parameters."""

    steps: int = 6000
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 200
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-8
    clip: float = 1.0

    def learning_rate(self, step: int) -> float:
        """Learning rate at 0-based ``step``: linear warm-up, then cosine from ``lr`` to ``lr / 10``."""
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        progress = (step - self.warmup) / max(1, self.steps - self.warmup)
        return self.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def batch(rng: np.random.Generator, config: Config, size: int) -> tuple[np.ndarray, np.ndarray]:
    """One batch of ``size`` sequences of ``block_size + 1`` tokens (inputs and next-token targets) and their L."""
    return data.repeated_blocks(size, config.block_size + 1, config.vocab_size, BLOCK_LENGTHS, rng)


def train(config: Config, schedule: Schedule, *, init_seed: int = INIT_SEED, data_seed: int = DATA_SEED,
          log_every: int = 0) -> tuple[dict[str, np.ndarray], list[float]]:
    """Train from ``init_parameters(config, init_seed)`` with Adam; return the parameters and the loss of every step.

    The loss is the mean next-token cross-entropy (nats) over **all** targets
    of the batch (the unpredictable first block included, as a language model
    is trained).
    """
    params = init_parameters(config, init_seed)
    m = {name: np.zeros_like(value) for name, value in params.items()}
    v = {name: np.zeros_like(value) for name, value in params.items()}
    rng = np.random.default_rng(data_seed)
    losses = []
    for step in range(schedule.steps):
        tokens, _ = batch(rng, config, schedule.batch_size)
        loss, grads = loss_and_gradients(params, tokens, config)
        losses.append(loss)
        norm = global_norm(grads)
        shrink = min(1.0, schedule.clip / (norm + 1e-12))
        lr = schedule.learning_rate(step)
        t = step + 1
        for name in params:
            g = grads[name] * shrink
            m[name] = schedule.beta1 * m[name] + (1 - schedule.beta1) * g
            v[name] = schedule.beta2 * v[name] + (1 - schedule.beta2) * g * g
            m_hat = m[name] / (1 - schedule.beta1 ** t)
            v_hat = v[name] / (1 - schedule.beta2 ** t)
            params[name] = params[name] - lr * m_hat / (np.sqrt(v_hat) + schedule.eps)
        if log_every and (step % log_every == 0 or step == schedule.steps - 1):
            print(f"step {step:5d}  loss {np.mean(losses[-log_every:]):.4f}  lr {lr:.2e}  |g| {norm:.3f}",
                  flush=True)
    return params, losses


def evaluate(params: Mapping[str, np.ndarray], config: Config, n_sequences: int = 2000, seed: int = EVAL_SEED,
             head_mask=None) -> dict[str, float]:
    """Next-token accuracy (argmax) on fresh sequences: on the predictable targets, and on every target.

    Returns ``{"predictable_accuracy", "all_accuracy", "predictable_loss", "unpredictable_loss",
    "n_predictable"}`` (losses in nats per target); the sequences come from ``seed`` (not the training stream).
    """
    tokens, lengths = evaluation_sequences(config, n_sequences, seed)
    logits = np.concatenate([forward(params, chunk, config, head_mask=head_mask).logits
                             for chunk in evaluation_chunks(tokens)])
    return evaluation_scores(logits, tokens, lengths, config)


def evaluation_sequences(config: Config, n_sequences: int = 2000,
                         seed: int = EVAL_SEED) -> tuple[np.ndarray, np.ndarray]:
    """The sequences :func:`evaluate` scores: ``n_sequences`` of ``block_size + 1`` tokens from ``seed``, and L."""
    return batch(np.random.default_rng(seed), config, n_sequences)


def evaluation_chunks(tokens: np.ndarray) -> list[np.ndarray]:
    """The inputs of :func:`evaluation_sequences`' ``tokens`` in the chunks :func:`evaluate` runs the model on.

    Chunks of about 250 sequences bound the memory; a caller that must reproduce :func:`evaluate`'s numbers
    bit for bit runs the model on these same chunks.
    """
    return np.array_split(tokens[:, :-1], max(1, len(tokens) // 250))


def evaluation_scores(logits: np.ndarray, tokens: np.ndarray, lengths: np.ndarray,
                      config: Config) -> dict[str, float]:
    """:func:`evaluate`'s scores of ``logits`` (n, block_size, vocab_size) on ``tokens`` (n, block_size + 1)."""
    targets = tokens[:, 1:]
    predictable = data.predictable_targets(lengths, config.block_size + 1)
    correct = logits.argmax(axis=-1) == targets
    z = logits - logits.max(axis=-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    nll = -np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]
    return {"predictable_accuracy": float(correct[predictable].mean()), "all_accuracy": float(correct.mean()),
            "predictable_loss": float(nll[predictable].mean()), "unpredictable_loss": float(nll[~predictable].mean()),
            "n_predictable": int(predictable.sum())}


def main(argv=None) -> None:
    """Retrain and save the committed weights; print the time and the accuracy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=Schedule.steps)
    parser.add_argument("--out", default=str(WEIGHTS_FILE), help="where to write the .npz (default: the committed file)")
    args = parser.parse_args(argv)
    config, schedule = Config(), Schedule(steps=args.steps)
    start = time.perf_counter()
    params, losses = train(config, schedule, log_every=250)
    seconds = time.perf_counter() - start
    scores = evaluate(params, config)
    print(f"trained {schedule.steps} steps in {seconds:.0f} s; accuracy on the predictable targets of "
          f"{scores['n_predictable']} fresh targets: {scores['predictable_accuracy']:.4f}")
    out = os.path.abspath(args.out)
    summary = {
        "seeds": {"init": INIT_SEED, "data": DATA_SEED, "eval": EVAL_SEED},
        "task": {"name": "repeated random blocks", "block_lengths": list(BLOCK_LENGTHS), "bos": data.BOS,
                 "sequence_tokens": config.block_size + 1},
        "schedule": schedule.__dict__,
        "final_loss_mean_last_100_steps": float(np.mean(losses[-100:])),
        "first_loss": float(losses[0]),
        "evaluation": scores,
        "training_seconds": round(seconds, 1),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, NumPy {np.__version__}, "
                   f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}",
    }
    save_weights(params, config, path=__import__("pathlib").Path(out), training=summary,
                 training_path=__import__("pathlib").Path(out).with_name(TRAINING_FILE.name))


if __name__ == "__main__":
    main()
