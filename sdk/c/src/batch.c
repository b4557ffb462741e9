/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Rule batches, each all or nothing: one ADD/REPLACE/DELETE_RULES message
 * when it fits, else BEGIN, as many messages as needed, COMMIT (ABORT on
 * error).  And explicit transactions.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* One batch of ADD_RULES, REPLACE_RULES or DELETE_RULES items. */
struct batch {
	uint16_t type;
	uint32_t service_id;
	const uint32_t *ids;                   /* REPLACE, DELETE */
	const struct santa_rule *const *rules; /* ADD, REPLACE */
	size_t n;
};

static size_t item_size(const struct santa_client *c, const struct batch *b, size_t i)
{
	size_t n = b->type == SANTA_ADD_RULES ? 0 : 4;

	if (b->type != SANTA_DELETE_RULES)
		n += santa_rule_wire_size(b->rules[i], c->info.version);
	return n;
}

/* Checks every item before anything is sent; sets *one if all fit one message. */
static int batch_check(struct santa_client *c, const struct batch *b, bool *one)
{
	size_t total = SANTA_BATCH_HDR_LEN, i;

	if (b->type != SANTA_ADD_RULES && !b->ids)
		return santa_err_local(c, -EINVAL, SANTA_NO_INDEX, "no rule ids given");
	if (b->type != SANTA_DELETE_RULES && !b->rules)
		return santa_err_local(c, -EINVAL, SANTA_NO_INDEX, "no rules given");
	for (i = 0; i < b->n; i++) {
		size_t size;

		if (b->type != SANTA_DELETE_RULES) {
			if (!b->rules[i])
				return santa_err_local(c, -EINVAL, (uint32_t)i, "rule %zu is NULL", i);
			if (b->rules[i]->err)
				return santa_err_local(c, b->rules[i]->err, (uint32_t)i,
						 "rule %zu was not built: %s", i,
						 santa_strerror(b->rules[i]->err));
			if (b->rules[i]->flags & SANTA_RULE_GUARD)
				return santa_err_local(c, -EINVAL, (uint32_t)i,
						 "rule %zu has a guard, as santad listed it: the library "
						 "sends none (a memcached agent guards its own rules)", i);
			if (b->rules[i]->flags && c->info.version < 2)
				return santa_err_local(c, -EINVAL, (uint32_t)i,
						 "rule %zu has a length condition, which needs protocol "
						 "version 2; santad speaks version %u",
						 i, c->info.version);
		}
		size = item_size(c, b, i);
		if (size > SANTA_MSG_MAX - SANTA_BATCH_HDR_LEN)
			return santa_err_local(c, -EMSGSIZE, (uint32_t)i,
					 "rule %zu takes %zu bytes; a message holds at most %d", i,
					 size, SANTA_MSG_MAX);
		total += size;
	}
	*one = total <= SANTA_MSG_MAX && b->n <= UINT32_MAX;
	return 0;
}

/*
 * Sends the items as few messages as fit, all with transaction txn (0 only
 * if they fit one).  ids (adds; may be NULL) receives the rule ids: in a
 * transaction, those santad holds for the rules until it ends.  A daemon
 * error names its item by the index in this batch.
 */
static int batch_send(struct santa_client *c, const struct batch *b, uint32_t txn, uint32_t *ids)
{
	size_t start = 0;

	while (start < b->n) {
		struct santa_msg req = { .type = b->type }, rep;
		size_t end = start, size = SANTA_BATCH_HDR_LEN;
		uint32_t count;
		int err;

		while (end < b->n && size + item_size(c, b, end) <= SANTA_MSG_MAX &&
		       end - start < UINT32_MAX)
			size += item_size(c, b, end++);
		count = (uint32_t)(end - start);
		req.u.batch.service_id = b->service_id;
		req.u.batch.txn = txn;
		req.u.batch.count = count;
		req.u.batch.rule_ids = b->ids ? b->ids + start : NULL;
		req.u.batch.rules = b->rules ? b->rules + start : NULL;
		err = santa_call(c, &req, -1, &rep);
		if (err) {
			if (c->err.from_daemon && c->err.index != SANTA_NO_INDEX &&
			    c->err.index < count)
				c->err.index += (uint32_t)start;
			return err;
		}
		if (b->type == SANTA_ADD_RULES) {
			if (rep.u.ids.count != count) {
				santa_msg_release(&rep);
				return santa_err_local(c, -EPROTO, SANTA_NO_INDEX,
						 "santad returned %u ids for %u rules",
						 rep.u.ids.count, count);
			}
			if (ids)
				memcpy(ids + start, rep.u.ids.rule_ids, count * sizeof(*ids));
		}
		santa_msg_release(&rep);
		start = end;
	}
	return 0;
}

static int txn_begin(struct santa_client *c, uint32_t service_id, uint32_t *txn)
{
	struct santa_msg req = { .type = SANTA_BEGIN, .u.svc.service_id = service_id }, rep;
	int err = santa_call(c, &req, -1, &rep);

	if (err)
		return err;
	*txn = rep.u.txn.txn;
	santa_msg_release(&rep);
	if (!*txn)
		return santa_err_local(c, -EPROTO, SANTA_NO_INDEX, "santad began transaction 0");
	return 0;
}

static int txn_commit(struct santa_client *c, uint32_t txn, size_t *added)
{
	struct santa_msg req = { .type = SANTA_COMMIT, .u.txn.txn = txn }, rep;
	int err = santa_call(c, &req, -1, &rep);

	if (err)
		return err;
	if (added)
		*added = rep.u.commit.added;
	santa_msg_release(&rep);
	return 0;
}

