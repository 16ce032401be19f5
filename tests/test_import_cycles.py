"""No import circle in the package, type-only imports included: each circle is a knot that no layer
order can untie, and one that only a type checker follows still ties two modules' designs together."""
from __future__ import annotations

import grimp

def import_circles(graph: grimp.ImportGraph) -> list[set[str]]:
    """The strongly connected components of more than one module: modules that each import the others,
    directly or not."""
    circles: list[set[str]] = []
    seen: set[str] = set()
    for module in sorted(graph.modules):
        if module in seen:
            continue
        circle = {module} | (graph.find_upstream_modules(module) & graph.find_downstream_modules(module))
        seen |= circle
        if len(circle) > 1:
            circles.append(circle)
    return circles


def describe(graph: grimp.ImportGraph, circle: set[str]) -> str:
    """Each import between the circle's modules, with its line, so the one to cut can be chosen."""
    lines = [" <-> ".join(sorted(circle))]
    for importer in sorted(circle):
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & circle):
            line_numbers = [detail["line_number"] for detail in
                            graph.get_import_details(importer=importer, imported=imported)]
            lines.append(f"  {importer} -> {imported} (line {', '.join(map(str, line_numbers))})")
    return "\n".join(lines)


def test_no_module_of_the_package_imports_itself_through_others():
    graph = grimp.build_graph("autoglm", exclude_type_checking_imports=False, cache_dir=None)
    circles = import_circles(graph)
    assert not circles, "import circles:\n" + "\n".join(describe(graph, circle) for circle in circles)


def test_a_circle_is_found_and_named_with_its_imports():
    graph = grimp.ImportGraph()
    for importer, imported in [("pkg.a", "pkg.b"), ("pkg.b", "pkg.c"), ("pkg.c", "pkg.a"), ("pkg.c", "pkg.d")]:
        graph.add_import(importer=importer, imported=imported, line_number=3, line_contents=f"import {imported}")
    assert import_circles(graph) == [{"pkg.a", "pkg.b", "pkg.c"}]
    assert describe(graph, {"pkg.a", "pkg.b", "pkg.c"}).splitlines() == [
        "pkg.a <-> pkg.b <-> pkg.c",
        "  pkg.a -> pkg.b (line 3)",
        "  pkg.b -> pkg.c (line 3)",
        "  pkg.c -> pkg.a (line 3)",
    ]
