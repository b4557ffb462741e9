/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* memcached's requests, client to server, as memcached 1.6 reads them
 * (proto_text.c): which commands write which keys, how many replies each
 * gets, where each ends. A TCP connection's stream is parsed with one
 * struct mc_req_state kept across its segments; a UDP datagram's payload
 * (after its 8-byte frame header) with a fresh one. docs/memcached.md,
 * "Parsing the streams", is the specification; internal/mcproto the Go
 * reference.
 *
 * Use, for each segment: mc_req_skip over what needs no reading (a value's
 * data), then mc_req_parse on up to MC_CHUNK bytes copied to a buffer, and
 * again until the segment is consumed. Both return -1 once sync is lost
 * (MC_EV_LOST was reported; every later call returns -1 at once).
 */
#ifndef SANTA_MC_REQUEST_H
#define SANTA_MC_REQUEST_H

#include "mc_proto.h"

/* A connection's request parser, 64 bytes, zeroed at the stream's start. */
struct mc_req_state {
	struct mc_token tok; /* 0: the token being read */
	__u8 phase;          /* 24: enum mc_req_phase */
	__u8 cmd;            /* 25: the line's command, enum mc_cmd (0: none yet) */
	__u8 ntok;           /* 26: tokens of the line so far, the command's included (saturates) */
	__u8 bits;           /* 27: MC_RQ_* */
	__u16 line;          /* 28: bytes of the line so far */
	__u16 nkeys;         /* 30: keys of a gat/gats so far (saturates) */
	__u32 key;           /* 32: FNV-1a of the command's key */
	__u32 skip;          /* 36: data bytes still to come (MC_RQ_DATA), its CRLF included */
	__s32 arg;           /* 40: flush_all's delay */
	__u32 due;           /* 44: replies the commands so far may get (ONE and MAYBE count 1) */
	__u64 mflags;        /* 48: a meta command's flags: bit (c - 'A') for flag c, bit 63 for any other */
	__u64 mn_mark;       /* 56: (number of mn commands << 32) | due as of the last mn */
};

enum mc_req_phase {
	MC_RQ_SEP = 0,  /* between tokens, or at a line's start */
	MC_RQ_TOKEN,    /* in a token */
	MC_RQ_CR,       /* after a CR: LF must follow */
	MC_RQ_REST,     /* in a get/gets line: its keys do not matter, its end does */
	MC_RQ_DATA,     /* in a value's data */
	MC_RQ_LOST,
};

#define MC_RQ_STARTED 1 /* the stream's first byte was seen */
#define MC_RQ_NOREPLY 2 /* the last token was "noreply" */
#define MC_RQ_DELAY 4   /* flush_all's first argument was a number (in arg) */
#define MC_RQ_TTL 8     /* a storage command's exptime is not 0 */

#define MC_NOREPLY MC_W7('n', 'o', 'r', 'e', 'p', 'l', 'y')
/* Flags an mg may carry and stay a read (protocol.txt: N, R, T modify). */
#define MC_FLAG(c) (1ULL << ((c) - 'A'))
#define MC_MG_READ_FLAGS                                                                         \
	(MC_FLAG('b') | MC_FLAG('c') | MC_FLAG('f') | MC_FLAG('h') | MC_FLAG('k') | MC_FLAG('l') | \
	 MC_FLAG('O') | MC_FLAG('P') | MC_FLAG('L') | MC_FLAG('q') | MC_FLAG('s') | MC_FLAG('t') | \
	 MC_FLAG('u') | MC_FLAG('v'))

