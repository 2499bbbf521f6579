"""Assignment 7 (online softmax and tiled attention): self-checks, the memory plot and the tile explorer."""
