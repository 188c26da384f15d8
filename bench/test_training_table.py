"""bench/training_table.py on made-up reports (Python stdlib only; ctest label bench): each part's best
round, the ratios, a part past attnforge's memory budget and a failed peer as notes, the dated section
--docs writes; and, where the environment names training_bench (TRAINING_BENCH, as ctest does), a real
run of one tiny case at two lengths, the longer one past a small memory budget, through the table."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import cases  # noqa: E402
import performance_doc  # noqa: E402
import training_table  # noqa: E402

FULL = cases.name("full", 1024, 64)
T5 = cases.name("t5_bias", 1024, 64)
CAUSAL_4096 = cases.name("causal", 4096, 64)
FLEX_NOTE = "failed: NotImplementedError: FlexAttention does not support backward on CPU."
MEMORY = ("memory_error: kernel call: needs 2.6 GiB (2768371712 bytes) of temporaries, above the memory budget of "
          "1.0 GiB (1073741824 bytes) (attn::set_memory_budget): output (1, 8, 4096, 64) 8.0 MiB (8388608 bytes)")


def attnforge(seconds, errors=(), load=1.0):
    """training_bench's JSON: {case name: (forward, backward, step) seconds, None for a part that did
    not run}; errors: (case name, part, message); load: the 1-minute load average as it started."""
    benchmarks = []
    for name, times in seconds.items():
        for part, t in zip(training_table.PARTS, times):
            if t is None:
                continue
            benchmarks.append({"name": f"{name}/{part}/real_time", "run_name": f"{name}/{part}/real_time",
                               "run_type": "iteration", "real_time": t * 1e3, "time_unit": "ms",
                               "label": "forward path=fused attention=softmax(score)·V; "
                                        "backward path=fused backward=softmax(score)·V"})
    for name, part, message in errors:
        benchmarks.append({"name": f"{name}/{part}/real_time", "run_name": f"{name}/{part}/real_time",
                           "run_type": "iteration", "error_occurred": True, "error_message": message,
                           "real_time": 0, "time_unit": "ms"})
    return {"context": {"threads": "2", "num_cpus": 2, "load_avg": [load, 0.5, 0.5]}, "benchmarks": benchmarks}


def peers(rows):
    """peers_training.py's JSON: rows of (case name, peer, seconds or None, note)."""
    return {"torch": "2.x", "threads": 2, "results": [{"name": n, "peer": p, "seconds": s, "gflops": None, "note": note}
                                                      for n, p, s, note in rows]}


def row_of(text, label):
    for line in text.splitlines():
        if line.startswith(f"| {label} |"):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"no row {label!r} in:\n{text}")


