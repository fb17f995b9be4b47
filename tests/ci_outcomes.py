"""Under ``CI=true`` (or 1, yes) a test that did not run is a failure: a test that does not run cannot fail.

A pytest plugin: tests/conftest.py takes its hooks, and ``-p ci_outcomes`` (with tests/ on the path) loads it
anywhere else, as tests/test_suite_rules.py does. Under CI it fails:

- a skipped test: ``pytest.skip()``, a ``skip`` or ``skipif`` mark, ``pytest.importorskip`` inside a test;
- a test file skipped whole, by ``pytest.importorskip`` or ``pytest.skip(allow_module_level=True)`` at its
  top: pytest then reports no test of it at all, only its skipped collection, which fails instead;
- a test that ends itself with ``pytest.xfail()``, which stops it where it stands, as a skip does, and one
  marked ``xfail(run=False)``, which never starts;
- a test marked ``xfail`` that passed (its mark says ``strict=False``; pyproject.toml's ``xfail_strict = true``
  fails the others everywhere): the mark hides a fixed bug, or one that was never there.

A test marked ``xfail`` that fails as expected stays an expected failure: it ran. Deselected tests (``-m``,
``-k``) are not looked at: the tier a run leaves out was chosen, not skipped.
"""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    """Whether ``$CI`` says this run is CI's."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def why_it_did_not_count(item: pytest.Item, report: pytest.TestReport) -> str | None:
    """Why ``report`` (a phase of ``item``) shows a test that did not really run or pass, or None."""
    xfail_reason = getattr(report, "wasxfail", None)
    if report.passed and xfail_reason is not None:
        return f"passed, though marked xfail ({xfail_reason or 'no reason given'}): remove the mark"
    if report.skipped and xfail_reason is None:
        return f"skipped ({skip_reason(report.longrepr)})"
    if report.skipped and xfail_reason.startswith("[NOTRUN]"):
        return f"never ran: its xfail mark says run=False ({xfail_reason})"
    if report.skipped and item.get_closest_marker("xfail") is None:
        return f"stopped by pytest.xfail() ({xfail_reason})"
    return None


def skip_reason(longrepr) -> str:
    """The reason of a skip's report: pytest keeps it as (file, line, "Skipped: reason")."""
    return longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if not in_ci():
        return
    why = why_it_did_not_count(item, report)
    if why is not None:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} {why}; under CI=true that counts as a failure"
        if hasattr(report, "wasxfail"):
            del report.wasxfail  # else it would still be listed as xfailed or xpassed


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    report = (yield).get_result()
    if in_ci() and report.skipped:
        report.outcome = "failed"
        report.longrepr = (f"{collector.nodeid or collector.path} was skipped whole ({skip_reason(report.longrepr)}), "
                           "so none of its tests ran; under CI=true that counts as a failure")
