"""A tiny library for testing the build machinery without compiling the real kernels (minutes)."""
from __future__ import annotations

from pathlib import Path

from autoglm.kernels.kernel_spec import KernelSpec

NAME = "fake_kernels"
_SOURCE = """
{include}
#include <Python.h>
static PyObject* answer(PyObject*, PyObject*) {{ return PyLong_FromLong({answer}); }}
static PyMethodDef methods[] = {{{{"answer", answer, METH_NOARGS, "a constant"}}, {{nullptr, nullptr, 0, nullptr}}}};
static PyModuleDef module = {{PyModuleDef_HEAD_INIT, "{name}", nullptr, -1, methods}};
PyMODINIT_FUNC PyInit_{name}() {{ return PyModule_Create(&module); }}
"""


_SLOW_HEADER = "slow.h"


def fake_spec(folder: Path, answer: int = 42, slow: bool = False) -> KernelSpec:
    """A library whose ``answer()`` returns ``answer``; ``slow`` includes torch's headers (seconds to compile).

    The slow part sits in a header the spec does not hash, so ``make_quick`` can take it out
    without changing the build's key: a test kills a slow build, then waits only for a quick one.
    """
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "fake.cpp"
    include = ""
    if slow:
        include = f'#include "{_SLOW_HEADER}"'
        (folder / _SLOW_HEADER).write_text("#include <torch/extension.h>\n")
    source.write_text(_SOURCE.format(include=include, answer=answer, name=NAME))
    return KernelSpec(name=NAME, sources=(str(source),))


def make_quick(spec: KernelSpec) -> None:
    """Let the next build of a ``slow`` spec compile in a moment, under the same key."""
    (Path(spec.sources[0]).parent / _SLOW_HEADER).write_text("")
