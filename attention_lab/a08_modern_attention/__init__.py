"""Assignment 8 (RoPE, ALiBi, grouped-query attention): self-checks and the explorers."""