static __always_inline __u8 mc_req_command(__u64 word)
{
	switch (word) {
	case MC_W3('g', 'e', 't'): return MC_CMD_GET;
	case MC_W4('g', 'e', 't', 's'): return MC_CMD_GETS;
	case MC_W3('g', 'a', 't'): return MC_CMD_GAT;
	case MC_W4('g', 'a', 't', 's'): return MC_CMD_GATS;
	case MC_W3('s', 'e', 't'): return MC_CMD_SET;
	case MC_W3('a', 'd', 'd'): return MC_CMD_ADD;
	case MC_W7('r', 'e', 'p', 'l', 'a', 'c', 'e'): return MC_CMD_REPLACE;
	case MC_W6('a', 'p', 'p', 'e', 'n', 'd'): return MC_CMD_APPEND;
	case MC_W7('p', 'r', 'e', 'p', 'e', 'n', 'd'): return MC_CMD_PREPEND;
	case MC_W3('c', 'a', 's'): return MC_CMD_CAS;
	case MC_W4('i', 'n', 'c', 'r'): return MC_CMD_INCR;
	case MC_W4('d', 'e', 'c', 'r'): return MC_CMD_DECR;
	case MC_W6('d', 'e', 'l', 'e', 't', 'e'): return MC_CMD_DELETE;
	case MC_W5('t', 'o', 'u', 'c', 'h'): return MC_CMD_TOUCH;
	case MC_W9('f', 'l', 'u', 's', 'h', '_', 'a', 'l', 'l'): return MC_CMD_FLUSH_ALL;
	case MC_W7('v', 'e', 'r', 's', 'i', 'o', 'n'): return MC_CMD_VERSION;
	case MC_W9('v', 'e', 'r', 'b', 'o', 's', 'i', 't', 'y'): return MC_CMD_VERBOSITY;
	case MC_W4('q', 'u', 'i', 't'): return MC_CMD_QUIT;
	case MC_W5('s', 't', 'a', 't', 's'): return MC_CMD_STATS;
	case MC_W2('m', 'g'): return MC_CMD_MG;
	case MC_W2('m', 's'): return MC_CMD_MS;
	case MC_W2('m', 'd'): return MC_CMD_MD;
	case MC_W2('m', 'a'): return MC_CMD_MA;
	case MC_W2('m', 'n'): return MC_CMD_MN;
	case MC_W2('m', 'e'): return MC_CMD_ME;
	}
	return MC_CMD_NONE;
}

/* set add replace append prepend cas: a line, then data. */
static __always_inline int mc_req_storage(__u8 cmd)
{
	return cmd >= MC_CMD_SET && cmd <= MC_CMD_CAS;
}

static __always_inline int mc_req_meta(__u8 cmd)
{
	return cmd >= MC_CMD_MG && cmd <= MC_CMD_MA;
}

static __always_inline int mc_req_lose(struct mc_req_state *st, struct mc_step *out, __u8 reason, __u32 off)
{
	struct mc_event *ev = mc_push(out, MC_EV_LOST, off);

	if (ev)
		ev->flags = reason;
	st->phase = MC_RQ_LOST;
	return -1;
}

/* The token st->tok just ended: the ntok-th of its line (0: the command).
 * Checks what memcached would read otherwise; remembers what the line's
 * end needs. */
