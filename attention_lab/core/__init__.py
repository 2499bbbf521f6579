"""What every assignment of the student package shares: calling learners' code, one value codec, one comparison
library (the grader uses it too), self-check helpers, the explorer base, plots and the grading probe."""

#: Environment every kernel of the course runs with: on 2 cores, OpenBLAS threads oversubscribe and make the
#: course's small matrix products 10–50× slower (``make lab``, grading and the test suite all set it).
KERNEL_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1"}
