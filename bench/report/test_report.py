"""Tests of bench/report: a run's RESULT lines in, the generated part of a
document and its plots out, the hand-written rest untouched."""
import os
import subprocess
import sys
import tempfile
import unittest

REPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report.py")

RESULTS = """\
# 2026-11-23T12:00:00Z 6.18.0 Some CPU, 2 CPUs, 23.4 GiB
# command: BENCH_QUICK=0 BENCH_ONLY= bash bench/run-all.sh
progress lines are not results
RESULT name=gen/requests=1000/popularity=uniform/rate=open/sent_per_s value=5500000 unit=requests/s range=4700000..6300000 runs=3
RESULT name=gen/requests=1000/popularity=uniform/rate=open/arrived_per_s value=5400000 unit=requests/s
RESULT name=gen/requests=1000/popularity=uniform/rate=open/client_thread_us_per_request value=0.18 unit=us/request
RESULT name=dns/server=bind/names=1k/client=dnsperf/queries_per_s value=78000 unit=queries/s
RESULT name=dns/server=bind/names=1k/client=dnsperf/server_us_per_query value=12.5 unit=us/query
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/offload=0/rate=open/replies_per_s value=50000 unit=replies/s range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/offload=0/rate=open/server_us_per_reply value=20 unit=us/reply range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/offload=1000/rate=open/replies_per_s value=1200000 unit=replies/s range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/offload=1000/rate=open/server_us_per_reply value=0.8 unit=us/reply range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/offload=0/peak_replies_per_s value=60000 unit=replies/s
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/offload=1000/peak_replies_per_s value=1200000 unit=replies/s
RESULT name=dns/server=bind/names=1k/rules=1/replies_per_s value=1500000 unit=replies/s range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/rules=1/server_us_per_reply value=0.65 unit=us/reply range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/rules=1000/replies_per_s value=1300000 unit=replies/s range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/rules=1000/server_us_per_reply value=0.75 unit=us/reply range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/offload=0/client=dnsperf/replies_per_s value=110000 unit=replies/s range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/offload=0/client=dnsperf/server_us_per_reply value=9.1 unit=us/reply range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/agent=1000/client=dnsperf/replies_per_s value=150000 unit=replies/s range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/agent=1000/client=dnsperf/server_us_per_reply value=1.5 unit=us/reply range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/agent=1000/oracle_replies_per_s value=1100000 unit=replies/s range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/agent=1000/second=1/replies_per_s value=60000 unit=replies/s range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/agent=1000/second=1/items value=0 unit=items range=0..0 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/agent=1000/second=2/replies_per_s value=1000000 unit=replies/s range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/agent=1000/seconds_to_90pct_of_oracle value=2.1 unit=s range=2.0..+Inf runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/agent=1000/rate=open/replies_per_s value=1000000 unit=replies/s range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/agent=1000/rate=open/server_us_per_reply value=1.0 unit=us/reply range=1..2 runs=3
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/offload=0/rate=open/server_us_per_reply value=9.6 unit=us/reply range=1..2 runs=3
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/offload=0/peak_replies_per_s value=100000 unit=replies/s
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/offload=10000/rate=open/server_us_per_reply value=1.9 unit=us/reply range=1..2 runs=3
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/offload=10000/rate=open/answered_by_santa value=86 unit=% range=1..2 runs=3
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/offload=10000/peak_replies_per_s value=520000 unit=replies/s
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/offload=10000/peak_vs_server_alone value=5.2 unit=ratio
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/agent=10000/oracle_replies_per_s value=560000 unit=replies/s
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/agent=10000/second=1/replies_per_s value=100000 unit=replies/s range=1..2 runs=3
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/agent=10000/second=2/replies_per_s value=330000 unit=replies/s range=1..2 runs=3
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/agent=10000/seconds_to_90pct_of_oracle value=+Inf unit=s range=+Inf..+Inf runs=3
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/agent=10000/rate=open/server_us_per_reply value=2.95 unit=us/reply range=1..2 runs=3
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/agent=10000/rate=open/answered_by_santa value=76.5 unit=% range=1..2 runs=3
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/agent=10000/peak_replies_per_s value=340000 unit=replies/s
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/agent=10000/peak_vs_oracle value=0.64 unit=ratio
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/agent=10000/peak_vs_server_alone value=3.34 unit=ratio
RESULT name=memcached-agent/keys=1M/popularity=zipf:1/agent=10000/client=socket/replies_per_s value=109000 unit=replies/s range=1..2 runs=3
RESULT name=memcached-agent/keys=1M/set_share=0.05/popularity=zipf:1/agent=10000/peak_replies_per_s value=129000 unit=replies/s
RESULT name=memcached-agent/keys=1M/set_share=0.05/popularity=zipf:1/agent=10000/peak_vs_server_alone value=1.03 unit=ratio
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/agent=1000/rate=open/answered_by_santa value=99 unit=% range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/agent=1000/peak_replies_per_s value=1000000 unit=replies/s
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/agent=1000/peak_vs_oracle value=0.833 unit=ratio
RESULT name=dns/server=knot/names=1k/popularity=zipf:1/agent=1000/seconds_to_90pct_of_oracle value=+Inf unit=s range=+Inf..+Inf runs=3
RESULT name=dns/server=knot/names=1k/popularity=zipf:1/agent=1000/rate=open/server_us_per_reply value=1.3 unit=us/reply range=1..2 runs=3
RESULT name=dns/server=knot/names=1k/popularity=zipf:1/agent=1000/rate=open/answered_by_santa value=97 unit=% range=1..2 runs=3
RESULT name=dns/server=knot-xdp/names=1k/popularity=zipf:1/offload=0/rate=open/server_us_per_reply value=3.0 unit=us/reply range=1..2 runs=3
RESULT name=dns/server=knot-xdp/names=1k/popularity=zipf:1/offload=0/client=dnsperf/replies_per_s value=120000 unit=replies/s range=1..2 runs=3
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/learn=alone/rate=open/replies_per_s value=56000 unit=replies/s range=50000..60000 runs=5
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/learn=alone/rate=open/server_us_per_reply value=18.0 unit=us/reply range=1..2 runs=5
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/learn=attached/rate=open/replies_per_s value=55000 unit=replies/s range=50000..60000 runs=5
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/learn=attached/rate=open/server_us_per_reply value=18.2 unit=us/reply range=1..2 runs=5
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/learn=learning/rate=open/replies_per_s value=54000 unit=replies/s range=50000..60000 runs=5
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/learn=learning/rate=open/server_us_per_reply value=18.5 unit=us/reply range=1..2 runs=5
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/learn=learning/rate=100000/replies_per_s value=54000 unit=replies/s range=50000..60000 runs=5
RESULT name=dns/server=bind/names=1k/popularity=zipf:1/learning_vs_alone/rate=open value=0.9643 unit=ratio
RESULT name=memcached/keys=100k/popularity=zipf:1/offload=0/rate=open/replies_per_s value=95000 unit=replies/s range=1..2 runs=3
RESULT name=memcached/keys=100k/popularity=zipf:1/offload=100000/rate=open/replies_per_s value=900000 unit=replies/s range=1..2 runs=3
RESULT name=memcached/keys=100k/popularity=zipf:1/offload=0/peak_replies_per_s value=100000 unit=replies/s
RESULT name=memcached/keys=100k/popularity=zipf:1/offload=100000/peak_replies_per_s value=900000 unit=replies/s
RESULT name=e2e/client=c/rules=100k/reply=64/mix=hot/mode=santa/replies_per_s value=900000 unit=replies/s range=1..2 runs=3
RESULT name=http/server=nginx/sendfile=off/size=64/requests_per_s value=76000 unit=requests/s range=1..2 runs=3
RESULT name=http/server=nginx/sendfile=off/size=64/server_us_per_request value=11.2 unit=us/request range=1..2 runs=3
RESULT name=http/server=nginx/sendfile=on/size=64/requests_per_s value=58000 unit=requests/s range=1..2 runs=3
"""

