"""The rule "under CI=true a test that did not run is a failure" (tests/ci_outcomes.py), run on a folder of tiny
tests in a pytest of its own: each way of not running, with CI=true and without."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parent

TINY_TESTS = {
    "test_import_skipped.py": """
        import pytest
        pytest.importorskip("no_such_module_anywhere")

        def test_never_collected():
            pass
        """,
    "test_module_skipped.py": """
        import pytest
        pytest.skip("not on this machine", allow_module_level=True)

        def test_never_collected():
            pass
        """,
    "test_cases.py": """
        import pytest

        def test_runs():
            pass

        @pytest.mark.skip(reason="marked")
        def test_marked_skip():
            pass

        def test_skips_itself():
            pytest.skip("called")

        def test_xfails_itself():
            pytest.xfail("gave up")

        @pytest.mark.xfail(reason="a bug", strict=False)
        def test_lenient_xfail_that_passes():
            pass

        @pytest.mark.xfail(reason="a bug")
        def test_xfail_that_passes():
            pass

        @pytest.mark.xfail(reason="a bug")
        def test_xfail_that_fails():
            assert False
        """,
}


def outcomes(folder: Path, ci: str) -> tuple[int, dict[str, str]]:
    """pytest's exit status on ``folder`` with $CI set to ``ci``, and each test's (or file's) outcome."""
    for name, source in TINY_TESTS.items():
        (folder / name).write_text(textwrap.dedent(source))
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(TESTS), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    # the project's xfail_strict (pyproject.toml, checked below) without its other options
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "ci_outcomes", "-o", "xfail_strict=true", "-rA",
                          "--continue-on-collection-errors", "-p", "no:cacheprovider", str(folder)],
                         cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    found = {}
    for outcome, node, rest in re.findall(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (\S+)(.*)$", run.stdout,
                                          re.MULTILINE):
        if outcome == "SKIPPED":  # "SKIPPED [1] test_cases.py:7: marked": the place, not the test's name
            node = rest.split()[0].split(":")[0] + "::" + rest.split(": ", 1)[1]
        found[node] = outcome
    return run.returncode, found


def test_under_ci_every_test_that_did_not_run_fails(tmp_path):
    status, found = outcomes(tmp_path, "true")
    assert status == 1 and found == {
        "test_import_skipped.py": "ERROR", "test_module_skipped.py": "ERROR",
        "test_cases.py::test_runs": "PASSED",
        # a skip mark acts before the test starts: its failure is the setup's, an error
        "test_cases.py::test_marked_skip": "ERROR", "test_cases.py::test_skips_itself": "FAILED",
        "test_cases.py::test_xfails_itself": "FAILED",
        "test_cases.py::test_lenient_xfail_that_passes": "FAILED", "test_cases.py::test_xfail_that_passes": "FAILED",
        "test_cases.py::test_xfail_that_fails": "XFAIL",
    }, found


def test_outside_ci_a_skip_is_a_skip_and_a_passing_xfail_still_fails(tmp_path, pytestconfig):
    status, found = outcomes(tmp_path, "")
    assert status == 1 and found == {
        "test_import_skipped.py::could not import 'no_such_module_anywhere': No module named "
        "'no_such_module_anywhere'": "SKIPPED",
        "test_module_skipped.py::not on this machine": "SKIPPED",
        "test_cases.py::test_runs": "PASSED",
        "test_cases.py::marked": "SKIPPED", "test_cases.py::called": "SKIPPED",
        "test_cases.py::test_xfails_itself": "XFAIL",
        "test_cases.py::test_lenient_xfail_that_passes": "XPASS", "test_cases.py::test_xfail_that_passes": "FAILED",
        "test_cases.py::test_xfail_that_fails": "XFAIL",
    }, found
    assert pytestconfig.getini("xfail_strict") is True  # pyproject.toml: as the runs above had it
