/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* The verdict's part of mc_fresh (mc_fresh.h): a set's value is taken as
 * it arrives, into its slot's record, not ready until memcached's STORED
 * for it leaves (mc_refresh.h). */
#ifndef SANTA_MC_CAPTURE_H
#define SANTA_MC_CAPTURE_H

#include "santa_abi.h"
#include "maps.h"
#include "mc_fresh.h"
#include "mc_inval.h"

#define SANTA_MC_CAPTURE_MAX 512 /* bytes of a set, its line and data, that are taken */
#define SANTA_MC_TEXT_AT 1024    /* where in the buffer the reply text is built */
#define SANTA_MC_WORK_AT 1536    /* where in the buffer the work below is */
#define SANTA_MC_MAX_TTL (60 * 60 * 24 * 30) /* above: memcached reads a unix time */

/* What taking a set works on, in the verdict's buffer after the set and
 * its text: the verifier does not follow map memory, so the bpf_loop
 * callbacks that change it are verified once, not for each value their
 * counters take on the stack. */
struct santa_mc_work {
	/* The set's line, cut by santa_mc_cut_byte: "set <key> <flags>
	 * <exptime> <bytes> ...", its numbers read as they go (the request
	 * parser let by none of more than 9 digits). */
	__u32 end;    /* past the line's LF; 0 until seen */
	__u32 ntok;
	__u32 in_tok;
	__u32 key;    /* where the key starts, */
	__u32 keylen; /* and its bytes */
	__u32 neg;    /* the exptime is negative */
	__u32 num[5]; /* the numbers of tokens 2 to 4 (flags, exptime, bytes) */
	__u32 sig[5]; /* and their digits but leading zeros */
	/* The reply text, written by santa_mc_text_byte. */
	__u32 fdigits, bdigits;
	__u32 data; /* where the data starts */
};

/* A callback's context: the buffer (a stack that never changes). */
struct santa_mc_work_ctx {
	struct santa_scratch *buf;
};

static __always_inline struct santa_mc_work *santa_mc_work_of(struct santa_scratch *buf)
{
	return (struct santa_mc_work *)&buf->buf[SANTA_MC_WORK_AT];
}

static long santa_mc_cut_byte(__u64 i, void *ctx)
{
	struct santa_scratch *buf = ((struct santa_mc_work_ctx *)ctx)->buf;
	struct santa_mc_work *w = santa_mc_work_of(buf);
	__u8 b = buf->buf[i & (SANTA_MC_CAPTURE_MAX - 1)];
	__u32 t;

	if (b == ' ' || b == '\r' || b == '\n') {
		w->in_tok = 0;
		if (b == '\n') {
			w->end = i + 1;
			return 1;
		}
		return 0;
	}
	if (!w->in_tok) {
		w->in_tok = 1;
		w->ntok++;
		if (w->ntok == 2)
			w->key = i;
	}
	t = w->ntok - 1;
	if (t == 1)
		w->keylen++;
	if (t < 2 || t > 4)
		return 0;
	if (b == '-') {
		w->neg = 1;
		return 0;
	}
	if (b < '0' || b > '9')
		return 1; /* not a number the parser lets by: not taken */
	if (w->num[t] || b != '0')
		w->sig[t]++;
	w->num[t] = w->num[t] * 10 + (b - '0');
	return 0;
}

static const __u32 santa_pow10[10] = { 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000 };

/* The k-th of the n decimal digits of v. */
static __always_inline __u8 santa_mc_digit(__u32 v, __u32 n, __u32 k)
{
	__u32 p = n - 1 - k;

	return p < 10 ? '0' + (v / santa_pow10[p]) % 10 : '0';
}

/* Byte i of "VALUE <key> <flags> <bytes>\r\n<data>\r\nEND\r\n". */
static long santa_mc_text_byte(__u64 i, void *ctx)
{
	struct santa_scratch *buf = ((struct santa_mc_work_ctx *)ctx)->buf;
	struct santa_mc_work *w = santa_mc_work_of(buf);
	__u32 at = i, flags = w->num[2], bytes = w->num[4];
	__u8 b;

	if (at < 6) {
		b = 0x2045554c4156ULL >> (at * 8); /* "VALUE " */
	} else if ((at -= 6) < w->keylen) {
		b = buf->buf[(w->key + at) & (SANTA_MC_CAPTURE_MAX - 1)];
	} else if ((at -= w->keylen) == 0) {
		b = ' ';
	} else if (--at < w->fdigits) {
		b = santa_mc_digit(flags, w->fdigits, at);
	} else if ((at -= w->fdigits) == 0) {
		b = ' ';
	} else if (--at < w->bdigits) {
		b = santa_mc_digit(bytes, w->bdigits, at);
	} else if ((at -= w->bdigits) < 2) {
		b = at ? '\n' : '\r';
	} else if ((at -= 2) < bytes) {
		b = buf->buf[(w->data + at) & (SANTA_MC_CAPTURE_MAX - 1)];
	} else if ((at -= bytes) < 7) {
		b = 0x0a0d444e450a0dULL >> (at * 8); /* "\r\nEND\r\n" */
	} else {
		return 1;
	}
	buf->buf[SANTA_MC_TEXT_AT + (i & (SANTA_MC_FRESH_LEN - 1))] = b;
	return 0;
}

