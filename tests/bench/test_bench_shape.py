"""Every benchmark subcommand is a package of the same shape, registered by bench/cli.py and kept independent of
the others by the import contract, so a new one cannot quietly lean on another's modules."""
from __future__ import annotations

import tomllib
from pathlib import Path

import autoglm.bench
from autoglm.bench.cli import BENCH_COMMANDS

BENCH = Path(autoglm.bench.__file__).parent
SHARED = {"lib", "results", "figures"}  # below the subcommands, and the docs' figures above them
PARTS = ("command.py", "measure.py", "report.py")  # options and a thin handler; the run; its tables and results
NOTHING_MEASURED = {"make_model"}  # writes a checkpoint: only its options and the files it writes
PYPROJECT = BENCH.parents[1] / "pyproject.toml"


def subcommand_packages() -> set[str]:
    return {path.parent.name for path in BENCH.glob("*/__init__.py")} - SHARED


def test_each_subcommand_package_registers_itself_from_its_command_module() -> None:
    registered = {(add.__module__, add.__name__) for add in BENCH_COMMANDS}
    expected = {(f"autoglm.bench.{name}.command", f"add_{name}_command") for name in subcommand_packages()}
    assert registered == expected


def test_each_subcommand_package_has_the_same_parts_under_the_same_names() -> None:
    missing = {name: [part for part in PARTS if not (BENCH / name / part).is_file()]
               for name in subcommand_packages() - NOTHING_MEASURED}
    assert {name: parts for name, parts in missing.items() if parts} == {}
    assert all((BENCH / name / "command.py").is_file() for name in NOTHING_MEASURED)


def test_the_import_contract_keeps_every_subcommand_package_independent() -> None:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    independent = next(contract["modules"] for contract in contracts if contract["type"] == "independence"
                       and all(module.startswith("autoglm.bench.") for module in contract["modules"]))
    assert set(independent) == {f"autoglm.bench.{name}" for name in subcommand_packages()}
