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

static size_t item_size(const struct batch *b, size_t i)
{
	size_t n = b->type == SANTA_ADD_RULES ? 0 : 4;

	if (b->type != SANTA_DELETE_RULES)
		n += santa_rule_wire_size(b->rules[i]);
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
		}
		size = item_size(b, i);
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
 * if they fit one).  ids (txn 0 adds) receives the rule ids.  A daemon error
 * names its item by the index in this batch.
 */
static int batch_send(struct santa_client *c, const struct batch *b, uint32_t txn, uint32_t *ids)
{
	size_t start = 0;

	while (start < b->n) {
		struct santa_msg req = { .type = b->type }, rep;
		size_t end = start, size = SANTA_BATCH_HDR_LEN;
		uint32_t count;
		int err;

		while (end < b->n && size + item_size(b, end) <= SANTA_MSG_MAX &&
		       end - start < UINT32_MAX)
			size += item_size(b, end++);
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
		if (b->type == SANTA_ADD_RULES && !txn) {
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

static int txn_commit(struct santa_client *c, uint32_t txn, uint32_t **ids, size_t *cnt)
{
	struct santa_msg req = { .type = SANTA_COMMIT, .u.txn.txn = txn }, rep;
	uint32_t *copy = NULL, n;
	int err = santa_call(c, &req, -1, &rep);

	if (err)
		return err;
	n = rep.u.ids.count;
	if (ids && n) {
		copy = malloc(n * sizeof(*copy));
		if (!copy) {
			santa_msg_release(&rep);
			return santa_err_local(c, -ENOMEM, SANTA_NO_INDEX,
					 "out of memory (the transaction was committed)");
		}
		memcpy(copy, rep.u.ids.rule_ids, n * sizeof(*copy));
	}
	santa_msg_release(&rep);
	if (ids)
		*ids = copy;
	if (cnt)
		*cnt = n;
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
	uint32_t txn, *committed = NULL;
	size_t cnt = 0;
	bool one;
	int err;

	if (!b->n)
		return 0;
	err = batch_check(c, b, &one);
	if (err)
		return err;
	if (one)
		return batch_send(c, b, 0, ids);

	err = txn_begin(c, b->service_id, &txn);
	if (err)
		return err;
	err = batch_send(c, b, txn, NULL);
	if (!err)
		err = txn_commit(c, txn, b->type == SANTA_ADD_RULES ? &committed : NULL, &cnt);
	if (err) {
		/* a failed COMMIT may leave the transaction open: drop it */
		txn_abort_quietly(c, txn);
		return err;
	}
	if (b->type == SANTA_ADD_RULES) {
		if (cnt != b->n) {
			free(committed);
			return santa_err_local(c, -EPROTO, SANTA_NO_INDEX,
					 "santad committed %zu ids for %zu rules", cnt, b->n);
		}
		if (ids)
			memcpy(ids, committed, cnt * sizeof(*ids));
		free(committed);
	}
	return 0;
}

/* Stages a batch in the caller's transaction. */
static int batch_stage(struct santa_client *c, const struct batch *b, uint32_t txn)
{
	bool one;
	int err;

	if (!txn)
		return santa_err_local(c, -EINVAL, SANTA_NO_INDEX, "transaction 0");
	if (!b->n)
		return 0;
	err = batch_check(c, b, &one);
	return err ? err : batch_send(c, b, txn, NULL);
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
			const struct santa_rule *const *rules, size_t n)
{
	struct batch b = { SANTA_ADD_RULES, service_id, NULL, rules, n };

	SANTA_ENTER(client);
	return batch_stage(client, &b, txn);
}

int santa_txn_replace_rules(struct santa_client *client, uint32_t service_id, uint32_t txn,
			    const uint32_t *rule_ids, const struct santa_rule *const *rules,
			    size_t n)
{
	struct batch b = { SANTA_REPLACE_RULES, service_id, rule_ids, rules, n };

	SANTA_ENTER(client);
	return batch_stage(client, &b, txn);
}

int santa_txn_delete_rules(struct santa_client *client, uint32_t service_id, uint32_t txn,
			   const uint32_t *rule_ids, size_t n)
{
	struct batch b = { SANTA_DELETE_RULES, service_id, rule_ids, NULL, n };

	SANTA_ENTER(client);
	return batch_stage(client, &b, txn);
}

int santa_txn_commit(struct santa_client *client, uint32_t txn, uint32_t **ids, size_t *cnt)
{
	SANTA_ENTER(client);
	if (ids)
		*ids = NULL;
	if (cnt)
		*cnt = 0;
	return txn_commit(client, txn, ids, cnt);
}

int santa_txn_abort(struct santa_client *client, uint32_t txn)
{
	struct santa_msg req = { .type = SANTA_ABORT, .u.txn.txn = txn };

	SANTA_ENTER(client);
	return santa_call_simple(client, &req);
}
