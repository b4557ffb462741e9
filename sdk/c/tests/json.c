/* A small JSON reader (RFC 8259) for the tests; numbers stay text. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

struct parser {
	const char *s;
	const char *err;
	size_t pos;
	int depth;
};

static void ws(struct parser *p)
{
	while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
	       p->s[p->pos] == '\r')
		p->pos++;
}

static bool fail(struct parser *p, const char *msg)
{
	if (!p->err)
		p->err = msg;
	return false;
}

static bool lit(struct parser *p, const char *word)
{
	size_t n = strlen(word);

	if (strncmp(p->s + p->pos, word, n))
		return fail(p, "bad literal");
	p->pos += n;
	return true;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool hex4(struct parser *p, unsigned *out)
{
	unsigned v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		int h = hexval(p->s[p->pos]);

		if (h < 0)
			return fail(p, "bad \\u escape");
		v = v << 4 | (unsigned)h;
		p->pos++;
	}
	*out = v;
	return true;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A string at p->pos (the opening quote); its decoded bytes fit in the raw length. */
static bool string(struct parser *p, char **out, size_t *len)
{
	const char *start = p->s + ++p->pos;
	char *o, *buf;
	size_t raw = 0;

	while (start[raw] && start[raw] != '"')
		raw += start[raw] == '\\' && start[raw + 1] ? 2 : 1;
	if (!start[raw])
		return fail(p, "unterminated string");
	buf = o = malloc(raw + 1);
	if (!buf)
		return fail(p, "out of memory");
	while (p->s[p->pos] != '"') {
		char c = p->s[p->pos++];
		unsigned cp, lo;

		if ((unsigned char)c < 0x20) {
			free(buf);
			return fail(p, "control character in string");
		}
		if (c != '\\') {
			*o++ = c;
			continue;
		}
		c = p->s[p->pos++];
		switch (c) {
		case '"': case '\\': case '/': *o++ = c; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if (!hex4(p, &cp)) {
				free(buf);
				return false;
			}
			if (cp >= 0xd800 && cp < 0xdc00 && p->s[p->pos] == '\\' &&
			    p->s[p->pos + 1] == 'u') {
				p->pos += 2;
				if (!hex4(p, &lo) || lo < 0xdc00 || lo > 0xdfff) {
					free(buf);
					return fail(p, "bad surrogate pair");
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			o += put_utf8(o, cp);
			break;
		default:
			free(buf);
			return fail(p, "bad escape");
		}
	}
	p->pos++;
	*o = '\0';
	*out = buf;
	*len = (size_t)(o - buf);
	return true;
}

static bool value(struct parser *p, struct json *v);

static bool push(struct parser *p, struct json *v, char *key)
{
	struct json *items = realloc(v->items, (v->n + 1) * sizeof(*items));

	if (!items)
		return fail(p, "out of memory");
	v->items = items;
	memset(&items[v->n], 0, sizeof(items[0]));
	if (v->type == JSON_OBJECT) {
		char **keys = realloc(v->keys, (v->n + 1) * sizeof(*keys));

		if (!keys)
			return fail(p, "out of memory");
		v->keys = keys;
		keys[v->n] = key;
	}
	v->n++;
	return value(p, &items[v->n - 1]);
}

static bool container(struct parser *p, struct json *v, char close)
{
	if (++p->depth > 64)
		return fail(p, "nested too deep");
	p->pos++;
	ws(p);
	if (p->s[p->pos] == close) {
		p->pos++;
		p->depth--;
		return true;
	}
	for (;;) {
		char *key = NULL;
		size_t klen;

		ws(p);
		if (v->type == JSON_OBJECT) {
			if (p->s[p->pos] != '"' || !string(p, &key, &klen))
				return fail(p, "expected a key");
			ws(p);
			if (p->s[p->pos++] != ':') {
				free(key);
				return fail(p, "expected ':'");
			}
		}
		if (!push(p, v, key))
			return false;
		ws(p);
		if (p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->s[p->pos] == close) {
			p->pos++;
			p->depth--;
			return true;
		}
		return fail(p, "expected ',' or the end of a list");
	}
}

static bool number(struct parser *p, struct json *v)
{
	size_t start = p->pos;

	if (p->s[p->pos] == '-')
		p->pos++;
	if (p->s[p->pos] < '0' || p->s[p->pos] > '9')
		return fail(p, "bad number");
	while (strchr("0123456789.eE+-", p->s[p->pos]) && p->s[p->pos])
		p->pos++;
	v->type = JSON_NUMBER;
	v->text = strndup(p->s + start, p->pos - start);
	return v->text ? true : fail(p, "out of memory");
}

static bool value(struct parser *p, struct json *v)
{
	ws(p);
	switch (p->s[p->pos]) {
	case '{':
		v->type = JSON_OBJECT;
		return container(p, v, '}');
	case '[':
		v->type = JSON_ARRAY;
		return container(p, v, ']');
	case '"':
		v->type = JSON_STRING;
		return string(p, &v->text, &v->len);
	case 't':
		v->type = JSON_BOOL;
		v->boolean = true;
		return lit(p, "true");
	case 'f':
		v->type = JSON_BOOL;
		return lit(p, "false");
	case 'n':
		v->type = JSON_NULL;
		return lit(p, "null");
	default:
		return number(p, v);
	}
}

static void release(struct json *v)
{
	size_t i;

	for (i = 0; i < v->n; i++) {
		release(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->text);
}

void json_free(struct json *v)
{
	if (v) {
		release(v);
		free(v);
	}
}

struct json *json_parse(const char *text, char *err, size_t errlen)
{
	struct parser p = { .s = text };
	struct json *v = calloc(1, sizeof(*v));

	if (!v) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (value(&p, v)) {
		ws(&p);
		if (p.s[p.pos])
			fail(&p, "text after the value");
	}
	if (p.err) {
		snprintf(err, errlen, "%s at byte %zu", p.err, p.pos);
		json_free(v);
		return NULL;
	}
	return v;
}

const struct json *json_get(const struct json *obj, const char *key)
{
	size_t i;

	if (!obj || obj->type != JSON_OBJECT)
		return NULL;
	for (i = 0; i < obj->n; i++)
		if (!strcmp(obj->keys[i], key))
			return &obj->items[i];
	return NULL;
}

bool json_uint(const struct json *v, uint64_t max, uint64_t *out)
{
	unsigned long long n;
	char *end;

	if (!v || v->type != JSON_NUMBER || v->text[0] == '-')
		return false;
	errno = 0;
	n = strtoull(v->text, &end, 10);
	if (errno || *end || n > max)
		return false;
	*out = n;
	return true;
}