static __always_inline int mc_req_token_end(struct mc_req_state *st, struct mc_step *out, __u32 off)
{
	struct mc_token *t = &st->tok;
	__u8 i = st->ntok, cmd = st->cmd;
	int ok = 1;

	if (st->ntok < 255)
		st->ntok++;
	if (t->word == MC_NOREPLY)
		st->bits |= MC_RQ_NOREPLY;
	else
		st->bits &= ~MC_RQ_NOREPLY;
	if (i == 0) {
		st->cmd = mc_req_command(t->word);
		if (st->cmd == MC_CMD_NONE)
			return mc_req_lose(st, out, MC_LOST_COMMAND, off);
		if (st->cmd == MC_CMD_GET || st->cmd == MC_CMD_GETS)
			st->phase = MC_RQ_REST;
		return 0;
	}
	if (cmd == MC_CMD_GAT || cmd == MC_CMD_GATS) {
		/* gat <exptime> <key>*: each key is touched. */
		if (i >= 2) {
			struct mc_event *ev = mc_push(out, MC_EV_KEY, off);

			if (ev)
				ev->hash = t->hash;
			st->key = t->hash;
			if (st->nkeys < 0xffff)
				st->nkeys++;
		}
		return 0;
	}
	if (i == 1 && (mc_req_storage(cmd) || mc_req_meta(cmd) || cmd == MC_CMD_INCR || cmd == MC_CMD_DECR ||
		       cmd == MC_CMD_DELETE || cmd == MC_CMD_TOUCH)) {
		/* memcached rejects a longer key before anything else, without
		 * reading a storage command's data. */
		if (t->len > MC_MAX_KEY)
			ok = 0;
		st->key = t->hash;
	} else if (mc_req_storage(cmd)) {
		/* <key> <flags> <exptime> <bytes> [<cas>] [noreply]: a number
		 * memcached reads otherwise means its data is read as commands. */
		if (i == 2)
			ok = mc_token_number(t, 0, MC_MAX_DIGITS);
		else if (i == 3) {
			ok = mc_token_number(t, 1, MC_MAX_DIGITS);
			if (t->num)
				st->bits |= MC_RQ_TTL;
		} else if (i == 4) {
			ok = mc_token_number(t, 0, MC_MAX_DIGITS);
			st->skip = t->num + 2;
		} else if (i == 5 && cmd == MC_CMD_CAS)
			ok = mc_token_number(t, 0, MC_MAX_CAS_DIGITS);
	} else if (cmd == MC_CMD_MS && i == 2) {
		ok = mc_token_number(t, 0, MC_MAX_DIGITS);
		st->skip = t->num + 2;
	} else if (mc_req_meta(cmd)) {
		if (i > MC_MAX_FLAGS + (cmd == MC_CMD_MS ? 2 : 1))
			ok = 0;
		else if (t->first >= 'A' && t->first <= 'z')
			st->mflags |= MC_FLAG(t->first);
		else
			st->mflags |= 1ULL << 63;
	} else if (cmd == MC_CMD_FLUSH_ALL && i == 1 && mc_token_number(t, 1, MC_MAX_DIGITS)) {
		st->bits |= MC_RQ_DELAY;
		st->arg = (t->bits & MC_TOK_NEG) ? -(__s32)t->num : (__s32)t->num;
	}
	if (!ok)
		return mc_req_lose(st, out, MC_LOST_FORMAT, off);
	return 0;
}

/* Whether a line of ntok tokens is one memcached dispatches to cmd (its
 * WANT_TOKENS: ntok is its ntokens - 1), with the arguments we read. */
static __always_inline int mc_req_arity(struct mc_req_state *st)
{
	__u8 n = st->ntok;

	switch (st->cmd) {
	case MC_CMD_SET: case MC_CMD_ADD: case MC_CMD_REPLACE: case MC_CMD_APPEND: case MC_CMD_PREPEND:
		return n == 5 || n == 6;
	case MC_CMD_CAS:
		return n == 6 || n == 7;
	case MC_CMD_INCR: case MC_CMD_DECR: case MC_CMD_TOUCH:
		return n == 3 || n == 4;
	case MC_CMD_DELETE:
		return n >= 2 && n <= 4;
	case MC_CMD_VERBOSITY:
		return n == 2 || n == 3;
	case MC_CMD_FLUSH_ALL:
		/* flush_all [delay] [noreply]: memcached reads the first
		 * argument as the delay unless it is the noreply alone. */
		if (n == 1 || (n == 2 && (st->bits & MC_RQ_NOREPLY)))
			return 1;
		return (n == 2 || (n == 3 && (st->bits & MC_RQ_NOREPLY))) && (st->bits & MC_RQ_DELAY);
	case MC_CMD_GAT: case MC_CMD_GATS: case MC_CMD_MG: case MC_CMD_MD: case MC_CMD_MA:
		return n >= 2;
	case MC_CMD_MS:
		return n >= 3;
	}
	return 1; /* version quit stats mn me: any */
}

/* Whether the command may change data, and what it changes. Whether it
 * may give a key an expiry (MC_CF_TTL) is told generously: every meta
 * write, whatever its flags. */
static __always_inline __u8 mc_req_write(struct mc_req_state *st)
{
	switch (st->cmd) {
	case MC_CMD_MG:
		if (!(st->mflags & ~MC_MG_READ_FLAGS))
			return 0;
		/* fall through */
	case MC_CMD_MS: case MC_CMD_MD: case MC_CMD_MA:
		/* A base64 key (b) is decoded by memcached: not the key hashed. */
		return MC_CF_WRITE | MC_CF_TTL | ((st->mflags & MC_FLAG('b')) ? MC_CF_ALL : 0);
	case MC_CMD_GAT: case MC_CMD_GATS:
		return st->nkeys == 0 ? 0 : MC_CF_WRITE | MC_CF_TTL | (st->nkeys > 1 ? MC_CF_ALL : 0);
	case MC_CMD_FLUSH_ALL:
		return MC_CF_WRITE | MC_CF_ALL;
	case MC_CMD_TOUCH:
		return MC_CF_WRITE | MC_CF_TTL;
	}
	if (mc_req_storage(st->cmd))
		return MC_CF_WRITE | ((st->bits & MC_RQ_TTL) ? MC_CF_TTL : 0);
	if (st->cmd >= MC_CMD_INCR && st->cmd <= MC_CMD_TOUCH)
		return MC_CF_WRITE;
	return 0;
}

