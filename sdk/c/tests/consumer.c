/* A program built only from an installed libsanta, through pkg-config. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <santa/santa.h>

int main(void)
{
	struct santa_client *c = NULL;
	struct santa_rule *r = santa_rule__new(0, "Hello", 5, 6);
	int err;

	if (!r || santa_rule__put(r, 0, "COMSYS", 6) || santa_rule__processor_cnt(r) != 1) {
		fprintf(stderr, "consumer: building Listing 1 failed\n");
		return 1;
	}
	santa_rule__free(r);
	err = santa_client__connect("/nonexistent/santa.sock", "consumer", &c);
	if (err != -ENOENT || c) {
		fprintf(stderr, "consumer: connect gave %d (%s)\n", err, santa_strerror(err));
		return 1;
	}
	printf("consumer: ok (%s)\n", santa_strerror(err));
	return 0;
}
