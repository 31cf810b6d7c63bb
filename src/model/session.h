/* session.h: engine-internal extras of sessions (the public part is in
 * needle.h): probe-pooling marks, so a caller (agent.c) can save the pooling
 * state at a turn's start and restore it after a rewind, and head sizes. */
#ifndef ND_SESSION_H
#define ND_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include "model/model.h"
#include "needle.h"

/* Output width of the model's head of `kind` (ND_HEAD_*), 0 when absent. */
uint32_t nd_head_outputs(const needle_model *model, uint32_t kind);

/* Positions a Needle 3 session keeps past its window and a chunk, so that a
 * rewind over that many fed tokens always succeeds: the longest branch of the
 * agent's value search (agent/value_search.h). Needle 2 sessions keep none. */
#define ND_SESSION_REWIND 24u

/* Bytes of one pooling mark for sessions of this model (at least 1). */
size_t nd_session_pool_bytes(const needle_model *model);
/* Copies the pooling state (every head's online-softmax accumulators) into
 * mark[nd_session_pool_bytes], and back. */
void nd_session_pool_save(const needle_session *session, void *mark);
void nd_session_pool_restore(needle_session *session, const void *mark);

/* Bytes the session allocated (caches, scratch); fixed after creation
 * except by needle_session_set_sinks. */
size_t nd_session_memory(const needle_session *session);

/* Positions pinned forever (set at needle_session_new or by set_sinks). */
uint32_t nd_session_sinks(const needle_session *session);

#endif
