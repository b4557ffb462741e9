/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* memcached's replies, server to client, on a TCP connection: where each
 * reply ends, and whose it can be (enum mc_family), so that the caller
 * knows which of the connection's commands memcached is done with: a
 * connection's commands are answered in order. docs/memcached.md,
 * "Parsing the streams"; internal/mcproto is the Go reference.
 *
 * Use as mc_request.h: mc_rep_skip over a value's data, mc_rep_parse on up
 * to MC_CHUNK bytes at a time. mn_mark is the connection's request state's
 * mn_mark, read once per call (one 8-byte load: the request side writes it
 * in one store).
 */
#ifndef SANTA_MC_REPLY_H
#define SANTA_MC_REPLY_H

#include "mc_proto.h"

/* A connection's reply parser, 48 bytes, zeroed at the stream's start. */
struct mc_rep_state {
	struct mc_token tok; /* 0: the token being read */
	__u8 phase;          /* 24: enum mc_rep_phase */
	__u8 kind;           /* 25: the line's first token, enum mc_rep_kind */
	__u8 ntok;           /* 26: tokens of the line so far (saturates) */
	__u8 bits;           /* 27: MC_RP_* */
	__u16 line;          /* 28: bytes of the line so far */
	__u16 pad;           /* 30 */
	__u32 skip;          /* 32: data bytes still to come, its CRLF included */
	__u32 seen;          /* 36: replies done, by the commands' count (mc_req_state.due) */
	__u32 mn_seen;       /* 40: MN replies */
	__u32 pad2;          /* 44 */
};

enum mc_rep_phase {
	MC_RP_SEP = 0, /* between tokens, or at a line's start */
	MC_RP_TOKEN,   /* in a token */
	MC_RP_CR,      /* after a CR: LF must follow */
	MC_RP_REST,    /* in the rest of a line that does not matter */
	MC_RP_DATA,    /* in a value's data */
	MC_RP_LOST,
};

/* What a line is, by its first token. */
enum mc_rep_kind {
	MC_RK_NONE = 0,
	MC_RK_VALUE, /* VALUE <key> <flags> <bytes> [<cas>], then data: more of a get's reply */
	MC_RK_STAT,  /* STAT, ITEM, PREFIX ...: more of a stats reply */
	MC_RK_VA,    /* VA <size> <flags>*, then data: a reply */
	MC_RK_ALONE, /* END, STORED, a number...: a text reply, nothing after it on its line */
	MC_RK_TEXT,  /* VERSION ...: a text reply */
	MC_RK_META,  /* HD NS EX NF EN ME ...: a meta reply */
	MC_RK_MN,
	MC_RK_ERROR, /* ERROR, CLIENT_ERROR ..., SERVER_ERROR ...: a reply */
};

#define MC_RP_STARTED 1 /* the stream's first byte was seen */
#define MC_RP_MULTI 2   /* in a get's or a stats' reply: before its END */

static __always_inline __u8 mc_rep_kind(struct mc_token *t)
{
	switch (t->word) {
	case MC_W5('V', 'A', 'L', 'U', 'E'): return MC_RK_VALUE;
	case MC_W4('S', 'T', 'A', 'T'): case MC_W4('I', 'T', 'E', 'M'): case MC_W6('P', 'R', 'E', 'F', 'I', 'X'):
		return MC_RK_STAT;
	case MC_W2('V', 'A'): return MC_RK_VA;
	case MC_W3('E', 'N', 'D'): case MC_W6('S', 'T', 'O', 'R', 'E', 'D'):
	case MC_W10('N', 'O', 'T', '_', 'S', 'T', 'O', 'R', 'E', 'D'): case MC_W6('E', 'X', 'I', 'S', 'T', 'S'):
	case MC_W9('N', 'O', 'T', '_', 'F', 'O', 'U', 'N', 'D'): case MC_W7('D', 'E', 'L', 'E', 'T', 'E', 'D'):
	case MC_W7('T', 'O', 'U', 'C', 'H', 'E', 'D'): case MC_W2('O', 'K'): case MC_W5('R', 'E', 'S', 'E', 'T'):
		return MC_RK_ALONE;
	case MC_W7('V', 'E', 'R', 'S', 'I', 'O', 'N'): return MC_RK_TEXT;
	case MC_W2('H', 'D'): case MC_W2('N', 'S'): case MC_W2('E', 'X'): case MC_W2('N', 'F'):
	case MC_W2('E', 'N'): case MC_W2('M', 'E'):
		return MC_RK_META;
	case MC_W2('M', 'N'): return MC_RK_MN;
	case MC_W5('E', 'R', 'R', 'O', 'R'):
	case MC_W12('C', 'L', 'I', 'E', 'N', 'T', '_', 'E', 'R', 'R', 'O', 'R'):
	case MC_W12('S', 'E', 'R', 'V', 'E', 'R', '_', 'E', 'R', 'R', 'O', 'R'):
		return MC_RK_ERROR;
	}
	/* incr/decr's new value */
	return mc_token_number(t, 0, 20) ? MC_RK_ALONE : MC_RK_NONE;
}

