package cli

import (
	"testing"

	"github.com/santa-offload/santa/client"
)

// TestCommands runs the reading commands against the fake and checks their
// tables and JSON documents exactly.
func TestCommands(t *testing.T) {
	f, path := withService(t)
	f.setCounters(7, client.RuleCounters{RuleID: 1, Hits: 120, Bytes: 5040})
	f.setCounters(7, client.RuleCounters{RuleID: 3, Hits: 30, Bytes: 1260})
	tests := []output{
		{[]string{"status"}, `daemon    santad test
protocol  7
client    uid 1000, gid 100, pid 4242
quota     65536 rules, unlimited bytes
rules     3 of 1048576
services  1

INTERFACE  IFINDEX  XDP      TC
lo         1        generic  no
eth0       4        native   yes
`},
		{[]string{"-json", "status"}, `{
  "daemon": "santad test",
  "protocol": 7,
  "client": {
    "uid": 1000,
    "gid": 100,
    "pid": 4242,
    "admin": false,
    "quota_rules": 65536,
    "quota_bytes": 0
  },
  "rules": 3,
  "capacity": 1048576,
  "services": 1,
  "interfaces": [
    {
      "ifindex": 1,
      "name": "lo",
      "xdp": "generic",
      "tc": false
    },
    {
      "ifindex": 4,
      "name": "eth0",
      "xdp": "native",
      "tc": true
    }
  ]
}
`},
		{[]string{"services"}, `ID  PROTO  ADDRESS         OWNER  RULES  COOKIE  MANAGER
7   udp    127.0.0.1:7777  1000   3      4097    -
`},
		{[]string{"services", "-json"}, `{
  "services": [
    {
      "service_id": 7,
      "protocol": "udp",
      "family": 4,
      "address": "127.0.0.1",
      "port": 7777,
      "cookie": 4097,
      "netns_cookie": 1,
      "owner_uid": 1000,
      "rules": 3,
      "manager": ""
    }
  ]
}
`},
		{[]string{"rules", "7"}, `ID  OFFSET  PATTERN                                                   LENGTH  REPLY  PROCESSORS
1   0       "Hello"                                                   any     6      put "COMSYS" at 0
2   2       "\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"... (27 bytes)  29      12     put "\x81\x80\x00\x01"... (6 bytes) at 2, copy 2 bytes from 0 to 0
3   0       "Hi"                                                      any     6      put "Ho" at 0, copy 4 bytes from 2 to 2, put "!" at 3
`},
		{[]string{"rules", "list", "7", "--json"}, `{
  "rules": [
    {
      "id": 1,
      "condition": {
        "offset": 0,
        "text": "Hello",
        "hex": "48656c6c6f"
      },
      "reply_len": 6,
      "processors": [
        {
          "put": {
            "offset": 0,
            "text": "COMSYS",
            "hex": "434f4d535953"
          }
        }
      ]
    },
    {
      "id": 2,
      "condition": {
        "offset": 2,
        "hex": "01000001000000000000076578616d706c6503636f6d0000010001",
        "length": "29"
      },
      "reply_len": 12,
      "processors": [
        {
          "put": {
            "offset": 2,
            "hex": "818000010001"
          }
        },
        {
          "copy": {
            "from": 0,
            "length": 2,
            "to": 0
          }
        }
      ]
    },
    {
      "id": 3,
      "condition": {
        "offset": 0,
        "text": "Hi",
        "hex": "4869"
      },
      "reply_len": 6,
      "processors": [
        {
          "put": {
            "offset": 0,
            "text": "Ho",
            "hex": "486f"
          }
        },
        {
          "copy": {
            "from": 2,
            "length": 4,
            "to": 2
          }
        },
        {
          "put": {
            "offset": 3,
            "text": "!",
            "hex": "21"
          }
        }
      ]
    }
  ]
}
`},
		{[]string{"rules", "7", "2"}, `service 7, rule 2

condition  27 bytes at offset 2: "\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"
  0000  01 00 00 01 00 00 00 00  00 00 07 65 78 61 6d 70  |...........examp|
  0010  6c 65 03 63 6f 6d 00 00  01 00 01                 |le.com.....|
length     requests of 29 bytes

reply      12 bytes, 2 processors
  0  put "\x81\x80\x00\x01\x00\x01" at 2
     0000  81 80 00 01 00 01                                 |......|
  1  copy 2 bytes from 0 to 0

template   the reply; -- are bytes copied from each request
  0000  -- -- 81 80 00 01 00 01  00 00 00 00              |--..........|
`},
		{[]string{"rules", "show", "7", "3"}, `service 7, rule 3

condition  2 bytes at offset 0: "Hi"
  0000  48 69                                             |Hi|

reply      6 bytes, 3 processors
  0  put "Ho" at 0
     0000  48 6f                                             |Ho|
  1  copy 4 bytes from 2 to 2
  2  put "!" at 3
     0000  21                                                |!|

template   the reply; -- are bytes copied from each request
  0000  48 6f -- 21 -- --                                 |Ho-!--|
`},
		{[]string{"-json", "rules", "show", "7", "3"}, `{
  "service_id": 7,
  "id": 3,
  "condition": {
    "offset": 0,
    "text": "Hi",
    "hex": "4869"
  },
  "reply_len": 6,
  "processors": [
    {
      "put": {
        "offset": 0,
        "text": "Ho",
        "hex": "486f"
      }
    },
    {
      "copy": {
        "from": 2,
        "length": 4,
        "to": 2
      }
    },
    {
      "put": {
        "offset": 3,
        "text": "!",
        "hex": "21"
      }
    }
  ],
  "template": "486f00210000",
  "copies": [
    {
      "from": 2,
      "length": 1,
      "to": 2
    },
    {
      "from": 4,
      "length": 2,
      "to": 4
    }
  ]
}
`},
		{[]string{"stats", "7"}, `service       7
matched       150
passed        20
fallback      1
  checksum    1
  too long    0
  no xdp      0
bad checksum  0
rules         3
rule bytes    93 B

RULE  HITS  BYTES    OFFSET  PATTERN                                                   LENGTH
1     120   4.9 KiB  0       "Hello"                                                   any
3     30    1.2 KiB  0       "Hi"                                                      any
2     0     0 B      2       "\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"... (27 bytes)  29
`},
		{[]string{"stats", "-json", "-top", "1", "7"}, `{
  "service_id": 7,
  "matched": 150,
  "passed": 20,
  "fallback": 1,
  "tc_checksum": 1,
  "tc_too_long": 0,
  "tc_no_xdp": 0,
  "bad_csum": 0,
  "rules": 3,
  "rule_bytes": 93,
  "rule_counters": [
    {
      "id": 1,
      "hits": 120,
      "bytes": 5040,
      "condition": {
        "offset": 0,
        "text": "Hello",
        "hex": "48656c6c6f"
      }
    }
  ]
}
`},
	}
	checkOutputs(t, path, tests)
}