DOC = """# Benchmarks

Hand-written analysis that must stay.

<!-- report:begin -->
stale generated text
<!-- report:end -->

Trailing hand-written text.
"""


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        self.results, self.doc, self.img = (os.path.join(d, "results.txt"), os.path.join(d, "doc.md"),
                                            os.path.join(d, "img"))
        with open(self.results, "w") as f:
            f.write(RESULTS)
        with open(self.doc, "w") as f:
            f.write(DOC)
        subprocess.run([sys.executable, REPORT, self.results, self.doc, self.img], check=True)
        with open(self.doc) as f:
            self.out = f.read()

    def tearDown(self):
        self.dir.cleanup()

    def test_hand_written_parts_stay(self):
        self.assertTrue(self.out.startswith("# Benchmarks\n\nHand-written analysis that must stay.\n"))
        self.assertTrue(self.out.endswith("<!-- report:end -->\n\nTrailing hand-written text.\n"))
        self.assertNotIn("stale generated text", self.out)
        self.assertEqual(self.out.count("<!-- report:begin -->"), 1)

    def test_header_and_tables(self):
        for want in [
            "2026-11-23T12:00:00Z 6.18.0 Some CPU, 2 CPUs, 23.4 GiB",
            "| open | 1000 | uniform | 5.50 M (4.70 M–6.30 M) | 5.40 M | 0.180 |",
            "| bind | 1k | 78 k | 12.50 |",
            "| bind | 1k | zipf:1 | 60 k | 1.20 M (20.0x) |",
            "| memcached | 100k | zipf:1 | 100 k | 900 k (9.0x) |",
            "| dns | bind | 1k | 1000 | 1.30 M | 0.75 | 21.7x |",
            "| nginx | 64 | 76 k | 11.20 |",
            # The cost of learning, open loop only.
            "| dns | bind | 1k | zipf:1 | 56 k (50 k–60 k) | 55 k (50 k–60 k) | 54 k (50 k–60 k) | 0.964 | "
            "18.00, 18.20, 18.50 |",
            "| nginx, sendfile | 64 | 58 k |",
            # memcached with the agent: alone, the oracle, the agent, GETs only and with SETs.
            "| 1M | 0 | zipf:1 | memcached alone | 100 k | 9.60 | 0 | — |  |  |",
            "| 1M | 0 | zipf:1 | oracle, top 10000 | 520 k | 1.90 | 86 | 5.20x |  |  |",
            "| 1M | 0 | zipf:1 | agent, max 10000 | 340 k | 2.95 | 76 | 3.34x | 0.64 | not reached |",
            "| 1M | 0.05 | zipf:1 | agent, max 10000 | 129 k | 0.00 | 0 | 1.03x |  |  |",
            # The agent: against the oracle, its time to 90 %, dnsperf, the targets.
            "| bind | 1k | zipf:1 | 1000 | 1.10 M | 1.00 M | 0.83 | 2.1 |",
            "| knot | 1k | zipf:1 | 1000 | 0 | 0 | 0.00 | not reached |",
            "| bind | 1k | zipf:1 | 110 k (9.10) | 150 k (1.50) |",
            "| knot-xdp | 1k | zipf:1 | 120 k (0.00) |  |",
            "| agent at 90 % of the oracle within 10 s | bind, 1k, zipf:1, top 1000 | 2.1 s | yes |",
            "| agent at 90 % of the oracle within 10 s | knot, 1k, zipf:1, top 1000 | never | no |",
            "| Knot + Santa <= 1/2 of Knot XDP per reply | 1k, zipf:1, agent=1000, rate open, 97 % by Santa | "
            "1.30 vs 3.00 µs (0.43) | yes |",
            "| BIND + Santa >= 5.5x BIND alone, server-core capacity | 1k, zipf:1, agent=1000, up to 99 % by Santa | "
            "1000 k vs 50 k replies/s (20.0x) | yes |",
        ]:
            self.assertIn(want, self.out)

    def test_sweep_tables_leave_the_agent_out(self):
        # dnsperf with a popularity is not dnsperf against the server alone.
        self.assertNotIn("| knot-xdp | 1k | 0 | 0.00 |", self.out)

    def test_plots(self):
        for png in ["dns-offload.png", "dns-load.png", "dns-agent.png", "memcached-offload.png", "memcached-load.png",
                    "memcached-agent.png",
                    "rules.png", "http.png"]:
            path = os.path.join(self.img, png)
            self.assertIn(f"(img/{png})", self.out)
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", png)


if __name__ == "__main__":
    unittest.main()