static __always_inline int mc_rep_lose(struct mc_rep_state *st, struct mc_step *out, __u8 reason, __u32 off)
{
	struct mc_event *ev = mc_push(out, MC_EV_LOST, off);

	if (ev)
		ev->flags = reason;
	st->phase = MC_RP_LOST;
	return -1;
}

/* A reply ended: counted; after the n-th MN, if the n-th mn was the last
 * one received, every command up to it is done. */
static __always_inline void mc_rep_done(struct mc_rep_state *st, __u8 family, __u8 flags, __u64 mn_mark,
					struct mc_step *out, __u32 off)
{
	struct mc_event *ev = mc_push(out, MC_EV_REPLY, off);

	st->seen++;
	if (family == MC_FAM_MN) {
		st->mn_seen++;
		if ((__u32)(mn_mark >> 32) == st->mn_seen && (__s32)((__u32)mn_mark - st->seen) > 0)
			st->seen = (__u32)mn_mark;
	}
	if (ev) {
		ev->reply = family;
		ev->flags = flags;
		ev->seq = st->seen;
	}
	st->bits &= MC_RP_STARTED;
}

static __always_inline void mc_rep_line_reset(struct mc_rep_state *st)
{
	st->phase = MC_RP_SEP;
	st->kind = MC_RK_NONE;
	st->ntok = 0;
	st->line = 0;
}

static __always_inline int mc_rep_token_end(struct mc_rep_state *st, struct mc_step *out, __u32 off)
{
	struct mc_token *t = &st->tok;
	__u8 i = st->ntok;

	if (st->ntok < 255)
		st->ntok++;
	if (i == 0) {
		st->kind = mc_rep_kind(t);
		if (st->kind == MC_RK_NONE)
			return mc_rep_lose(st, out, MC_LOST_COMMAND, off);
		/* In a get's or stats' reply, only its lines, END or an error. */
		if ((st->bits & MC_RP_MULTI) && st->kind != MC_RK_VALUE && st->kind != MC_RK_STAT &&
		    st->kind != MC_RK_ERROR && t->word != MC_W3('E', 'N', 'D'))
			return mc_rep_lose(st, out, MC_LOST_FORMAT, off);
		if (st->kind == MC_RK_STAT || st->kind == MC_RK_TEXT || st->kind == MC_RK_META ||
		    st->kind == MC_RK_MN || st->kind == MC_RK_ERROR)
			st->phase = MC_RP_REST;
		return 0;
	}
	if (st->kind == MC_RK_ALONE || (st->kind == MC_RK_VALUE && i > 4))
		return mc_rep_lose(st, out, MC_LOST_FORMAT, off);
	if ((st->kind == MC_RK_VALUE && i == 3) || (st->kind == MC_RK_VA && i == 1)) {
		if (!mc_token_number(t, 0, MC_MAX_DIGITS))
			return mc_rep_lose(st, out, MC_LOST_FORMAT, off);
		st->skip = t->num + 2;
	}
	return 0;
}

static __always_inline int mc_rep_line_end(struct mc_rep_state *st, __u64 mn_mark, struct mc_step *out, __u32 off)
{
	__u8 kind = st->kind;
	/* A line alone has one token: the one just read. */
	__u8 stored = kind == MC_RK_ALONE && st->tok.word == MC_W6('S', 'T', 'O', 'R', 'E', 'D');

	if (st->ntok == 0)
		return mc_rep_lose(st, out, MC_LOST_BYTE, off);
	if ((kind == MC_RK_VALUE && st->ntok < 4) || (kind == MC_RK_VA && st->ntok < 2))
		return mc_rep_lose(st, out, MC_LOST_FORMAT, off);
	mc_rep_line_reset(st);
	switch (kind) {
	case MC_RK_VALUE:
		st->bits |= MC_RP_MULTI;
		/* fall through */
	case MC_RK_VA:
		st->kind = kind; /* what the data's end is */
		st->phase = MC_RP_DATA;
		return 0;
	case MC_RK_STAT:
		st->bits |= MC_RP_MULTI;
		return 0;
	case MC_RK_META:
		mc_rep_done(st, MC_FAM_META, 0, mn_mark, out, off);
		return 0;
	case MC_RK_MN:
		mc_rep_done(st, MC_FAM_MN, 0, mn_mark, out, off);
		return 0;
	case MC_RK_ERROR:
		mc_rep_done(st, MC_FAM_ERROR, 0, mn_mark, out, off);
		return 0;
	}
	mc_rep_done(st, MC_FAM_TEXT, stored ? MC_RF_STORED : 0, mn_mark, out, off);
	return 0;
}