/* The set noted by santa_mc_note_command, whole in the segment skb: the
 * reply text a GET of its key gets once it is stored is written into its
 * slot's record, owned by the set (its connection and reply number), not
 * ready. buf is the verdict's request buffer, free between chunks. A set
 * whose value, key or exptime does not fit is not taken: its rule stays
 * dead until the agent reads the key again. A global function: verified
 * once, whatever the caller. */
__noinline int santa_mc_capture(struct __sk_buff *skb, const struct santa_mc_set *set, struct santa_scratch *buf)
{
	struct santa_mc_work_ctx ctx = { .buf = buf };
	struct santa_mc_fresh *rec;
	struct santa_mc_work *w;
	__u32 len, textlen, s, sum = 0;
	__s32 ttl;
	__u8 *text;

	if (!set || !buf)
		return 0;
	len = set->len;
	if (len == 0 || len > SANTA_MC_CAPTURE_MAX || bpf_skb_load_bytes(skb, set->off, buf->buf, len))
		return 0;
	w = santa_mc_work_of(buf);
	__builtin_memset(w, 0, sizeof(*w));
	bpf_loop(len, santa_mc_cut_byte, &ctx, 0);
	if (w->end == 0 || w->ntok < 5 || w->keylen == 0)
		return 0;
	/* memcached's exptime: none (0), seconds from now (up to 30 days),
	 * or a unix time or already past (not taken). Up to 2 s of it go to
	 * memcached's clock (SANTA_MC_CLOCK_LAG_MS). */
	ttl = w->neg ? -1 : (__s32)w->num[3];
	if (ttl != 0 && (ttl < 3 || ttl > SANTA_MC_MAX_TTL))
		return 0;
	/* The data and its CRLF end the set. */
	w->data = w->end;
	if (w->data + w->num[4] + 2 != len || buf->buf[(w->data + w->num[4]) & (SANTA_MC_CAPTURE_MAX - 1)] != '\r' ||
	    buf->buf[(w->data + w->num[4] + 1) & (SANTA_MC_CAPTURE_MAX - 1)] != '\n')
		return 0;
	/* memcached prints its numbers in plain decimal. */
	w->fdigits = w->sig[2] ? w->sig[2] : 1;
	w->bdigits = w->sig[4] ? w->sig[4] : 1;
	textlen = 6 + w->keylen + 1 + w->fdigits + 1 + w->bdigits + 2 + w->num[4] + 7;
	if (textlen > SANTA_MC_FRESH_LEN)
		return 0;
	text = &buf->buf[SANTA_MC_TEXT_AT];
	__builtin_memset(text, 0, SANTA_MC_FRESH_LEN);
	bpf_loop(textlen, santa_mc_text_byte, &ctx, 0);
	/* Its native-word sum (sk_skb has no bpf_csum_diff): the zeros past
	 * it add nothing. */
	for (int i = 0; i < SANTA_MC_FRESH_LEN; i += 2)
		sum += *(__u16 *)&text[i];

	rec = santa_mc_fresh_of(set->slot);
	if (!rec)
		return 0;
	s = *(volatile __u32 *)&rec->seq;
	if ((s & 1) || __sync_val_compare_and_swap(&rec->seq, s, s + 1) != s)
		return 0; /* being written: this set is not taken */
	santa_barrier();
	rec->ready = 0;
	rec->slot = set->slot;
	rec->domain = set->domain;
	rec->cookie = set->cookie;
	rec->cmd_seq = set->seq;
	rec->gen = 0;
	rec->keylen = w->keylen;
	rec->len = textlen;
	rec->ttl = ttl;
	rec->deadline = 0;
	rec->sum = sum;
	__builtin_memcpy(rec->text, text, SANTA_MC_FRESH_LEN);
	santa_barrier();
	*(volatile __u32 *)&rec->seq = s + 2;
	return 0;
}

#endif /* SANTA_MC_CAPTURE_H */