/* ABORT after a failure, keeping the failure as the last error. */
static void txn_abort_quietly(struct santa_client *c, uint32_t txn)
{
	struct santa_msg req = { .type = SANTA_ABORT, .u.txn.txn = txn };
	struct santa_error saved = c->err;
	char msg[sizeof(c->errmsg)];

	if (c->broken)
		return;
	memcpy(msg, c->errmsg, sizeof(msg));
	santa_call_simple(c, &req);
	c->err = saved;
	memcpy(c->errmsg, msg, sizeof(msg));
	c->err.message = c->errmsg;
}

/* A whole batch, all or nothing: one message, or a transaction of several. */
static int batch_apply(struct santa_client *c, const struct batch *b, uint32_t *ids)
{
	uint32_t txn, *staged = NULL;
	size_t added = 0;
	bool one;
	int err;

	if (!b->n)
		return 0;
	err = batch_check(c, b, &one);
	if (err)
		return err;
	if (one)
		return batch_send(c, b, 0, ids);

	/* the ids come piece by piece: the caller's array is written only
	 * once the whole batch has landed */
	if (ids) {
		staged = calloc(b->n, sizeof(*staged));
		if (!staged)
			return santa_err_local(c, -ENOMEM, SANTA_NO_INDEX, "out of memory for %zu ids", b->n);
	}
	err = txn_begin(c, b->service_id, &txn);
	if (!err) {
		err = batch_send(c, b, txn, staged);
		if (!err)
			err = txn_commit(c, txn, &added);
		if (err) /* a failed COMMIT may leave the transaction open: drop it */
			txn_abort_quietly(c, txn);
	}
	if (!err && b->type == SANTA_ADD_RULES && added != b->n)
		err = santa_err_local(c, -EPROTO, SANTA_NO_INDEX,
				      "santad committed %zu rules of %zu", added, b->n);
	if (!err && ids)
		memcpy(ids, staged, b->n * sizeof(*ids));
	free(staged);
	return err;
}

/* Stages a batch in the caller's transaction; ids as for batch_send. */
static int batch_stage(struct santa_client *c, const struct batch *b, uint32_t txn, uint32_t *ids)
{
	bool one;
	int err;

	if (!txn)
		return santa_err_local(c, -EINVAL, SANTA_NO_INDEX, "transaction 0");
	if (!b->n)
		return 0;
	err = batch_check(c, b, &one);
	return err ? err : batch_send(c, b, txn, ids);
}

int santa_add_rules(struct santa_client *client, uint32_t service_id,
		    const struct santa_rule *const *rules, size_t n, uint32_t *ids)
{
	struct batch b = { SANTA_ADD_RULES, service_id, NULL, rules, n };

	SANTA_ENTER(client);
	return batch_apply(client, &b, ids);
}

int santa_add_rule(struct santa_client *client, uint32_t service_id,
		   const struct santa_rule *rule, uint32_t *id)
{
	return santa_add_rules(client, service_id, &rule, 1, id);
}

int santa_replace_rules(struct santa_client *client, uint32_t service_id,
			const uint32_t *rule_ids, const struct santa_rule *const *rules, size_t n)
{
	struct batch b = { SANTA_REPLACE_RULES, service_id, rule_ids, rules, n };

	SANTA_ENTER(client);
	return batch_apply(client, &b, NULL);
}

int santa_replace_rule(struct santa_client *client, uint32_t service_id, uint32_t rule_id,
		       const struct santa_rule *rule)
{
	return santa_replace_rules(client, service_id, &rule_id, &rule, 1);
}

int santa_delete_rules(struct santa_client *client, uint32_t service_id,
		       const uint32_t *rule_ids, size_t n)
{
	struct batch b = { SANTA_DELETE_RULES, service_id, rule_ids, NULL, n };

	SANTA_ENTER(client);
	return batch_apply(client, &b, NULL);
}

int santa_delete_rule(struct santa_client *client, uint32_t service_id, uint32_t rule_id)
{
	return santa_delete_rules(client, service_id, &rule_id, 1);
}

/* ---- explicit transactions ---- */

int santa_txn_begin(struct santa_client *client, uint32_t service_id, uint32_t *txn)
{
	SANTA_ENTER(client);
	if (!txn)
		return -EINVAL;
	return txn_begin(client, service_id, txn);
}

int santa_txn_add_rules(struct santa_client *client, uint32_t service_id, uint32_t txn,
			const struct santa_rule *const *rules, size_t n, uint32_t *ids)
{
	struct batch b = { SANTA_ADD_RULES, service_id, NULL, rules, n };

	SANTA_ENTER(client);
	return batch_stage(client, &b, txn, ids);
}

int santa_txn_replace_rules(struct santa_client *client, uint32_t service_id, uint32_t txn,
			    const uint32_t *rule_ids, const struct santa_rule *const *rules,
			    size_t n)
{
	struct batch b = { SANTA_REPLACE_RULES, service_id, rule_ids, rules, n };

	SANTA_ENTER(client);
	return batch_stage(client, &b, txn, NULL);
}

int santa_txn_delete_rules(struct santa_client *client, uint32_t service_id, uint32_t txn,
			   const uint32_t *rule_ids, size_t n)
{
	struct batch b = { SANTA_DELETE_RULES, service_id, rule_ids, NULL, n };

	SANTA_ENTER(client);
	return batch_stage(client, &b, txn, NULL);
}

int santa_txn_commit(struct santa_client *client, uint32_t txn, size_t *added)
{
	SANTA_ENTER(client);
	if (added)
		*added = 0;
	return txn_commit(client, txn, added);
}

int santa_txn_abort(struct santa_client *client, uint32_t txn)
{
	struct santa_msg req = { .type = SANTA_ABORT, .u.txn.txn = txn };

	SANTA_ENTER(client);
	return santa_call_simple(client, &req);
}