/* One byte, b; off counts it. Its events go to out (out->n zeroed by the
 * caller). Returns -1 if sync is lost. */
__noinline int mc_rep_step(struct mc_rep_state *st, struct mc_step *out, __u32 b, __u64 mn_mark, __u32 off)
{
	if (!st || !out)
		return -1;
	if (st->phase == MC_RP_DATA) {
		if (--st->skip == 0) {
			__u8 kind = st->kind;

			st->phase = MC_RP_SEP;
			st->kind = MC_RK_NONE;
			if (kind == MC_RK_VA)
				mc_rep_done(st, MC_FAM_META, 0, mn_mark, out, off);
		}
		return 0;
	}
	if (!(st->bits & MC_RP_STARTED)) {
		st->bits |= MC_RP_STARTED;
		if (b == 0x81) /* a binary protocol response's magic */
			return mc_rep_lose(st, out, MC_LOST_BINARY, off);
	}
	if (++st->line > MC_MAX_LINE)
		return mc_rep_lose(st, out, MC_LOST_LINE, off);
	if (st->phase == MC_RP_CR) {
		if (b != '\n')
			return mc_rep_lose(st, out, MC_LOST_BYTE, off);
		return mc_rep_line_end(st, mn_mark, out, off);
	}
	if (st->phase == MC_RP_REST) {
		if (b == '\n')
			return mc_rep_line_end(st, mn_mark, out, off);
		return 0;
	}
	if (b == ' ' || b == '\r' || b == '\n') {
		if (st->phase == MC_RP_TOKEN) {
			st->phase = MC_RP_SEP;
			if (mc_rep_token_end(st, out, off))
				return -1;
		}
		if (b == '\n')
			return mc_rep_line_end(st, mn_mark, out, off);
		if (b == '\r' && st->phase == MC_RP_SEP)
			st->phase = MC_RP_CR;
		return 0;
	}
	if (b == 0)
		return mc_rep_lose(st, out, MC_LOST_BYTE, off);
	if (st->phase == MC_RP_SEP) {
		mc_token_start(&st->tok);
		st->phase = MC_RP_TOKEN;
	}
	mc_token_byte(&st->tok, b, 1);
	return 0;
}

static long mc_rep_loop_byte(__u64 i, void *ctx)
{
	struct mc_loop *l = ctx;
	int lost;

	l->out.n = 0;
	lost = mc_rep_step(l->st, &l->out, l->buf[i & (MC_CHUNK - 1)], l->mn_mark, (__u32)i + 1);
	mc_deliver(&l->out, l->user);
	return lost ? 1 : 0;
}

/* Parses buf[0, len), len <= MC_CHUNK; buf holds MC_CHUNK bytes. */
static __always_inline int mc_rep_parse(struct mc_rep_state *st, const __u8 *buf, __u32 len, __u64 mn_mark,
					void *user)
{
	struct mc_loop l = { .st = st, .buf = buf, .user = user, .mn_mark = mn_mark };

	if (st->phase == MC_RP_LOST)
		return -1;
	if (len > MC_CHUNK) { /* the caller's mistake: safe, not silent */
		mc_rep_lose(st, &l.out, MC_LOST_LINE, 0);
		mc_deliver(&l.out, user);
		return -1;
	}
	bpf_loop(len, mc_rep_loop_byte, &l, 0);
	return st->phase == MC_RP_LOST ? -1 : 0;
}

/* As mc_req_skip: a value's data but its last byte. */
static __always_inline __u32 mc_rep_skip(struct mc_rep_state *st, __u32 avail)
{
	return mc_skip(&st->skip, st->phase == MC_RP_DATA, avail);
}

#endif /* SANTA_MC_REPLY_H */