func TestDetach(t *testing.T) {
	_, path := withService(t)
	for _, tt := range []struct {
		args           []string
		stdout, stderr string
		code           int
	}{
		{[]string{"detach", "7"}, "detached service 7\n", "", 0},
		{[]string{"detach", "7"}, "", "santactl: detach: no service 7 (ENOENT)\n", 1},
		{[]string{"services", "-json"}, "{\n  \"services\": []\n}\n", "", 0},
	} {
		stdout, stderr, code := santactl(t, path, tt.args...)
		if stdout != tt.stdout || stderr != tt.stderr || code != tt.code {
			t.Errorf("%q: stdout %q, stderr %q, exit status %d; want %q, %q, %d", tt.args, stdout, stderr, code, tt.stdout, tt.stderr, tt.code)
		}
	}
}

// TestRefusals checks how santactl tells what the daemon refused.
func TestRefusals(t *testing.T) {
	_, path := withService(t)
	for _, tt := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"rules", "9"}, "santactl: rules: no service 9 (ENOENT)\n"},
		{[]string{"rules", "7", "9"}, "santactl: rules: service 7 has no rule 9\n"},
		{[]string{"stats", "8"}, "santactl: stats: no service 8 (ENOENT)\n"},
		{[]string{"-socket", path + ".none", "status"}, "santactl: status: dial santad: dial unixpacket " + path + ".none: connect: no such file or directory; is santad running, with its socket there? ($SANTA_SOCKET names another socket)\n"},
	} {
		stdout, stderr, code := santactl(t, path, tt.args...)
		if stdout != "" || stderr != tt.stderr || code != 1 {
			t.Errorf("%q: stdout %q, stderr %q, exit status %d; want stderr %q and status 1", tt.args, stdout, stderr, code, tt.stderr)
		}
	}
}
