/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* Where an index key's probe starts in rule_index. User space places the
 * entries with its own copy (internal/datapath, indexHome); a header of its
 * own so that test/bpf/index_home.bpf.c can run this very function against
 * that copy (internal/datapath/indexhome_test.go). */
#ifndef SANTA_INDEX_HOME_H
#define SANTA_INDEX_HOME_H

#include "santa_abi.h"

static __always_inline __u32 santa_index_home(const struct santa_index_key *k)
{
	__u32 h = k->hash ^ (k->index_id * 0x9e3779b1u) ^ ((((__u32)k->end << 8) | k->region) * 0x85ebca77u);

	h ^= h >> 15;
	h *= 0x2c1b3c6du;
	h ^= h >> 12;
	return h;
}

#endif /* SANTA_INDEX_HOME_H */
