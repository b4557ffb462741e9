// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * index_home: returns santa_index_home of the struct santa_index_key at the
 * start of the frame it is run on (BPF_PROG_TEST_RUN), so that a test can
 * hold the data plane's probe hash to user space's copy, key by key.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "index_home.h"

SEC("xdp")
int index_home(struct xdp_md *ctx)
{
	struct santa_index_key *k = (void *)(long)ctx->data;

	if ((void *)(k + 1) > (void *)(long)ctx->data_end)
		return 0;
	return santa_index_home(k);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
