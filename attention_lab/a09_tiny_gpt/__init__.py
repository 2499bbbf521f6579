"""Assignment 9 (the tiny-GPT capstone): the committed weights, self-checks and the head explorer."""