class TrainingTable(unittest.TestCase):
    def test_best_round_of_each_part_ratios_and_notes(self):
        memory = [(CAUSAL_4096, "backward", MEMORY), (CAUSAL_4096, "step", MEMORY)]
        reports = [attnforge({FULL: (0.010, 0.050, 0.064), T5: (0.012, 0.100, 0.120), CAUSAL_4096: (0.1, None, None)}, memory, 2.5),
                   attnforge({FULL: (0.011, 0.040, 0.055), T5: (0.013, 0.090, 0.110), CAUSAL_4096: (0.2, None, None)}, memory, 0.4)]
        peer_reports = [peers([(FULL, "autograd", 0.120, ""), (FULL, "flex", None, FLEX_NOTE),
                               (T5, "autograd", 0.300, ""), (T5, "flex", None, FLEX_NOTE)]),
                        peers([(FULL, "autograd", 0.100, ""), (FULL, "flex", None, FLEX_NOTE),
                               (T5, "autograd", 0.330, ""), (T5, "flex", None, FLEX_NOTE)])]
        text = training_table.table(reports, peer_reports)
        full = row_of(text, "full T=1024 Dh=64")
        self.assertEqual(full[1:5], ["10.0", "40.0", f"{0.040 / 0.010:.2f}", "55.0"])  # each part's faster round
        self.assertEqual(full[5:10], ["100.0", "SDPA", f"{0.100 / 0.055:.2f}", "failed", "fused; fused"])
        t5 = row_of(text, "t5_bias T=1024 Dh=64")
        self.assertEqual(t5[5:8], ["300.0", "eager", f"{0.300 / 0.110:.2f}"])
        causal = row_of(text, "causal T=4096 Dh=64")
        self.assertEqual(causal[1:6], ["100.0", "out of memory budget", "—", "out of memory budget", "—"])
        self.assertIn("best of 2 rounds", text)
        self.assertIn("Load average (1 minute) as attnforge's runs started: 0.4–2.5, on 2 CPUs", text)
        self.assertEqual(text.count(f"- Flex: {FLEX_NOTE}"), 1)  # one note for every case it failed on
        self.assertIn(f"- attnforge {CAUSAL_4096} backward: memory_error: kernel call: needs 2.6 GiB", text)
        self.assertNotIn("output (1, 8, 4096, 64)", text)  # the buffers of the message are left out

    def test_without_peers(self):
        text = training_table.table([attnforge({FULL: (0.010, 0.050, 0.064)})], [])
        self.assertIn("PyTorch not installed", text)
        self.assertEqual(row_of(text, "full T=1024 Dh=64")[5:9], ["—", "SDPA", "—", "—"])
        self.assertNotIn("rounds", text)

    def test_command_line_and_docs_section(self):
        with tempfile.TemporaryDirectory() as d:
            a, p, doc = (os.path.join(d, n) for n in ("a.json", "p.json", "performance.md"))
            with open(a, "w") as f:
                json.dump(attnforge({FULL: (0.010, 0.050, 0.064)}), f)
            with open(p, "w") as f:
                json.dump(peers([(FULL, "autograd", 0.1, "")]), f)
            anchor = f"<!-- sections: {training_table.KIND} -->"
            with open(doc, "w") as f:
                f.write(f"before\n<!-- sections: cpu-comparison -->\n{anchor}\nafter\n")
            script = os.path.join(BENCH, "training_table.py")
            for _ in range(2):  # the second run replaces the first one's section
                run = subprocess.run([sys.executable, script, a, p, "--docs", doc, "--command", "bash scripts/training_bench.sh"],
                                     capture_output=True, text=True)
                self.assertEqual(run.returncode, 0, run.stderr)
            with open(doc) as f:
                written = f.read()
            begin, end = performance_doc.markers(training_table.KIND, performance_doc.cpu_model())
            self.assertEqual(written.count(begin), 1)
            self.assertTrue(written.startswith(f"before\n<!-- sections: cpu-comparison -->\n{anchor}\n{begin}\n### "))
            self.assertTrue(written.endswith(f"{end}\n\nafter\n"))
            self.assertIn("by `bash scripts/training_bench.sh`", written)
            run = subprocess.run([sys.executable, script, p], capture_output=True, text=True)
            self.assertNotEqual(run.returncode, 0)
            self.assertIn("no training_bench JSON", run.stderr)

    @unittest.skipUnless(os.environ.get("TRAINING_BENCH"), "TRAINING_BENCH names no training_bench")
    def test_real_run_through_the_table(self):
        """causal and the T5 table, Dh = 64, at T = 64 and 512 under a budget of 2 MiB + 8 KiB: both
        backwards are fused; the T5 table's at T = 512 needs 2 MiB + 17 KiB of temporaries (two
        transposed T × d tensors, the row sums and the table's sums), past the budget, while its forward
        (K transposed, and the output its first call allocates: 2 MiB) is not."""
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "run.json")
            env = dict(os.environ, ATTN_MEMORY_BUDGET=str((2 << 20) + (8 << 10)), HL_NUM_THREADS="2")
            run = subprocess.run([os.environ["TRAINING_BENCH"], "--lengths=64,512",
                                  "--benchmark_filter=^(causal/T:64|t5_bias/T:(64|512))/Dh:64/",
                                  "--benchmark_min_time=0.01", f"--benchmark_out={out}", "--benchmark_out_format=json"],
                                 capture_output=True, text=True, env=env)
            self.assertEqual(run.returncode, 0, run.stderr)
            run = subprocess.run([sys.executable, os.path.join(BENCH, "training_table.py"), out], capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
        causal = row_of(run.stdout, "causal T=64 Dh=64")
        small, large = row_of(run.stdout, "t5_bias T=64 Dh=64"), row_of(run.stdout, "t5_bias T=512 Dh=64")
        for cell in causal[1:5] + small[1:5]:
            self.assertGreater(float(cell), 0)
        self.assertEqual(causal[9], "fused; fused")
        self.assertEqual(small[9], "fused; fused")
        self.assertGreater(float(large[1]), 0)
        self.assertEqual([large[2], large[4]], ["out of memory budget"] * 2)
        self.assertIn(f"- attnforge {cases.name('t5_bias', 512, 64)} backward: memory_error: ", run.stdout)

if __name__ == "__main__":
    unittest.main()
