#!/usr/bin/env python3
"""Halide stays out of the DSL and out of attnforge's installed headers.

Fails when a header under dsl/ includes Halide.h, or when a header cmake/install.cmake installs
includes it, directly or through any of the project's own headers it includes (followed to the
end). A user's program includes these headers without Halide's; only the libraries use Halide
(generators/, and runtime/'s and tuner/'s sources with the headers only they include).

    halide_free_headers.py SOURCE_DIR
"""
import re
import sys
import tempfile
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)
# A header file named in an install(FILES ...) of cmake/install.cmake: runtime/jit.hpp, ...
INSTALLED = re.compile(r'\b[\w/]+\.(?:hpp|h)\b')


def includes(header: Path):
    """(is_quoted, name) of each #include in the file."""
    return [(quote == '"', name) for quote, name in INCLUDE.findall(header.read_text(encoding="utf-8"))]


def resolve(name: str, including: Path, root: Path):
    """The project's file a quoted #include names (beside the including file, else from the
    source root, as the project's include path has it), or None for another project's."""
    for candidate in (including.parent / name, root / name):
        if candidate.is_file():
            return candidate.resolve()
    return None


def halide_path(header: Path, root: Path):
    """The chain of the project's headers from `header` to one including Halide.h, or None."""
    seen = set()

    def walk(h: Path, chain):
        if h in seen:
            return None
        seen.add(h)
        for quoted, name in includes(h):
            if Path(name).name == "Halide.h":
                return chain + [h, Path(name)]
            found = resolve(name, h, root) if quoted else None
            if found is not None:
                path = walk(found, chain + [h])
                if path:
                    return path
        return None

    return walk(header.resolve(), [])


def public_headers(root: Path):
    """Every header under dsl/ and every header file cmake/install.cmake names."""
    named = INSTALLED.findall((root / "cmake" / "install.cmake").read_text(encoding="utf-8"))
    headers = sorted(root.glob("dsl/**/*.hpp")) + [root / n for n in sorted(set(named))]
    missing = [str(h) for h in headers if not h.is_file()]
    if missing:
        sys.exit("cmake/install.cmake installs files that do not exist: " + ", ".join(missing))
    return headers


def check(root: Path):
    """The problems found under `root`, one line each."""
    problems = []
    for header in public_headers(root):
        path = halide_path(header, root)
        if path:
            shown = " -> ".join(str(p.relative_to(root.resolve())) if p.is_absolute() else str(p) for p in path)
            problems.append(f"{header.relative_to(root)} includes Halide.h: {shown}")
    return problems


def self_test():
    """The check must be able to fail: a small tree with a public header that reaches Halide.h
    through two of the project's headers, and a DSL header that includes it directly."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, text in {
            "cmake/install.cmake": "install(FILES runtime/api.hpp runtime/clean.hpp DESTINATION x)\n",
            "runtime/api.hpp": '#include <vector>\n#include "detail.hpp"\n',
            "runtime/detail.hpp": '#include "generators/lowering.hpp"\n',
            "generators/lowering.hpp": "#include <Halide.h>\n",
            "runtime/clean.hpp": '#include "runtime/api_types.hpp"\n',
            "runtime/api_types.hpp": "#include <cstdint>\n",
            "dsl/node.hpp": '#include "Halide.h"\n',
        }.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
        found = sorted(p.split(" ")[0] for p in check(root))
        if found != ["dsl/node.hpp", "runtime/api.hpp"]:
            sys.exit(f"self-test: expected dsl/node.hpp and runtime/api.hpp to be found, got {found}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    self_test()
    root = Path(sys.argv[1])
    headers = public_headers(root)
    if not any(h.as_posix().endswith("runtime/jit.hpp") for h in headers):
        sys.exit("cmake/install.cmake names no runtime/jit.hpp: its list was not read")
    problems = check(root)
    for p in problems:
        print(p)
    print(f"{len(headers)} public headers checked, {len(problems)} include Halide.h")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
