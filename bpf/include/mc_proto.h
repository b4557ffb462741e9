/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* What memcached's request and reply parsers (mc_request.h, mc_reply.h)
 * share: the events they report, the token a line is cut into, and the
 * limits (docs/memcached.md, "Parsing the streams"). Both parse a stream a
 * byte at a time with a small fixed-size state, so that a command or a
 * reply may be cut anywhere across segments; internal/mcproto is the Go
 * reference of the same machines, state byte for state byte.
 *
 * The program that includes these headers defines the function that
 * receives the events:
 *
 *	static void mc_event(void *user, const struct mc_event *ev);
 *
 * called in stream order; user is what the caller passed to the parse call.
 *
 * For the verifier: a byte is taken by a global function (mc_req_step,
 * mc_rep_step), verified once whatever its callers, which writes the
 * byte's events (two at most) to a struct mc_step; a bpf_loop callback,
 * also verified once, runs it on each byte and hands the events on.
 */
#ifndef SANTA_MC_PROTO_H
#define SANTA_MC_PROTO_H

enum {
	MC_CHUNK = 2048,     /* bytes one parse call reads: the buffer's size, a power of 2 */
	MC_MAX_LINE = 2048,  /* bytes of a line (but a get/gets line, which is read to its end) */
	MC_MAX_KEY = 250,    /* memcached's KEY_MAX_LENGTH */
	MC_MAX_FLAGS = 16,   /* flags of a meta command (memcached takes 16 on ms, 17 on the others) */
	MC_MAX_DIGITS = 9,   /* digits of a length, flags, exptime, delay: below 2^31 */
	MC_MAX_CAS_DIGITS = 19, /* digits of a cas unique: below 2^64 */
};

enum mc_event_type {
	MC_EV_KEY = 1,    /* a write to the key hashed in hash: invalidate it now */
	MC_EV_ALL = 2,    /* a write to keys not known (flush_all, a base64 key): invalidate the service */
	MC_EV_CMD = 3,    /* a command fully received (its data too) */
	MC_EV_LOST = 4,   /* lost sync (reason in flags): nothing more is parsed */
	MC_EV_REPLY = 5,  /* a reply fully sent */
};

/* Request commands (struct mc_event.cmd). */
enum mc_cmd {
	MC_CMD_NONE = 0,
	MC_CMD_GET, MC_CMD_GETS, MC_CMD_GAT, MC_CMD_GATS,
	MC_CMD_SET, MC_CMD_ADD, MC_CMD_REPLACE, MC_CMD_APPEND, MC_CMD_PREPEND, MC_CMD_CAS,
	MC_CMD_INCR, MC_CMD_DECR, MC_CMD_DELETE, MC_CMD_TOUCH, MC_CMD_FLUSH_ALL,
	MC_CMD_VERSION, MC_CMD_VERBOSITY, MC_CMD_QUIT, MC_CMD_STATS,
	MC_CMD_MG, MC_CMD_MS, MC_CMD_MD, MC_CMD_MA, MC_CMD_MN, MC_CMD_ME,
};

/* How many replies a command gets (struct mc_event.reply of MC_EV_CMD). */
enum mc_reply {
	MC_REPLY_NONE = 0,  /* noreply, quit */
	MC_REPLY_ONE = 1,
	MC_REPLY_MAYBE = 2, /* a meta command with q: none on success, one otherwise */
};

/* What a reply is (struct mc_event.reply of MC_EV_REPLY): whose it can be. */
enum mc_family {
	MC_FAM_TEXT = 1,  /* STORED, VALUE...END, a number...: a text command's */
	MC_FAM_META = 2,  /* HD, VA, EN, NS, EX, NF, ME: a meta command's */
	MC_FAM_MN = 3,    /* MN: an mn's */
	MC_FAM_ERROR = 4, /* ERROR, CLIENT_ERROR, SERVER_ERROR: any command's */
};

/* struct mc_event.flags of MC_EV_REPLY. */
enum mc_reply_flag {
	MC_RF_STORED = 1, /* the reply is STORED */
};