static __always_inline __u8 mc_req_replies(struct mc_req_state *st)
{
	__u8 cmd = st->cmd;

	if (cmd == MC_CMD_QUIT)
		return MC_REPLY_NONE;
	if (mc_req_meta(cmd))
		return (st->mflags & MC_FLAG('q')) ? MC_REPLY_MAYBE : MC_REPLY_ONE;
	/* set_noreply_maybe: the last token, for the commands that ask it
	 * (delete only with an argument besides its key). */
	if ((st->bits & MC_RQ_NOREPLY) && (mc_req_storage(cmd) || cmd == MC_CMD_INCR || cmd == MC_CMD_DECR ||
					   cmd == MC_CMD_TOUCH || cmd == MC_CMD_VERBOSITY ||
					   cmd == MC_CMD_FLUSH_ALL || (cmd == MC_CMD_DELETE && st->ntok >= 3)))
		return MC_REPLY_NONE;
	return MC_REPLY_ONE;
}

/* The command is fully received (its data too): reported, counted, and
 * the next line starts. */
static __always_inline void mc_req_done(struct mc_req_state *st, struct mc_step *out, __u32 off)
{
	struct mc_event *ev = mc_push(out, MC_EV_CMD, off);
	__u8 reply = mc_req_replies(st), flags = mc_req_write(st);
	__u32 seq;

	if (reply != MC_REPLY_NONE)
		seq = ++st->due;
	else
		seq = st->due + 1; /* done once a later command's reply is */
	if (st->cmd == MC_CMD_MN)
		st->mn_mark = (((st->mn_mark >> 32) + 1) << 32) | st->due;
	if (ev) {
		ev->cmd = st->cmd;
		ev->reply = reply;
		ev->flags = flags;
		ev->seq = seq;
		if ((flags & (MC_CF_WRITE | MC_CF_ALL)) == MC_CF_WRITE)
			ev->hash = st->key;
		if (st->cmd == MC_CMD_FLUSH_ALL)
			ev->arg = st->arg;
	}
	st->phase = MC_RQ_SEP;
	st->cmd = MC_CMD_NONE;
	st->ntok = 0;
	st->bits &= MC_RQ_STARTED;
	st->line = 0;
	st->nkeys = 0;
	st->key = 0;
	st->skip = 0;
	st->arg = 0;
	st->mflags = 0;
}

/* The line ended: its keys are reported, then its data is awaited or the
 * command is done. */
static __always_inline int mc_req_line_end(struct mc_req_state *st, struct mc_step *out, __u32 off)
{
	__u8 w;

	if (st->ntok == 0)
		return mc_req_lose(st, out, MC_LOST_BYTE, off);
	if (!mc_req_arity(st))
		return mc_req_lose(st, out, MC_LOST_FORMAT, off);
	w = mc_req_write(st);
	if (w & MC_CF_WRITE && st->cmd != MC_CMD_GAT && st->cmd != MC_CMD_GATS) {
		struct mc_event *ev = mc_push(out, (w & MC_CF_ALL) ? MC_EV_ALL : MC_EV_KEY, off);

		if (ev && (w & MC_CF_ALL))
			ev->arg = st->arg;
		else if (ev)
			ev->hash = st->key;
	}
	if (mc_req_storage(st->cmd) || st->cmd == MC_CMD_MS) {
		st->phase = MC_RQ_DATA;
		return 0;
	}
	mc_req_done(st, out, off);
	return 0;
}

/* One byte, b; off counts it. Its events go to out (out->n zeroed by the
 * caller). Returns -1 if sync is lost. */
