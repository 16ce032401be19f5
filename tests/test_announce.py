"""Long waits are said where the user looks: the log a program set up, else stderr (a bare script's console)."""
from __future__ import annotations

import logging
import subprocess
import sys

from autoglm.progress import announce


def test_a_script_that_set_up_no_logging_sees_the_line_on_stderr():
    code = "import logging; from autoglm.progress import announce; announce(logging.getLogger('autoglm.x'), 'hello')"
    finished = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert finished.stderr == "hello\n" and finished.stdout == ""


def test_a_program_that_set_up_logging_gets_an_info_line_and_no_stray_print(caplog, capsys):
    with caplog.at_level(logging.INFO, logger="autoglm"):
        announce(logging.getLogger("autoglm.x"), "hello")
    assert [(record.levelno, record.getMessage()) for record in caplog.records] == [(logging.INFO, "hello")]
    assert capsys.readouterr().err == ""
