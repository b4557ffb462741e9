/*
 * CHECK for the test programs that run against the fake daemon (test_client,
 * test_hello): a failed condition is reported with its place and counted in
 * `failures`, and the test goes on.  Each test is one program, so the counter
 * is one static per program; main() turns it into the exit status.
 */
#ifndef SANTA_TEST_CHECK_H
#define SANTA_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                          \
	do {                                                                      \
		if (!(cond)) {                                                    \
			fprintf(stderr, "FAIL %s:%d: %s: ", __func__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                             \
			fputc('\n', stderr);                                      \
			failures++;                                               \
		}                                                                 \
	} while (0)

#endif
