/* system_facts.h: the caller's texts Needle 3's prompt carries, rewritten as
 * the makers' engine rewrites them (needle3-engine.md section 1), internal
 * to src/agent/.
 *
 * The system text: a JSON object becomes "key: value" facts over the
 * engine's key list, joined by "; ", with a "date" timestamp written
 * "YYYY-MM-DD Www HH:MM"; other text is kept, except that text holding a
 * "YYYY-MM-DD[T ]HH:MM" timestamp and no "date: " fact becomes that fact
 * alone. A tool result: whitespace outside strings dropped, an object
 * wrapped in a list. The rules are facts about that engine as
 * ddrscott/needle-rs docs/engine-rules.md ("DECODING", second item) and its
 * toolset.rs and agent.rs record them; the code is ours.
 *
 * Compiled only with ND_NEEDLE3. */
#ifndef ND_SYSTEM_FACTS_H
#define ND_SYSTEM_FACTS_H

#include <stddef.h>

#ifdef ND_NEEDLE3

/* The system text text[0..len) as the prompt carries it. Returns a malloc'd,
 * NUL-terminated text (free with free()) and its length in *out_len, or
 * NULL when out of memory. */
char *nd_system_facts(const char *text, size_t len, size_t *out_len);

/* The tool result text[0..len) as its turn carries it (the caller has
 * checked it is JSON). Same ownership as nd_system_facts. */
char *nd_tool_result_text(const char *text, size_t len, size_t *out_len);

#endif /* ND_NEEDLE3 */
#endif