__noinline int mc_req_step(struct mc_req_state *st, struct mc_step *out, __u32 b, __u32 off)
{
	if (!st || !out)
		return -1;
	if (st->phase == MC_RQ_DATA) {
		if (--st->skip == 0)
			mc_req_done(st, out, off);
		return 0;
	}
	if (!(st->bits & MC_RQ_STARTED)) {
		st->bits |= MC_RQ_STARTED;
		/* memcached picks the binary protocol by a connection's (or
		 * datagram's) first byte. */
		if (b == 0x80)
			return mc_req_lose(st, out, MC_LOST_BINARY, off);
	}
	if (st->phase == MC_RQ_REST) {
		if (b == '\n')
			mc_req_done(st, out, off);
		return 0;
	}
	if (++st->line > MC_MAX_LINE)
		return mc_req_lose(st, out, MC_LOST_LINE, off);
	if (st->phase == MC_RQ_CR) {
		if (b != '\n')
			return mc_req_lose(st, out, MC_LOST_BYTE, off);
		return mc_req_line_end(st, out, off);
	}
	if (b == ' ' || b == '\r' || b == '\n') {
		if (st->phase == MC_RQ_TOKEN) {
			st->phase = MC_RQ_SEP;
			if (mc_req_token_end(st, out, off))
				return -1;
		}
		if (st->phase == MC_RQ_REST) {
			if (b == '\n')
				mc_req_done(st, out, off);
			return 0;
		}
		if (b == '\r')
			st->phase = MC_RQ_CR;
		else if (b == '\n')
			return mc_req_line_end(st, out, off);
		return 0;
	}
	if (b == 0)
		return mc_req_lose(st, out, MC_LOST_BYTE, off);
	if (st->phase == MC_RQ_SEP) {
		mc_token_start(&st->tok);
		st->phase = MC_RQ_TOKEN;
	}
	mc_token_byte(&st->tok, b, 0);
	return 0;
}

static long mc_req_loop_byte(__u64 i, void *ctx)
{
	struct mc_loop *l = ctx;
	int lost;

	l->out.n = 0;
	lost = mc_req_step(l->st, &l->out, l->buf[(l->base + i) & (MC_CHUNK - 1)], (__u32)i + 1);
	mc_deliver(&l->out, l->user);
	return lost ? 1 : 0;
}

/* Parses buf[base, base + len), base + len <= MC_CHUNK; buf holds MC_CHUNK
 * bytes (a UDP request's payload after its frame header, in place). Events'
 * off count from buf + base. */
static __always_inline int mc_req_parse_at(struct mc_req_state *st, const __u8 *buf, __u32 base, __u32 len,
					   void *user)
{
	struct mc_loop l = { .st = st, .buf = buf, .user = user, .base = base };

	if (st->phase == MC_RQ_LOST)
		return -1;
	if (base + len > MC_CHUNK) { /* the caller's mistake: safe, not silent */
		mc_req_lose(st, &l.out, MC_LOST_LINE, 0);
		mc_deliver(&l.out, user);
		return -1;
	}
	bpf_loop(len, mc_req_loop_byte, &l, 0);
	return st->phase == MC_RQ_LOST ? -1 : 0;
}

/* Parses buf[0, len), len <= MC_CHUNK; buf holds MC_CHUNK bytes. Events'
 * off count from buf. */
static __always_inline int mc_req_parse(struct mc_req_state *st, const __u8 *buf, __u32 len, void *user)
{
	return mc_req_parse_at(st, buf, 0, len, user);
}

/* Bytes of the next avail that are data to skip unread: all of a value's
 * data but its last byte, which mc_req_parse reads to report the command
 * done. The caller passes them by (and counts them in its offsets). */
static __always_inline __u32 mc_req_skip(struct mc_req_state *st, __u32 avail)
{
	return mc_skip(&st->skip, st->phase == MC_RQ_DATA, avail);
}

/* Whether the stream is between commands, in sync: where a UDP datagram
 * must end (memcached drops what a datagram leaves unfinished). */
static __always_inline int mc_req_idle(const struct mc_req_state *st)
{
	return st->phase == MC_RQ_SEP && st->ntok == 0;
}

#endif /* SANTA_MC_REQUEST_H */
