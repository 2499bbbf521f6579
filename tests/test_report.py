"""The grader report (`make report`) meets every goal and the committed copy is current."""

from autograder.examples import report


def test_the_report_meets_every_goal_and_the_committed_copy_is_current(graded_class):
    _, results, outcomes = graded_class
    built = report.build_from(results, outcomes)
    missed = [row for rows in (built.correct, built.mistakes, built.hostile, built.end_to_end)
              for row in rows if not row.ok]
    assert not missed, "\n".join(f"{r.assignment} {r.name}: {r.detail}" for r in missed)
    assert report.REPORT.read_text() == report.render(built), "reports/grader_report.md is stale: run `make report`"
