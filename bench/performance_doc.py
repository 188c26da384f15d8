"""Dated sections of docs/performance.md, written by the benchmark commands (Python stdlib only).

The page groups its tables by kind (the CPU comparison with PyTorch, the GPU benchmark, the tuner
against the defaults). A kind's sections follow its line
    <!-- sections: KIND -->
each one between
    <!-- begin: KIND MACHINE -->  ...  <!-- end: KIND MACHINE -->
MACHINE being a slug of the processor's name. A new run replaces the section of its own machine
and kind, in place; a machine not seen before gets a new section first under the kind's line.
Other machines' sections stay, each with its own date, machine, commit and command."""
import datetime
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "performance.md")


def cpu_model():
    """The processor: its name, family and model, and its widest vector instructions, e.g.
    'AMD EPYC (family 25, model 1; AVX2)'. Virtual machines often name every AMD EPYC alike;
    family and model tell the generations apart."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    key, value = (x.strip() for x in line.split(":", 1))
                    info.setdefault(key, value)
    except OSError:
        pass
    name = info.get("model name") or lscpu_model_name() or "unknown CPU"
    flags = info.get("flags", "").split()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else None
    details = [f"family {info['cpu family']}, model {info['model']}"] if "cpu family" in info and "model" in info else []
    if isa:
        details.append(isa)
    return f"{name} ({'; '.join(details)})" if details else name


def lscpu_model_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        m = re.search(r"^Model name:\s*(.+)$", out, re.M)
        return m.group(1).strip() if m else None
    except (OSError, subprocess.CalledProcessError):
        return None


def commit():
    """The checkout's short commit, marked when tracked files other than the documents differ from
    it (the documents measure nothing; the benchmark commands write this one: a second command after
    a first is still clean)."""
    try:
        sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)docs", ":(exclude)*.md"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return sha + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def today():
    return datetime.date.today().isoformat()


def provenance(command):
    """'Measured DATE on CPU, commit SHA, by `COMMAND`', the start of a section's text."""
    return f"Measured {today()} on {cpu_model()}, commit {commit()}, by `{command}`"


def slug(machine):
    """'AMD EPYC 7B13 64-Core Processor' -> 'amd-epyc-7b13-64-core-processor'."""
    return re.sub(r"[^a-z0-9]+", "-", machine.lower()).strip("-") or "unknown"


def markers(kind, machine):
    key = f"{kind} {slug(machine)}"
    return f"<!-- begin: {key} -->", f"<!-- end: {key} -->"


def write_section(kind, machine, body, path=DOC):
    """Puts `body` (Markdown, its own heading first) into `path` as KIND's section for MACHINE."""
    with open(path) as f:
        doc = f.read()
    anchor = f"<!-- sections: {kind} -->"
    if anchor not in doc:
        sys.exit(f"performance_doc: {path} has no line {anchor}")
    begin, end = markers(kind, machine)
    section = f"{begin}\n{body.rstrip()}\n{end}"
    if begin in doc and end in doc.split(begin, 1)[1]:
        head, rest = doc.split(begin, 1)
        doc = head + section + rest.split(end, 1)[1]
    else:
        doc = doc.replace(anchor, f"{anchor}\n{section}\n", 1)
    with open(path, "w") as f:
        f.write(doc)
