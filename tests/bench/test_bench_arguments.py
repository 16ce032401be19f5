"""What the benchmark commands share: the engine benchmarks' last options, the server benchmarks' handling of a
missing extra, and the step that prints a summary and writes the results file."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autoglm.bench.cli import main
from autoglm.bench.results.report import print_and_write
from autoglm.cli.main import build_parser
from autoglm.cli.settings import config_from_args

ENGINE_BENCHMARKS = ("throughput", "latency", "speculative", "structured")
SERVER_BENCHMARKS = ("serve", "soak", "tenants", "swap")


def test_listing_the_benchmarks_loads_none_of_them() -> None:
    """Every subcommand registers its options only; torch and the HTTP client load when one runs."""
    probe = ("import sys\n"
             "from autoglm.cli.main import build_parser\n"
             "build_parser().parse_args(['bench', 'throughput'])\n"
             "print(sorted(name for name in ('torch', 'transformers', 'httpx') if name in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("command", ENGINE_BENCHMARKS)
def test_engine_benchmarks_end_with_a_results_file_and_the_benchmark_defaults(command: str, tmp_path: Path) -> None:
    args = build_parser().parse_args(["bench", command, "--output-json", str(tmp_path / "out.json")])
    assert args.output_json == tmp_path / "out.json"
    assert config_from_args(args).dtype == "bfloat16"


@pytest.mark.parametrize("command", SERVER_BENCHMARKS)
def test_server_benchmarks_without_httpx_name_the_extra(command: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)  # what an install without the bench extra looks like
    required = ["--model", str(tmp_path)] if command == "swap" else []
    assert main([command, *required]) == 2
    assert f"autoglm bench {command} needs httpx: pip install 'open-autoglm[bench]'" in capsys.readouterr().err


def test_print_and_write_writes_only_when_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = {"rate": 1.5}
    print_and_write(["first line", "second line"], document, None)
    assert capsys.readouterr().out == "first line\nsecond line\n"
    assert not list(tmp_path.iterdir())
    print_and_write(["summary"], document, tmp_path / "results" / "run.json")
    assert json.loads((tmp_path / "results" / "run.json").read_text()) == document
