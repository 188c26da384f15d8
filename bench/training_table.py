"""Merges training_bench's Google Benchmark JSON and peers_training.py's JSON into one Markdown table
of the training step (Python stdlib only); scripts/training_bench.sh runs it.
  python3 bench/training_table.py FILE.json... [--docs docs/performance.md] [--command "bash scripts/training_bench.sh"]
Each FILE is training_bench's output or peers_training.py's; with several rounds, each time is its
best over them (bench/compare_table.py, whose pieces this uses). A part attnforge could not run (past
its memory budget: attn::memory_error) and a peer that failed (FlexAttention has no backward on the
CPU) get a note under the table instead of a time.
--docs writes the table, with its date, CPU, commit and command, as this CPU's section of the
training comparison in that file (bench/performance_doc.py)."""
import argparse
import re
import sys

import cases
import compare_table
import performance_doc

KIND = "cpu-training"  # the section kind in docs/performance.md
PARTS = ("forward", "backward", "step")  # training_bench's names end in one of these
PEER_TEXT = {"autograd": "PyTorch", "flex": "Flex"}


def attnforge_errors(reports):
    """{(case name, part): message} of the benchmarks that reported an error and ran in no round."""
    errors = {}
    for report in reports:
        for b in report["benchmarks"]:
            m = re.match(rf"(.+)/({'|'.join(PARTS)})(/|$)", b.get("run_name", b["name"]))
            if m and b.get("error_occurred"):
                errors.setdefault((m.group(1), m.group(2)), b.get("error_message", "error"))
    return errors


def error_cell(message):
    """A cell for a part that did not run: the error's kind, its message goes in a note."""
    return "out of memory budget" if message.startswith("memory_error") else "failed"


def error_note(message):
    """The error's message without the list of buffers a memory_error ends with."""
    return message.split(" (attn::set_memory_budget)")[0][:400]


def load_text(reports):
    """How busy the machine was: the 1-minute load average Google Benchmark records as each report
    starts, against the machine's CPUs (the benchmark's own threads count in it)."""
    loads = [r["context"]["load_avg"][0] for r in reports if r.get("context", {}).get("load_avg")]
    if not loads:
        return ""
    cpus = reports[0]["context"].get("num_cpus", "?")
    spread = f"{min(loads):.1f}" if len(loads) == 1 else f"{min(loads):.1f}–{max(loads):.1f}"
    return (f" Load average (1 minute) as attnforge's runs started: {spread}, on {cpus} CPUs: other "
            "work on the cores slows both sides.")


def ms(seconds):
    return compare_table.fmt(seconds * 1e3 if seconds is not None else None, 1)


def pytorch_runs(variant):
    return "SDPA" if variant in ("full", "causal") else "eager"


