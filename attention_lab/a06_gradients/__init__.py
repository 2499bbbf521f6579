"""Assignment 6, gradients through the softmax and attention: self-checks, the visual, the given helper."""
