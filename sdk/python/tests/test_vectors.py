"""The SDK against the shared vectors in testdata/protocol/vectors.json."""

import errno
import unittest

from santa import VERSION, SantaError, decode, encode, tcp
from santa.messages import MsgType

from . import vectors


class VectorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        # A missing file fails the run: the vectors are the contract.
        cls.data = vectors.load()

    def test_protocol_version(self) -> None:
        self.assertEqual(self.data["protocol_version"], VERSION)

    def test_constants(self) -> None:
        # santa_abi.h's constants that the SDK writes again: all of them,
        # and the same values.
        mine = {"SANTA_SOL": tcp.SOL, "SANTA_SO_ACCEPTED": tcp.SO_ACCEPTED}
        self.assertEqual(self.data["constants"], mine)

    def test_valid(self) -> None:
        self.assertTrue(self.data["vectors"])
        for v in self.data["vectors"]:
            with self.subTest(v["name"]):
                msg = v["message"]
                body = vectors.from_json(vectors.body_class(msg), msg["body"], msg["version"])
                self.assertEqual(encode(msg["seq"], body, msg["version"]).hex(), v["hex"])
                header, decoded = decode(bytes.fromhex(v["hex"]))
                self.assertEqual(
                    (header.version, header.type, header.reply, header.seq),
                    (msg["version"], MsgType[msg["type"]], msg["reply"], msg["seq"]),
                )
                self.assertEqual(decoded, body)

    def test_invalid(self) -> None:
        self.assertTrue(self.data["invalid"])
        for v in self.data["invalid"]:
            with self.subTest(v["name"]):
                with self.assertRaises(SantaError) as caught:
                    decode(bytes.fromhex(v["hex"]))
                code = getattr(errno, v["error"])
                self.assertEqual(caught.exception.code, code, caught.exception)


if __name__ == "__main__":
    unittest.main()