def table(reports, peer_reports, command="bash scripts/training_bench.sh"):
    runs, rounds = compare_table.best_attnforge_runs(reports, PARTS)
    errors = {key: message for key, message in attnforge_errors(reports).items() if key not in runs}
    peer_rows = compare_table.best_peer_rows(peer_reports)
    threads = reports[0].get("context", {}).get("threads", "?")
    peers = peer_reports[0] if peer_reports else None
    torch_text = f"PyTorch {peers['torch']} ({peers['threads']} threads, torch.set_num_threads)" if peers else \
        "PyTorch not installed (bash scripts/setup_peers.sh), so its columns are empty"
    names = {case for case, _ in runs} | {case for case, _ in errors}
    ts = sorted({int(re.search(r"/T:(\d+)", case).group(1)) for case in names})

    lines = [
        f"{performance_doc.provenance(command)}: attnforge with {threads} threads (HL_NUM_THREADS), {torch_text}."
        + load_text(reports),
        "",
        "| case | attnforge forward ms | attnforge backward ms | backward/forward | attnforge fwd+bwd ms "
        "| PyTorch fwd+bwd ms | PyTorch runs | speedup | Flex fwd+bwd ms | paths (forward; backward) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for name, variant, t, dh in cases.training_cases(ts):
        if name not in names:
            continue
        seconds, cells = {}, []
        for part in PARTS:
            run = runs.get((name, part))
            seconds[part] = run[0] if run else None
            if (name, part) in errors:
                message = errors[(name, part)]
                cells.append(error_cell(message))
                notes.append(f"attnforge {name} {part}: {error_note(message)}")
            else:
                cells.append(ms(seconds[part]))
        forward, backward, step = seconds["forward"], seconds["backward"], seconds["step"]
        cells.insert(2, compare_table.fmt(backward / forward if forward and backward else None, 2))
        peer_seconds = {}
        for peer in PEER_TEXT:
            row = peer_rows.get((name, peer))
            peer_seconds[peer] = row["seconds"] if row else None
            if row and row["note"]:
                notes.append(f"{PEER_TEXT[peer]}: {row['note']}")
        torch_seconds = peer_seconds["autograd"]
        flex_row = peer_rows.get((name, "flex"))
        flex_cell = ms(peer_seconds["flex"]) if peer_seconds["flex"] is not None else \
            "failed" if flex_row and flex_row["note"] else "—"
        torch_cell = ms(torch_seconds) if torch_seconds is not None else \
            "failed" if peer_rows.get((name, "autograd")) else "—"
        paths = re.findall(r"path=(\S+)", runs[(name, "forward")][1]) if (name, "forward") in runs else []
        cells += [torch_cell, pytorch_runs(variant),
                  compare_table.fmt(torch_seconds / step if torch_seconds and step else None, 2), flex_cell,
                  "; ".join(paths) if paths else "—"]
        lines.append(f"| {variant} T={t} Dh={dh} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "H = 8, B = 1, float32; milliseconds per call, mean of each benchmark's calls (attnforge) or median "
        "of the calls (PyTorch)" +
        (f", each case's best of {rounds} rounds (scripts/training_bench.sh: attnforge and PyTorch "
         "alternate, one case at a time)" if rounds > 1 else "") + ". attnforge: the forward is "
        "`attn::jit(y, {.with_lse = true})` (the fused kernel), the backward `attn::jit_gradients(y)` called "
        "with dY, what the forward saved (`attn::saved{output, lse}`) and its tensors (fused where it "
        "covers the expression, the generic lowering with "
        "T × T intermediates otherwise; paths: what each ran), fwd+bwd the two in a row, each call "
        "writing into buffers allocated once (`into_with_lse`, `grad.into`), as a training loop keeps them. "
        "PyTorch: the forward, "
        "then `backward(dY)` into q, k, v (and the T5 table) that require gradients (`.grad` set to None "
        "before each step, as `zero_grad()` does): SDPA for full and "
        "causal, eager ops (scores, modifier, mask, softmax, ·V) for the others. Speedup: PyTorch's "
        "fwd+bwd time over attnforge's; above 1, attnforge is faster. Flex: FlexAttention under "
        "torch.compile with the same score and mask modifiers.",
    ]
    if notes:
        lines += [""] + [f"- {n}" for n in dict.fromkeys(notes)]  # each note once, in table order
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="training_bench's --benchmark_out JSON and peers_training.py's JSON; "
                    "a file that does not exist is skipped")
    ap.add_argument("--docs", help="write the table into this file (docs/performance.md) as this CPU's section")
    ap.add_argument("--command", default="bash scripts/training_bench.sh", help="the command that ran, named in the text")
    args = ap.parse_args()
    reports, peer_reports = compare_table.read_reports(args.files, "training_bench")
    text = table(reports, peer_reports, args.command)
    print(text, end="")
    if args.docs:
        compare_table.write_docs(args.docs, text, KIND)
        print(f"(written into {args.docs})", file=sys.stderr)


if __name__ == "__main__":
    main()
