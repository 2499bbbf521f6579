"""Assignment 6, gradients through the softmax and attention: ``spec``, ``reference``, ``bank`` (+ the experiment)."""
