"""bench/compare_table.py on made-up reports (Python stdlib only; ctest label bench): each side's
best round, the ratios, the kernel without softmax beside full attention, n/a and failed peers, the
rounds counted, a FLOP count that disagrees, and the dated section --docs writes."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")
sys.path.insert(0, BENCH)
import cases  # noqa: E402
import compare_table  # noqa: E402
import performance_doc  # noqa: E402

FULL = cases.name("full", 512, 64)
SOFTCAP = cases.name("softcap_causal", 512, 64)
RELU = cases.name("relu", 512, 64)  # full attention's kernel without the softmax (cases.NO_SOFTMAX)


def attnforge(seconds, peak=100.0, flops=None):
    """attention_bench's JSON for two cases: {case name: (fused, generic) seconds}."""
    benchmarks = []
    for name, times in seconds.items():
        variant = name.split("/")[0]
        count = flops if flops is not None else cases.flops(variant, 512, 64)
        for path, t in zip(("fused", "generic"), times):
            benchmarks.append({"name": f"{name}/{path}/real_time", "run_name": f"{name}/{path}/real_time",
                               "run_type": "iteration", "real_time": t * 1e3, "time_unit": "ms",
                               "label": f"path={path} schedule=[...]", "flops": count, "fma_peak": peak})
    return {"context": {"fma_peak_gflops": str(peak), "threads": "2"}, "benchmarks": benchmarks}


def peers(rows):
    """peers.py's JSON: rows of (case name, peer, seconds or None, note)."""
    out = []
    for name, peer, seconds, note in rows:
        variant = name.split("/")[0]
        gflops = cases.flops(variant, 512, 64) / seconds / 1e9 if seconds else None
        out.append({"name": name, "peer": peer, "seconds": seconds, "gflops": gflops, "note": note})
    return {"torch": "2.x", "threads": 2, "results": out}


def row_of(text, label):
    for line in text.splitlines():
        if line.startswith(f"| {label} |"):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"no row {label!r} in:\n{text}")


class CompareTable(unittest.TestCase):
    def test_best_round_of_each_side_and_ratios(self):
        reports = [attnforge({FULL: (0.010, 0.030), SOFTCAP: (0.008, 0.040), RELU: (0.0065, 0.050)}, peak=90.0),
                   attnforge({FULL: (0.008, 0.035), SOFTCAP: (0.009, 0.030), RELU: (0.0070, 0.050)}, peak=100.0)]
        peer_reports = [peers([(FULL, "sdpa", 0.012, ""), (FULL, "flex", 0.020, ""),
                               (SOFTCAP, "sdpa", None, "n/a: SDPA has no hook on the scores (softcap)"),
                               (SOFTCAP, "flex", None, "failed: RuntimeError: boom")]),
                        peers([(FULL, "sdpa", 0.016, ""), (FULL, "flex", 0.016, ""),
                               (SOFTCAP, "sdpa", None, "n/a: SDPA has no hook on the scores (softcap)"),
                               (SOFTCAP, "flex", None, "failed: RuntimeError: boom")])]
        text = compare_table.table(reports, peer_reports)
        full = row_of(text, "full T=512 Dh=64")
        flops = cases.flops("full", 512, 64)
        self.assertEqual(full[1], f"{flops / 0.008 / 1e9:.1f}")  # fused: the faster round
        self.assertEqual(full[2], f"{flops / 0.008 / 1e9 / 100.0:.3f}")  # against the best peak
        self.assertEqual(full[3], f"{flops / 0.030 / 1e9:.1f}")  # generic: its own faster round
        self.assertEqual(full[6], f"{0.012 / 0.008:.2f}")  # fused/SDPA, SDPA's faster round
        self.assertEqual(full[7], f"{0.016 / 0.008:.2f}")  # fused/Flex
        self.assertEqual(full[8], f"{flops / 0.0065 / 1e9:.1f}")  # no softmax: relu's faster round
        self.assertEqual(full[9], f"{0.012 / 0.0065:.2f}")  # no softmax/SDPA
        self.assertNotIn("| relu", text)  # a column of full's rows, not a row of its own
        softcap = row_of(text, "softcap_causal T=512 Dh=64")
        self.assertEqual(softcap[1], f"{cases.flops('softcap_causal', 512, 64) / 0.008 / 1e9:.1f}")
        self.assertEqual(softcap[4:10], ["n/a", "failed", "—", "—", "—", "—"])
        self.assertIn("best of 2 rounds", text)
        self.assertIn("100.0 GFLOP/s", text)

    def test_without_peers(self):
        text = compare_table.table([attnforge({FULL: (0.010, 0.030)})], [])
        self.assertIn("PyTorch not installed", text)
        self.assertEqual(row_of(text, "full T=512 Dh=64")[4:10], ["—"] * 6)  # no relu run, no peers
        self.assertNotIn("rounds", text)

    def test_flop_count_that_disagrees_stops(self):
        with self.assertRaises(SystemExit):
            compare_table.table([attnforge({FULL: (0.010, 0.030)}, flops=123)], [])

    def test_command_line_and_docs_sections(self):
        with tempfile.TemporaryDirectory() as d:
            a, p, doc = (os.path.join(d, n) for n in ("a.json", "p.json", "performance.md"))
            with open(a, "w") as f:
                json.dump(attnforge({FULL: (0.010, 0.030)}), f)
            with open(p, "w") as f:
                json.dump(peers([(FULL, "sdpa", 0.011, ""), (FULL, "flex", 0.02, "")]), f)
            anchor = f"<!-- sections: {compare_table.KIND} -->"
            other = "<!-- begin: cpu-comparison another-cpu -->\nold table\n<!-- end: cpu-comparison another-cpu -->"
            with open(doc, "w") as f:
                f.write(f"before\n{anchor}\n{other}\nafter\n")
            script = os.path.join(BENCH, "compare_table.py")
            command = ["--command", "bash scripts/compare.sh --T 512"]
            for _ in range(2):  # the second run replaces the first one's section
                run = subprocess.run([sys.executable, script, a, p, os.path.join(d, "absent.json"), "--docs", doc, *command],
                                     capture_output=True, text=True)
                self.assertEqual(run.returncode, 0, run.stderr)
            with open(doc) as f:
                written = f.read()
            begin, end = performance_doc.markers(compare_table.KIND, performance_doc.cpu_model())
            self.assertEqual(written.count(begin), 1)
            self.assertEqual(written.count(end), 1)
            self.assertTrue(written.startswith(f"before\n{anchor}\n{begin}\n### {performance_doc.cpu_model()}, "))
            self.assertTrue(written.endswith(f"{end}\n\n{other}\nafter\n"))  # another machine's section stays
            self.assertIn("by `bash scripts/compare.sh --T 512`", written)
            self.assertIn("| full T=512 Dh=64 |", written)
            # A file without the kind's line is refused, untouched.
            with open(doc, "w") as f:
                f.write("no sections here\n")
            run = subprocess.run([sys.executable, script, a, "--docs", doc], capture_output=True, text=True)
            self.assertNotEqual(run.returncode, 0)
            with open(doc) as f:
                self.assertEqual(f.read(), "no sections here\n")
            # Peers' JSON alone is not a table.
            run = subprocess.run([sys.executable, script, p], capture_output=True, text=True)
            self.assertNotEqual(run.returncode, 0)
            self.assertIn("no attention_bench JSON", run.stderr)


if __name__ == "__main__":
    unittest.main()