/* struct mc_event.flags of MC_EV_CMD. */
enum mc_cmd_flag {
	MC_CF_WRITE = 1, /* may change data: its keys were reported (KEY or ALL) */
	MC_CF_ALL = 2,   /* its change is not one key's: flush_all, a base64 key, several keys */
	MC_CF_TTL = 4,   /* may give its keys an expiry: a storage command's nonzero exptime, touch, gat, meta */
};

/* Why sync was lost (struct mc_event.flags of MC_EV_LOST). */
enum mc_lost {
	MC_LOST_BINARY = 1,  /* the binary protocol (first byte 0x80, or 0x81 for replies) */
	MC_LOST_COMMAND = 2, /* an unknown command or reply */
	MC_LOST_FORMAT = 3,  /* a known one with arguments memcached may read otherwise */
	MC_LOST_LINE = 4,    /* a line longer than MC_MAX_LINE */
	MC_LOST_BYTE = 5,    /* a NUL, a CR not before LF, an empty line */
};

/* One event, 24 bytes. off: the bytes of the parse call's buffer consumed
 * when it happened (just past the command's or reply's last byte). */
struct mc_event {
	__u8 type;   /* enum mc_event_type */
	__u8 cmd;    /* CMD: enum mc_cmd */
	__u8 reply;  /* CMD: enum mc_reply; REPLY: enum mc_family */
	__u8 flags;  /* CMD: enum mc_cmd_flag; REPLY: enum mc_reply_flag; LOST: enum mc_lost */
	__u32 off;
	__u32 hash;  /* KEY, CMD: FNV-1a of the key (CMD: a write with one key) */
	__u32 seq;   /* CMD: done_at (struct mc_req_state.due); REPLY: replies seen (mc_rep_state.seen) */
	__s32 arg;   /* ALL and CMD of flush_all: its delay */
	__u32 pad;
};

static void mc_event(void *user, const struct mc_event *ev);

/* The events of one byte. */
#define MC_STEP_EVENTS 2
struct mc_step {
	__u32 n;
	__u32 pad;
	struct mc_event ev[MC_STEP_EVENTS];
};

/* The token being read, 24 bytes. */
struct mc_token {
	__u64 word;  /* 0: the token as a name, 5 bits a letter ([a-z_] in requests, [A-Z_] in replies), or MC_WORD_BAD */
	__u32 hash;  /* 8: FNV-1a 32 of its bytes */
	__u32 num;   /* 12: the value of its first MC_MAX_DIGITS digits */
	__u16 len;   /* 16: bytes */
	__u8 bits;   /* 18: MC_TOK_DIGITS, MC_TOK_NEG */
	__u8 first;  /* 19: its first byte */
	__u32 pad;   /* 20 */
};

#define MC_WORD_BAD (~0ULL)
#define MC_TOK_DIGITS 1 /* nothing but digits after an optional leading '-' */
#define MC_TOK_NEG 2    /* a leading '-' */
#define MC_FNV_OFFSET 2166136261u
#define MC_FNV_PRIME 16777619u

/* A name as packed in mc_token.word, from its letters. */
#define MC_C(c) ((c) == '_' ? 27ULL : (unsigned long long)(((c) | 0x20) - 'a' + 1))
#define MC_W2(a, b) ((MC_C(a) << 5) | MC_C(b))
#define MC_W3(a, b, c) ((MC_W2(a, b) << 5) | MC_C(c))
#define MC_W4(a, b, c, d) ((MC_W3(a, b, c) << 5) | MC_C(d))
#define MC_W5(a, b, c, d, e) ((MC_W4(a, b, c, d) << 5) | MC_C(e))
#define MC_W6(a, b, c, d, e, f) ((MC_W5(a, b, c, d, e) << 5) | MC_C(f))
#define MC_W7(a, b, c, d, e, f, g) ((MC_W6(a, b, c, d, e, f) << 5) | MC_C(g))
#define MC_W9(a, b, c, d, e, f, g, h, i) ((((MC_W7(a, b, c, d, e, f, g) << 5) | MC_C(h)) << 5) | MC_C(i))
#define MC_W10(a, b, c, d, e, f, g, h, i, j) ((MC_W9(a, b, c, d, e, f, g, h, i) << 5) | MC_C(j))
#define MC_W12(a, b, c, d, e, f, g, h, i, j, k, l) \
	((((MC_W10(a, b, c, d, e, f, g, h, i, j) << 5) | MC_C(k)) << 5) | MC_C(l))

