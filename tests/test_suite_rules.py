"""The suite's own rules, each in a pytest of its own: under CI=true a test that did not run is a failure
(tests/ci_outcomes.py), on a folder of tiny tests, each way of not running, with CI=true and without; and
without the shared data folder, pytest stops with one line that says where it must be (tests/conftest.py)."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def pytest_env(**variables) -> dict:
    """This process's environment for a pytest of its own: none of this run's own variables (an xdist worker's
    PYTEST_XDIST_WORKER, say), and ``variables`` on top."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}, **variables}

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

        @pytest.mark.xfail(reason="would hang", run=False)
        def test_xfail_not_run():
            pass
        """,
}


def outcomes(folder: Path, ci: str) -> tuple[int, dict[str, str]]:
    """pytest's exit status on ``folder`` with $CI set to ``ci``, and each test's (or file's) outcome."""
    for name, source in TINY_TESTS.items():
        (folder / name).write_text(textwrap.dedent(source))
    env = pytest_env(CI=ci, PYTHONPATH=str(TESTS), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    # the project's xfail_strict (pyproject.toml, checked below) without its other options
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "ci_outcomes", "-o", "xfail_strict=true", "-rA",
                          "--continue-on-collection-errors", "-p", "no:cacheprovider", str(folder)],
                         cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    found = {}
    # "XFAIL at setup of test_cases.py::test_x - ...": the phase is left out
    lines = run.stdout.replace(" at setup of ", " ")
    for outcome, node, rest in re.findall(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (\S+)(.*)$", lines,
                                          re.MULTILINE):
        if outcome == "SKIPPED":  # "SKIPPED [1] test_cases.py:7: marked": the place, not the test's name
            node = rest.split()[0].split(":")[0] + "::" + rest.split(": ", 1)[1]
        found[node] = outcome
    return run.returncode, found


# Each tiny test's outcome: (its node under CI=true, the outcome), (its node outside CI, the outcome). A skip
# outside CI is reported by its reason, not its test.
OUTCOMES = [
    (("test_import_skipped.py", "ERROR"), ("test_import_skipped.py::could not import 'no_such_module_anywhere': "
                                           "No module named 'no_such_module_anywhere'", "SKIPPED")),
    (("test_module_skipped.py", "ERROR"), ("test_module_skipped.py::not on this machine", "SKIPPED")),
    (("test_cases.py::test_runs", "PASSED"), ("test_cases.py::test_runs", "PASSED")),
    # a skip mark acts before the test starts: under CI its failure is the setup's, an error
    (("test_cases.py::test_marked_skip", "ERROR"), ("test_cases.py::marked", "SKIPPED")),
    (("test_cases.py::test_skips_itself", "FAILED"), ("test_cases.py::called", "SKIPPED")),
    (("test_cases.py::test_xfails_itself", "FAILED"), ("test_cases.py::test_xfails_itself", "XFAIL")),
    (("test_cases.py::test_lenient_xfail_that_passes", "FAILED"),
     ("test_cases.py::test_lenient_xfail_that_passes", "XPASS")),
    (("test_cases.py::test_xfail_that_passes", "FAILED"), ("test_cases.py::test_xfail_that_passes", "FAILED")),
    (("test_cases.py::test_xfail_that_fails", "XFAIL"), ("test_cases.py::test_xfail_that_fails", "XFAIL")),
    (("test_cases.py::test_xfail_not_run", "ERROR"), ("test_cases.py::test_xfail_not_run", "XFAIL")),
]


@pytest.mark.parametrize("ci", ["true", ""], ids=["under_ci", "outside_ci"])
def test_under_ci_every_test_that_did_not_run_fails_and_a_passing_xfail_fails_everywhere(tmp_path, pytestconfig, ci):
    status, found = outcomes(tmp_path, ci)
    assert status == 1 and found == dict(under if ci else outside for under, outside in OUTCOMES), found
    assert pytestconfig.getini("xfail_strict") is True  # pyproject.toml: as the runs above had it


def test_the_suite_runs_with_the_rules_hooks():
    """The runs above load tests/ci_outcomes.py by -p; the suite itself has them through conftest.py."""
    import ci_outcomes
    import conftest

    assert conftest.pytest_runtest_makereport is ci_outcomes.pytest_runtest_makereport
    assert conftest.pytest_make_collect_report is ci_outcomes.pytest_make_collect_report


def test_without_the_shared_folder_pytest_stops_with_one_line(tmp_path):
    """Where conftest.py looks for it ($TOKENIZER_SHARED_DIR) holds nothing: one line naming the folder and what it
    holds, before any test file is read (it says so as itself, not as an ImportError of conftest.py)."""
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "tests/test_bpe.py"],
                         cwd=TESTS.parent, env=pytest_env(TOKENIZER_SHARED_DIR=str(tmp_path)), capture_output=True,
                         text=True, timeout=120)
    said = (run.stdout + run.stderr).strip()  # pytest adds an empty line
    assert run.returncode == 4 and "\n" not in said, said  # 4: pytest's "usage error"
    assert said.startswith(f"ERROR: the tests need the shared data folder at {tmp_path} (missing: "), said
    assert "encodings/" in said and "corpus/" in said and "TOKENIZER_SHARED_DIR" in said


GROUPED_TESTS = """
    import os
    import pytest

    pytestmark = pytest.mark.xdist_group("one worker")

    @pytest.mark.parametrize("i", range(6))
    def test_says_its_worker(i):
        with open("workers.txt", "a") as f:
            f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    """


def test_an_xdist_group_runs_on_one_worker(tmp_path):
    """The suite counts on it (pyproject.toml's addopts, --dist loadgroup): the Ray tests share one local cluster,
    and test_half.py one compile of its kernel. Two files of one group, on two workers: every test on the same one.
    (Under pytest 9.2 pytest-xdist 3.8 groups nothing, and says nothing: pyproject.toml keeps pytest below it.)"""
    for name in ("test_first.py", "test_second.py"):
        (tmp_path / name).write_text(textwrap.dedent(GROUPED_TESTS))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"]
    run = subprocess.run(command, cwd=tmp_path, env=pytest_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 12 and len(set(workers)) == 1, workers
