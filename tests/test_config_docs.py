"""docs/SETTINGS.md's reference tables are those the settings class writes, and a stale one says how to fix it."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoglm.config import AutoGLMConfig
from autoglm.config.reference import BEGIN, END, REGENERATE, main, render_document, render_reference

SETTINGS_DOC = Path(__file__).resolve().parent.parent / "docs" / "SETTINGS.md"


def test_the_repository_settings_doc_is_up_to_date(capsys):
    assert main([str(SETTINGS_DOC), "--check"]) == 0, capsys.readouterr().out


def test_a_stale_reference_is_caught_with_the_command_that_fixes_it(tmp_path, capsys):
    document = tmp_path / "SETTINGS.md"
    shutil.copy(SETTINGS_DOC, document)
    stale = document.read_text().replace("| `block_size` | `--block-size` |", "| `block_size` | `--blocks` |")
    document.write_text(stale)
    assert main([str(document), "--check"]) == 1
    out = capsys.readouterr().out
    assert "-| `block_size` | `--blocks` |" in out and REGENERATE in out
    assert main([str(document)]) == 0
    assert main([str(document), "--check"]) == 0
    assert document.read_text() == SETTINGS_DOC.read_text()


def test_every_setting_has_one_row_with_its_flag_variable_and_default():
    reference = render_reference()
    for name in AutoGLMConfig.field_names():
        rows = [line for line in reference.splitlines() if line.startswith(f"| `{name}` |")]
        assert len(rows) == 1, name
        assert f"`--{name.replace('_', '-')}" in rows[0] and f"`AUTOGLM_{name.upper()}`" in rows[0]
    assert "| `block_size` | `--block-size` | `AUTOGLM_BLOCK_SIZE` | integer >= 1, <= 256 | `16` |" in reference
    assert "| `enable_prefix_caching` | `--enable-prefix-caching, --no-enable-prefix-caching` |" in reference
    assert "| `dtype` | `--dtype` | `AUTOGLM_DTYPE` | `auto`, `float32`, `bfloat16`, `float16` | `auto` |" in reference


def test_the_written_flags_and_variables_are_the_ones_the_settings_reader_takes():
    """Every flag a row shows sets its setting on ``autoglm serve``; a variable spelled as the rows spell it is read."""
    from autoglm.cli.main import build_parser

    parser = build_parser()
    for name, field in AutoGLMConfig.model_fields.items():
        flag = "--" + name.replace("_", "-")
        args, unknown = parser.parse_known_args(["serve", flag] + ([] if field.annotation is bool else ["1"]))
        assert unknown == [] and getattr(args, name) is not None, flag
    assert AutoGLMConfig.from_sources(env={"AUTOGLM_BLOCK_SIZE": "32"}).block_size == 32


def test_prose_around_the_markers_is_kept_and_markers_are_required():
    text = f"# Title\n\nHand-written.\n\n{BEGIN}\nstale\n{END}\n\nAfter.\n"
    rendered = render_document(text)
    assert rendered.startswith("# Title\n\nHand-written.\n\n") and rendered.endswith(f"{END}\n\nAfter.\n")
    assert "stale" not in rendered and "### Model settings" in rendered
    with pytest.raises(ValueError, match="settings-reference"):
        render_document("no markers here\n")
