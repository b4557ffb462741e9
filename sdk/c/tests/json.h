/* A small JSON reader for the tests: the whole document as a tree. */
#ifndef SANTA_TEST_JSON_H
#define SANTA_TEST_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json {
	enum json_type type;
	bool boolean;
	char *text;          /* STRING: decoded UTF-8, NUL-ended; NUMBER: as written */
	size_t len;          /* STRING: bytes in text */
	size_t n;            /* ARRAY, OBJECT: items */
	struct json *items;  /* ARRAY, OBJECT */
	char **keys;         /* OBJECT */
};

/* Parses text; NULL with a message in err on failure. */
struct json *json_parse(const char *text, char *err, size_t errlen);
void json_free(struct json *v);
/* The member key of an object, or NULL. */
const struct json *json_get(const struct json *obj, const char *key);
/* An unsigned integer that fits in max; false otherwise. */
bool json_uint(const struct json *v, uint64_t max, uint64_t *out);

#endif
