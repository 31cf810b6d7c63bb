/* toolset.h: Needle 3's tools as the makers' engine holds them
 * (needle3-engine.md section 1), internal to src/agent/.
 *
 * The engine normalises the tools it is given before it renders them and
 * compiles their grammar: an OpenAI {"type":"function","function":{...}}
 * wrapper is unwrapped, "triggers" is taken out of the text, tool and
 * property names are snake_cased (colliding tool names numbered __1, __2,
 * ... by sorted original name, colliding properties from __2), type aliases
 * (int, double, List[str], Dict<K,V>, any, ...) become JSON Schema types,
 * and the result is written as compact JSON with numbers as their source
 * text. Calls name the tools the normalised way; nd_toolset_restore writes
 * them back in the caller's names. The rules are facts about that engine
 * as ddrscott/needle-rs docs/engine-rules.md ("DECODING") and its
 * toolset.rs record them; the code is ours.
 *
 * Collisions are decided over the whole tool list, so a toolset is built
 * once every tool is declared (needle_agent_init).
 *
 *     nd_toolset *ts;
 *     if (nd_toolset_new(texts, n, &ts, err) == NEEDLE_OK) {
 *         render nd_toolset_text(ts, i) for each tool i;
 *         char *calls = nd_toolset_restore(ts, model_calls, len, &out_len);
 *         free(calls);
 *         nd_toolset_free(ts);
 *     }
 *
 * Compiled only with ND_NEEDLE3. */
#ifndef ND_TOOLSET_H
#define ND_TOOLSET_H

#include <stddef.h>
#include <stdint.h>

#include "needle.h"

#ifdef ND_NEEDLE3

typedef struct nd_toolset nd_toolset;

/* Normalises n tools, each one JSON text (NUL-terminated; the agent passes
 * its compact texts). The caller keeps the texts; *out owns everything it
 * hands back and is freed by nd_toolset_free. A list the engine would not
 * normalise (an element without a non-empty string "name") is kept as it
 * is, with nothing renamed. Returns NEEDLE_OK, or NEEDLE_E_SCHEMA (a text
 * that is not one JSON value) or NEEDLE_E_NOMEM with *err filled. */
int nd_toolset_new(const char *const *tools, uint32_t n, nd_toolset **out, needle_error *err);
void nd_toolset_free(nd_toolset *ts);

/* Tool i as the prompt carries it: compact JSON, NUL-terminated, owned by
 * ts. NULL when i is out of range. */
const char *nd_toolset_text(const nd_toolset *ts, uint32_t i);

/* Tool i's first "triggers" member as compact JSON (the engine routes by
 * the strings of an array), kept out of the text for routing; NULL when it
 * has none, and for a list kept as it is. */
const char *nd_toolset_triggers(const nd_toolset *ts, uint32_t i);

/* A call list in the caller's names: each call whose "name" is a
 * normalised tool name gets the declared name back, and its argument keys
 * the declared property names, at every depth. A text that is not a JSON
 * array, or a toolset with nothing normalised, comes back as it is;
 * otherwise the list is rewritten as compact JSON. Returns a malloc'd,
 * NUL-terminated copy (free with free()) and its length in *out_len, or
 * NULL when out of memory. */
char *nd_toolset_restore(const nd_toolset *ts, const char *calls, size_t len, size_t *out_len);

#endif /* ND_NEEDLE3 */
#endif
