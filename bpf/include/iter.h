/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* Open-coded iterators (Linux 6.4+): a loop the verifier checks once, as
 * long as its state converges, whatever the number of its iterations. A
 * bounded loop is checked anew for every iteration on every path, which a
 * loop with a state machine inside multiplies. */
#ifndef SANTA_ITER_H
#define SANTA_ITER_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __weak __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __weak __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __weak __ksym;

/* for (i = start; i < end; i++), verified once (libbpf's bpf_for). */
#define santa_for(i, start, end)                                                                      \
	for (struct bpf_iter_num ___it __attribute__((aligned(8), cleanup(bpf_iter_num_destroy))),      \
	     *___p __attribute__((unused)) =                                                            \
		     (bpf_iter_num_new(&___it, (start), (end)), (void)bpf_iter_num_destroy, (void *)0); \
	     ({                                                                                         \
		     int *___t = bpf_iter_num_next(&___it);                                             \
		     (___t && ((i) = *___t, (i) >= (start) && (i) < (end)));                            \
	     });)

#endif /* SANTA_ITER_H */
