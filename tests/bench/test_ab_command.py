"""``autoglm bench ab`` end to end: two revisions of a throwaway repository, each checked out
into a temporary worktree and benchmarked in turn on a tiny model; failures name the revision
and the round, and no worktree outlives the command."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import autoglm
from autoglm.bench.ab.checkouts import (Checkout, Revision, repository_root, resolve_revision, temporary_worktree,
                                        working_tree_revision)
from autoglm.bench.ab.errors import ABError
from autoglm.bench.ab.served_side import with_served_tokenizer
from autoglm.bench.ab.sides import engine_only_arguments
from autoglm.bench.cli import main
from autoglm.bench.figures.render import render_document
from tests.tiny_models import make_tiny_checkpoint

pytestmark = pytest.mark.timeout(600)  # a loose bound: a hung benchmark subprocess fails the test, not the run
SECOND_COMMIT_KEY = "benchmarked_revision"  # what the second commit adds to every results file's machine
TINY_SERVE = ["--dataset", "random", "--random-input-len", "8", "--random-output-len", "4", "--num-prompts", "2",
              "--request-rate", "inf"]
TINY_THROUGHPUT = ["--workload", "fixed", "--num-prompts", "2", "--length-scale", "0.0625", "--num-threads", "1"]


def git(repository: Path, *arguments: str) -> str:
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    return subprocess.run(["git", *identity, "-C", str(repository), *arguments], check=True,
                          capture_output=True, text=True).stdout.strip()


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path} no longer holds {old!r}: update this test's edit"
    path.write_text(text.replace(old, new))


def commit_all(repository: Path, subject: str, tag: str) -> None:
    git(repository, "add", "-A")
    git(repository, "commit", "--quiet", "-m", subject)
    git(repository, "tag", tag)


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    """Tags ``first``; ``second``, whose results files say so; ``broken``, whose throughput fails;
    ``server-broken``, whose server fails to start.
    HEAD and the working tree are ``second``. None of them builds the CPU kernels, which would
    take minutes in each fresh worktree and which the command under test does not need."""
    folder = tmp_path_factory.mktemp("ab-repository")
    package = folder / "autoglm"
    shutil.copytree(Path(autoglm.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    edit(package / "kernels" / "cpu_extension.py", "REQUIRED_CPU_FLAGS = (", 'REQUIRED_CPU_FLAGS = ("no such flag", ')
    git(folder, "init", "--quiet")
    commit_all(folder, "the package as it is", "first")
    edit(package / "bench" / "results" / "report.py", '"python_version": platform.python_version(),',
         f'"python_version": platform.python_version(), "{SECOND_COMMIT_KEY}": "second",')
    commit_all(folder, "results name the second revision", "second")
    edit(package / "bench" / "throughput" / "measure.py", "def run_throughput(settings: ThroughputSettings)",
         'raise RuntimeError("broken on purpose")\n\n\ndef run_throughput(settings: ThroughputSettings)')
    commit_all(folder, "throughput breaks", "broken")
    git(folder, "reset", "--quiet", "--hard", "second")
    edit(package / "server" / "app.py", "def build_app(", 'raise RuntimeError("server broken on purpose")\n\n\ndef build_app(')
    commit_all(folder, "the server breaks", "server-broken")
    git(folder, "reset", "--quiet", "--hard", "second")
    return folder


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return make_tiny_checkpoint("qwen2", tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def temporary_folder(tmp_path, monkeypatch) -> Path:
    """Where the command makes its temporary folder, to see that it leaves nothing behind."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def worktrees(repository: Path) -> list[str]:
    return [line for line in git(repository, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")]


def test_ab_runs_each_revision_in_turn_and_records_both(repository, tiny_model, temporary_folder, tmp_path,
                                                        capsys):
    output = tmp_path / "ab.json"
    code = main(["ab", "--repo", str(repository), "--before", "first", "--after", "second", "--rounds", "2",
                 "--min-ratio", "0.01", "--output-json", str(output),
                 "--", "throughput", "--model", str(tiny_model), *TINY_THROUGHPUT])
    printed = capsys.readouterr().out
    assert code == 0, printed
    document = json.loads(output.read_text())
    for side, tag, subject in (("before", "first", "the package as it is"),
                               ("after", "second", "results name the second revision")):
        assert document["revisions"][side] == {"name": tag, "commit": git(repository, "rev-parse", tag),
                                               "subject": subject, "uncommitted_changes": False}
        assert document["arguments"][side][-2:] == ["--baseline", "none"]  # the engine alone
    assert document["benchmark"] == "throughput" and document["machine"]["cpu_count"]
    assert len(document["rounds"]) == 2
    for results in document["rounds"]:
        assert SECOND_COMMIT_KEY not in results["before"]["machine"]  # each side ran its own revision
        assert results["after"]["machine"][SECOND_COMMIT_KEY] == "second"
        assert results["before"]["settings"]["baseline"] is None
        assert set(results["after"]["workloads"]["fixed"]) == {"autoglm"}
    progress = [printed.index(f"[round {number} of 2, {label}")
                for number in (1, 2) for label in ("A (before)", "B (after)")]
    assert progress == sorted(progress)
    assert "fixed: output tok/s" in printed and "fixed: total tok/s" in printed
    assert worktrees(repository) == [f"worktree {repository}"]
    assert list(temporary_folder.iterdir()) == []
    (tmp_path / "PERFORMANCE.md").write_text("<!-- figures:ab ab.json -->\n<!-- /figures -->\n")
    assert "| fixed: output tok/s |" in render_document((tmp_path / "PERFORMANCE.md").read_text(), tmp_path)


def test_a_failing_side_names_its_revision_and_round(repository, tiny_model, temporary_folder, capsys):
    code = main(["ab", "--repo", str(repository), "--before", "broken", "--rounds", "2",
                 "--", "throughput", "--model", str(tiny_model), *TINY_THROUGHPUT])
    error = capsys.readouterr().err
    assert code == 2
    assert "the benchmark failed in round 1 of 2, A (before), on broken (" in error
    assert "throughput breaks" in error and "RuntimeError: broken on purpose" in error
    assert worktrees(repository) == [f"worktree {repository}"]
    assert list(temporary_folder.iterdir()) == []


def server_args(model: Path) -> str:
    return f"--model {model} --num-threads 1 --kv-cache-memory 8MiB --max-context-len 128"


def test_serve_runs_each_revisions_own_server_with_the_same_load(repository, tiny_model, temporary_folder, tmp_path,
                                                                   capsys):
    output = tmp_path / "ab.json"
    code = main(["ab", "--repo", str(repository), "--before", "first", "--after", "second", "--rounds", "1",
                 "--min-ratio", "0.01", "--output-json", str(output), "--server-args", server_args(tiny_model),
                 "--", "serve", *TINY_SERVE])
    printed = capsys.readouterr().out
    assert code == 0, printed
    document = json.loads(output.read_text())
    assert document["benchmark"] == "serve" and document["server_args"] == server_args(tiny_model)
    (results,) = document["rounds"]
    urls = {side: results[side]["settings"]["base_url"] for side in ("before", "after")}
    assert urls["before"] != urls["after"]  # each side had a server of its own
    for side in ("before", "after"):
        (run,) = results[side]["runs"]
        assert run["metrics"]["completed"] == 2 and run["metrics"]["failed"] == 0
    assert "rate inf: mean TTFT" in printed and "rate inf: output tok/s" in printed
    assert worktrees(repository) == [f"worktree {repository}"]
    assert list(temporary_folder.iterdir()) == []


def test_a_server_that_does_not_start_names_its_revision_and_why(repository, tiny_model, temporary_folder, capsys):
    code = main(["ab", "--repo", str(repository), "--before", "server-broken", "--rounds", "1",
                 "--server-args", server_args(tiny_model), "--", "serve", *TINY_SERVE])
    error = capsys.readouterr().err
    assert code == 2
    assert "the server did not start in round 1 of 1, A (before), on server-broken (" in error
    assert "RuntimeError: server broken on purpose" in error
    assert worktrees(repository) == [f"worktree {repository}"]
    assert list(temporary_folder.iterdir()) == []


def test_an_unknown_revision_is_named(repository, capsys):
    assert main(["ab", "--repo", str(repository), "--before", "no-such-tag", "--", "latency"]) == 2
    assert f"{repository} has no commit 'no-such-tag'" in capsys.readouterr().err


def test_the_working_tree_records_its_commit_and_whether_it_changed(repository):
    assert working_tree_revision(repository) == Revision(
        "working tree", git(repository, "rev-parse", "second"), "results name the second revision")
    changed = repository / "autoglm" / "__init__.py"
    changed.write_text(changed.read_text() + "\n")
    try:
        assert working_tree_revision(repository).uncommitted_changes
    finally:
        git(repository, "checkout", "--", str(changed))


def test_a_worktree_is_removed_on_ctrl_c(repository, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with temporary_worktree(repository, resolve_revision(repository, "first"), tmp_path / "a") as checkout:
            assert (checkout.path / "autoglm" / "cli" / "main.py").is_file()
            raise KeyboardInterrupt
    assert not (tmp_path / "a").exists()
    assert worktrees(repository) == [f"worktree {repository}"]


def test_a_folder_outside_git_is_refused(tmp_path):
    with pytest.raises(ABError, match="is not inside a git checkout; pass --repo"):
        repository_root(tmp_path)


@pytest.mark.parametrize("benchmark", [["throughput", "--baseline", "transformers"], ["roofline", "--quick"]])
def test_the_baseline_is_left_as_given_or_where_the_command_has_none(repository, benchmark):
    working_tree = Checkout(working_tree_revision(repository), repository, extensions_dir=None)
    assert engine_only_arguments(working_tree, benchmark) == benchmark


@pytest.mark.parametrize("arguments, server_args, expected", [
    (["serve"], "--model /m --port 1", ["serve", "--tokenizer", "/m"]),
    (["serve"], "--model=/m --tokenizer /t", ["serve", "--tokenizer", "/t"]),
    (["serve", "--tokenizer=/own"], "--model /m", ["serve", "--tokenizer=/own"]),
    (["serve"], "--port 1", ["serve"]),
])
def test_serve_draws_prompts_with_the_tokenizer_of_the_served_folder(arguments, server_args, expected):
    assert with_served_tokenizer(arguments, server_args) == expected