static __always_inline void mc_token_start(struct mc_token *t)
{
	t->word = 0;
	t->hash = MC_FNV_OFFSET;
	t->num = 0;
	t->len = 0;
	t->bits = MC_TOK_DIGITS;
	t->first = 0;
	t->pad = 0;
}

/* Adds byte b to the token; names are lowercase (requests) or uppercase. */
static __always_inline void mc_token_byte(struct mc_token *t, __u8 b, int upper)
{
	__u8 lo = upper ? 'A' : 'a';

	if (t->len == 0)
		t->first = b;
	t->hash = (t->hash ^ b) * MC_FNV_PRIME;
	if (t->word != MC_WORD_BAD) {
		if (t->len >= 12)
			t->word = MC_WORD_BAD;
		else if (b >= lo && b <= lo + 25)
			t->word = (t->word << 5) | (__u64)(b - lo + 1);
		else if (b == '_')
			t->word = (t->word << 5) | 27;
		else
			t->word = MC_WORD_BAD;
	}
	if (b >= '0' && b <= '9') {
		if (t->len < MC_MAX_DIGITS + 1)
			t->num = t->num * 10 + (b - '0');
	} else if (b == '-' && t->len == 0) {
		t->bits |= MC_TOK_NEG;
	} else {
		t->bits &= ~MC_TOK_DIGITS;
	}
	if (t->len < 0xffff)
		t->len++;
}

/* Whether the token is a decimal number of 1 to max digits, with a sign
 * if signed_ok: what memcached's safe_strto* read the same way. */
static __always_inline int mc_token_number(const struct mc_token *t, int signed_ok, __u32 max)
{
	__u32 neg = (t->bits & MC_TOK_NEG) ? 1 : 0;

	if (!(t->bits & MC_TOK_DIGITS) || (neg && !signed_ok))
		return 0;
	return t->len > neg && t->len - neg <= max;
}

/* A new event of the byte, zeroed but for type and off; NULL past
 * MC_STEP_EVENTS, which no byte reaches. */
static __always_inline struct mc_event *mc_push(struct mc_step *out, __u8 type, __u32 off)
{
	struct mc_event *ev;

	if (out->n >= MC_STEP_EVENTS)
		return NULL;
	ev = &out->ev[out->n & (MC_STEP_EVENTS - 1)];
	out->n++;
	__builtin_memset(ev, 0, sizeof(*ev));
	ev->type = type;
	ev->off = off;
	return ev;
}

/* A parse call's bpf_loop context: the state (struct mc_req_state or
 * mc_rep_state), the bytes, the caller's user, and the byte's events. */
struct mc_loop {
	void *st;
	const __u8 *buf;
	void *user;
	__u64 mn_mark; /* the reply parser's */
	__u32 base;    /* where in buf the bytes start (the request parser's) */
	__u32 pad;
	struct mc_step out;
};

/* Of the next avail bytes, those that are data to skip unread, taken off
 * *skip: all of a value's data but its last byte, which the parse call
 * reads to report the value's end. */
static __always_inline __u32 mc_skip(__u32 *skip, int in_data, __u32 avail)
{
	__u32 n;

	if (!in_data || *skip <= 1)
		return 0;
	n = *skip - 1 < avail ? *skip - 1 : avail;
	*skip -= n;
	return n;
}

/* Hands the byte's events on to mc_event. */
static __always_inline void mc_deliver(struct mc_step *out, void *user)
{
	for (int k = 0; k < MC_STEP_EVENTS; k++)
		if (k < out->n)
			mc_event(user, &out->ev[k]);
}

#endif /* SANTA_MC_PROTO_H */
