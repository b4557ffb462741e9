"""santa.rulefile against the rule files santactl's tests read
(testdata/rulefiles, with what santactl makes of each in expected.json)."""

import json
import tempfile
import unittest
from pathlib import Path

from santa import _gojson, rulefile
from santa.rulefile import RuleFileError

from . import vectors

DIR = Path(__file__).resolve().parents[3] / "testdata" / "rulefiles"


class SharedFilesTest(unittest.TestCase):
    def test_every_file(self) -> None:
        expected = json.loads((DIR / "expected.json").read_text())
        files = sorted(p.name for p in DIR.glob("*.rules"))
        self.assertEqual(files, sorted(expected))  # a file without an outcome fails
        for name in files:
            with self.subTest(name):
                want = expected[name]
                if "error" in want:
                    with self.assertRaises(RuleFileError) as caught:
                        rulefile.load(DIR / name)
                    self.assertEqual(caught.exception.message, want["error"])
                else:
                    got = rulefile.load(DIR / name)
                    self.assertEqual(got, [vectors.rule(r) for r in want["rules"]])


    def test_both_readers(self) -> None:
        """The loader reads with Python's json module first and words errors
        by reading again as Go does: the first must accept no file santactl
        refuses, and both must read an accepted file alike."""
        expected = json.loads((DIR / "expected.json").read_text())
        for name, want in expected.items():
            with self.subTest(name):
                data = (DIR / name).read_bytes()
                quick = _gojson.quick_value(data)
                if "error" in want:
                    if quick is not None:
                        with self.assertRaises(RuleFileError):
                            rulefile._read(quick)
                    continue
                rules = [vectors.rule(r) for r in want["rules"]]
                self.assertIsNotNone(quick)
                self.assertEqual(rulefile._read(quick), rules)  # type: ignore[arg-type]
                self.assertEqual(rulefile._read(_gojson.first_value(data)[0]), rules)


class LoadTest(unittest.TestCase):
    def test_loads_text_and_bytes(self) -> None:
        text = '{"rules": [{"condition": {"text": "Hello"}, "processors": [{"put": {"text": "COMSYS"}}]}]}'
        self.assertEqual(rulefile.loads(text), rulefile.loads(text.encode()))
        (rule,) = rulefile.loads(text)
        self.assertEqual((rule.pattern, rule.reply_len), (b"Hello", 6))

    def test_error_names_the_file(self) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".rules") as f:
            f.write('{"rules": [{"condition": {"offset": 1}}]}')
            f.flush()
            with self.assertRaises(RuleFileError) as caught:
                rulefile.load(f.name)
        e = caught.exception
        self.assertEqual(e.path, f.name)
        self.assertEqual(str(e), f'{f.name}: rule 0: condition: give "text" or "hex"')
        self.assertIsInstance(e, ValueError)

    def test_text_error_has_no_path(self) -> None:
        with self.assertRaises(RuleFileError) as caught:
            rulefile.loads("")
        self.assertEqual((str(caught.exception), caught.exception.path), ("no JSON value", None))


if __name__ == "__main__":
    unittest.main()
