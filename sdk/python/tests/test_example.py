"""examples/hello.py run as a program against the fake santad."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from .fake_santad import FakeSanta

HELLO = Path(__file__).resolve().parent.parent / "examples" / "hello.py"


class HelloExampleTest(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeSanta(hits=7)
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "santa.sock")
        self.fake.listen(self.path)

    def tearDown(self) -> None:
        self.fake.stop()
        self.tmp.cleanup()

    def start(self, *args: str) -> tuple[subprocess.Popen[str], int]:
        """Starts hello.py on a free port; returns it and the port."""
        proc = subprocess.Popen(
            [sys.executable, str(HELLO), "127.0.0.1:0", "--socket", self.path, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.addCleanup(proc.kill)
        ready = proc.stderr.readline() if proc.stderr else ""
        self.assertIn("ready on 127.0.0.1:", ready)
        return proc, int(ready.split(":")[1].split(",")[0])

    def test_answers_and_reports_on_sigterm(self) -> None:
        proc, port = self.start()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as c:
            c.settimeout(5)
            c.sendto(b"Hi there", ("127.0.0.1", port))
            self.assertEqual(c.recv(100), b"APP:Hi there")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
        self.assertEqual(out, "STATS kernel=7 app=1\n")
        self.assertEqual(proc.returncode, 0)
        self.assertEqual(self.fake.services, {})  # it detached on the way out

    def test_stops_after_seconds(self) -> None:
        proc, _ = self.start("--seconds", "0.3")
        out, _ = proc.communicate(timeout=10)
        self.assertEqual(out, "STATS kernel=7 app=0\n")


if __name__ == "__main__":
    unittest.main()
