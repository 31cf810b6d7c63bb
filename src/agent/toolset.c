/* toolset.c: Needle 3's tools normalised the makers' engine's way, and calls
 * written back in the caller's names (toolset.h).
 *
 * Each tool is parsed into the post-processor's mutable values (pp_json.c:
 * member order and repeated keys kept, numbers as their source text) and
 * written back with its writer, which is the engine's compact JSON. A
 * property rename is remembered with the rename of the property that
 * encloses it (its path), since the same name may mean different things at
 * different depths; the path of a nested schema is the index of that
 * enclosing rename, so a path is one int. Everything lives in one arena
 * owned by the toolset. Recursion is bounded by the parser's depth. */
#ifdef ND_NEEDLE3
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/postprocess.h"
#include "agent/toolset.h"
#include "format/archive.h" /* nd_fail */
#include "format/json.h"

#define TOOL_DEPTH 130 /* deeper than nd_json_compact's 128, which every tool passed */
#define ROOT (-1)      /* the path of a tool's "parameters" */
#define NOWHERE (-2)   /* a path no rename has: under a key the tool never declared */

/* Under the enclosing property `parent` (an index into the same list, or
 * ROOT), the caller's `original` is rendered `renamed`. */
typedef struct {
    int parent;
    pp_str original, renamed;
} prop_rename;

typedef struct {
    pp_str name, original; /* the tool's name as rendered and as declared */
    prop_rename *props;
    size_t nprops, cap;
    pp_str text, triggers; /* NUL-terminated; triggers empty when the tool has none */
} tool_entry;

struct nd_toolset {
    pp_arena arena;
    tool_entry *tools;
    uint32_t n;
    int normalised; /* 0: the list was kept as given and restore changes nothing */
};

/* ---- names and types --------------------------------------------------------- */

static int is_upper(int c) { return c >= 'A' && c <= 'Z'; }
static int is_lower(int c) { return c >= 'a' && c <= 'z'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static char lower(int c) { return (char)(is_upper(c) ? c + 32 : c); }

/* The engine's snake_case: words break at every byte that is not an ASCII
 * letter or digit, and before an upper-case letter that follows a lower-case
 * one or a digit, or that starts a word after a run of capitals
 * ("HTTPServer" -> "http_server"). A name with a non-ASCII byte, or one that
 * would come out empty ("__"), is kept as it is. */
static pp_str snake_case(pp_arena *a, pp_str s) {
    for (size_t i = 0; i < s.n; i++)
        if ((unsigned char)s.p[i] >= 0x80) return s;
    char *out = s.n && s.n < SIZE_MAX / 2 ? pp_alloc(a, 2 * s.n) : NULL; /* at most one '_' per byte */
    if (!out) return s;
    size_t n = 0;
    int sep = 0;
    if (is_upper(s.p[0]) || is_lower(s.p[0]) || is_digit(s.p[0])) out[n++] = lower(s.p[0]);
    for (size_t i = 1; i < s.n; i++) {
        int c = (unsigned char)s.p[i], p = (unsigned char)s.p[i - 1];
        if (!is_upper(c) && !is_lower(c) && !is_digit(c)) {
            sep = n > 0; /* a separator before the first word breaks nothing */
            continue;
        }
        int next_lower = i + 1 < s.n && is_lower(s.p[i + 1]);
        int word = sep || (is_upper(c) && n && (is_lower(p) || is_digit(p) || (is_upper(p) && next_lower)));
        if (word) out[n++] = '_'; /* out ends in a letter or digit here: '_' never doubles */
        out[n++] = lower(c);
        sep = 0;
    }
    return n ? (pp_str){out, n} : s;
}

/* A type name as the engine reads it: "...[]" is an array; otherwise the
 * part before any '<' or '[', ASCII-lowercased without ' ', '-' and '_',
 * names a JSON Schema type when it is one of the engine's aliases. Anything
 * else ("str" among them) is kept. */
static pp_str schema_type(pp_str t) {
    if (t.n >= 2 && t.p[t.n - 2] == '[' && t.p[t.n - 1] == ']') return pp_z("array");
    char base[16];
    size_t n = 0;
    for (size_t i = 0; i < t.n && t.p[i] != '<' && t.p[i] != '['; i++) {
        if (t.p[i] == ' ' || t.p[i] == '-' || t.p[i] == '_') continue;
        if (n == sizeof base) return t; /* longer than any alias */
        base[n++] = lower((unsigned char)t.p[i]);
    }
    static const char *const ALIASES[][2] = {
        {"string|char|character|any", "string"},
        {"bool|boolean", "boolean"},
        {"int|integer|long|short|byte|biginteger", "integer"},
        {"float|double|decimal|bigdecimal|number", "number"},
        {"array|list|arraylist|set|tuple", "array"},
        {"object|dict|dictionary|map|hashmap", "object"},
        {"null|none", "null"},
    };
    pp_str b = {base, n};
    for (size_t i = 0; i < sizeof ALIASES / sizeof *ALIASES; i++)
        if (pp_in(b, ALIASES[i][0])) return pp_z(ALIASES[i][1]);
    return t;
}

/* ---- property renames ---------------------------------------------------------- */

/* The rename under path whose declared name (by_new 0) or rendered name
 * (by_new 1) is s, or NOWHERE. */
static int find_prop(const tool_entry *t, int path, pp_str s, int by_new) {
    for (size_t i = 0; i < t->nprops; i++)
        if (t->props[i].parent == path && pp_eq(by_new ? t->props[i].renamed : t->props[i].original, s)) return (int)i;
    return NOWHERE;
}

/* base + "__" + k, in the arena. */
static pp_str numbered(pp_arena *a, pp_str base, unsigned k) {
    pp_buf b = {a, 0, 0, 0};
    char suffix[16];
    pp_puts(&b, base);
    pp_put(&b, suffix, (size_t)snprintf(suffix, sizeof suffix, "__%u", k));
    return pp_view(&b);
}

/* Renames *name, a property under path: the rename made on its first use
 * is its snake_case, numbered __2, __3, ... while an earlier property under
 * the same path holds that name. Returns the rename's index (the path of
 * what the property holds), or NOWHERE when out of memory. */
static int rename_prop(pp_arena *a, tool_entry *t, int path, pp_str *name) {
    int r = find_prop(t, path, *name, 0);
    if (r == NOWHERE) {
        pp_str base = snake_case(a, *name), renamed = base;
        for (unsigned k = 2; !a->nomem && find_prop(t, path, renamed, 1) != NOWHERE; k++) renamed = numbered(a, base, k);
        if (t->nprops == t->cap) {
            size_t cap = t->cap ? t->cap * 2 : 8;
            prop_rename *p = cap < (size_t)1 << 24 ? pp_alloc(a, cap * sizeof *p) : NULL;
            if (!p) return a->nomem = 1, NOWHERE;
            if (t->nprops) memcpy(p, t->props, t->nprops * sizeof *p);
            t->props = p, t->cap = cap;
        }
        /* Copies: the declared names point into a document freed after init. */
        t->props[t->nprops] = (prop_rename){path, pp_copy(a, *name), pp_copy(a, renamed)};
        r = (int)t->nprops++;
    }
    *name = t->props[r].renamed;
    return r;
}

/* Renames the string items of a list of property names under path. */
static void rename_items(pp_arena *a, tool_entry *t, pp_val *list, int path) {
    for (size_t i = 0; list->type == ND_JARRAY && i < list->n; i++)
        if (list->kid[i].type == ND_JSTRING) rename_prop(a, t, path, &list->kid[i].s);
}

static void walk_schema(pp_arena *a, tool_entry *t, pp_val *node, int path, int root);

/* Renames obj's members as properties under path and walks their schemas;
 * a flat "parameters" object skips the schema keywords among them. */
static void rename_members(pp_arena *a, tool_entry *t, pp_val *obj, int path, int flat) {
    for (size_t i = 0; i < obj->n; i++) {
        if (flat && pp_in(obj->key[i], PP_SCHEMA_KEYWORDS)) continue;
        int r = rename_prop(a, t, path, &obj->key[i]);
        if (r == NOWHERE) return;
        walk_schema(a, t, &obj->kid[i], r, 0);
    }
}

/* The keywords of one schema that hold names, types or subschemas: the
 * first three name properties, then "type", then subschemas at the same
 * path (an object value for the ten after it, a list's items for the last
 * four). */
static const char NAMED[] =
    "required|dependentRequired|dependentSchemas|type|"
    "items|contains|additionalProperties|propertyNames|not|if|then|else|unevaluatedProperties|contentSchema|"
    "allOf|anyOf|oneOf|prefixItems";
enum { K_REQUIRED, K_DEP_REQUIRED, K_DEP_SCHEMAS, K_TYPE, K_SUBSCHEMA, K_SUBSCHEMAS = K_SUBSCHEMA + 10 };

static void walk_keyword(pp_arena *a, tool_entry *t, pp_str key, pp_val *v, int path) {
    size_t k = pp_list_index(key, NAMED);
    if (k == K_REQUIRED) rename_items(a, t, v, path);
    for (size_t i = 0; (k == K_DEP_REQUIRED || k == K_DEP_SCHEMAS) && v->type == ND_JOBJECT && i < v->n; i++) {
        rename_prop(a, t, path, &v->key[i]);
        if (k == K_DEP_REQUIRED) rename_items(a, t, &v->kid[i], path);
    }
    if (k == K_TYPE && v->type == ND_JSTRING) v->s = schema_type(v->s);
    for (size_t i = 0; k == K_TYPE && v->type == ND_JARRAY && i < v->n; i++)
        if (v->kid[i].type == ND_JSTRING) v->kid[i].s = schema_type(v->kid[i].s);
    if (k >= K_SUBSCHEMA && k < K_SUBSCHEMAS) walk_schema(a, t, v, path, 0);
    for (size_t i = 0; k >= K_SUBSCHEMAS && k != PP_NONE && v->type == ND_JARRAY && i < v->n; i++)
        walk_schema(a, t, &v->kid[i], path, 0);
}

/* One schema: its properties renamed (for the root, a flat object's own
 * members when it has no "properties" object), then its keywords. */
static void walk_schema(pp_arena *a, tool_entry *t, pp_val *node, int path, int root) {
    if (node->type != ND_JOBJECT) return;
    pp_val *props = NULL;
    for (size_t i = 0; i < node->n && !props; i++)
        if (pp_eqz(node->key[i], "properties") && node->kid[i].type == ND_JOBJECT) props = &node->kid[i];
    if (props) rename_members(a, t, props, path, 0);
    else if (root) rename_members(a, t, node, path, 1);
    for (size_t i = 0; i < node->n; i++) walk_keyword(a, t, node->key[i], &node->kid[i], path);
}

/* ---- the tool list ----------------------------------------------------------------- */

/* The tool inside an OpenAI {"type":"function","function":{...}} wrapper,
 * or the item itself. */
static pp_val *unwrap(pp_val *item) {
    pp_val *fn = pp_get(item, "function"), *type = pp_get(item, "type");
    int wrapped = fn && fn->type == ND_JOBJECT && type && type->type == ND_JSTRING && pp_eqz(type->s, "function");
    return wrapped ? fn : item;
}

/* Bytewise order, a prefix first: how the engine sorts colliding names. */
static int name_before(pp_str x, pp_str y) {
    size_t n = x.n < y.n ? x.n : y.n;
    int c = n ? memcmp(x.p, y.p, n) : 0;
    return c < 0 || (c == 0 && x.n < y.n);
}

/* Tool names as rendered: the snake_case of each, and where different
 * declared names share one, each of them numbered __1, __2, ... in the
 * sorted order of those names (tools declared under one same name share
 * its number). */
static void number_names(pp_arena *a, tool_entry *t, const pp_str *snake, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        unsigned before = 0, others = 0;
        for (uint32_t j = 0; j < n; j++) {
            uint32_t first = 0; /* each declared name counts once */
            while (!pp_eq(t[first].original, t[j].original)) first++;
            if (first != j || !pp_eq(snake[j], snake[i]) || pp_eq(t[j].original, t[i].original)) continue;
            others++;
            before += name_before(t[j].original, t[i].original);
        }
        t[i].name = others ? numbered(a, snake[i], before + 1) : snake[i];
    }
}

/* A NUL-terminated text in the arena, viewed without its NUL: v written as
 * the engine's compact JSON, or s as it is. */
static pp_str arena_text(pp_arena *a, const pp_val *v, const char *s) {
    pp_buf b = {a, 0, 0, 0};
    if (v) pp_write(&b, v);
    else pp_put(&b, s, strlen(s));
    pp_putc(&b, 0);
    return b.n ? (pp_str){b.p, b.n - 1} : PP_EMPTY;
}

/* Renames one tool in place and records how to undo it for its calls. */
static void normalise_tool(pp_arena *a, tool_entry *t, pp_val *tool) {
    pp_get(tool, "name")->s = t->name;
    t->original = pp_copy(a, t->original), t->name = pp_copy(a, t->name);
    pp_val *params = pp_get(tool, "parameters"), *triggers = pp_get(tool, "triggers");
    if (params) walk_schema(a, t, params, ROOT, 1);
    if (triggers) t->triggers = arena_text(a, triggers, NULL);
    for (size_t i = tool->n; i-- > 0;) /* routing, not prompt text */
        if (pp_eqz(tool->key[i], "triggers")) pp_remove(tool, i);
}

/* The engine's normalisation of the parsed list; the texts stay as given
 * when an element has no name. */
static void normalise(nd_toolset *ts, pp_val *list, const char *const *texts) {
    pp_arena *a = &ts->arena;
    pp_str *snake = pp_alloc(a, ts->n * sizeof *snake + 1);
    ts->normalised = ts->n > 0 && snake;
    for (uint32_t i = 0; ts->normalised && i < ts->n; i++) {
        const pp_val *name = pp_get(unwrap(&list->kid[i]), "name");
        ts->tools[i].original = name && name->type == ND_JSTRING ? name->s : PP_EMPTY;
        ts->normalised = ts->tools[i].original.n > 0;
        snake[i] = snake_case(a, ts->tools[i].original);
    }
    if (ts->normalised) number_names(a, ts->tools, snake, ts->n);
    for (uint32_t i = 0; i < ts->n; i++) {
        pp_val *tool = unwrap(&list->kid[i]);
        if (ts->normalised) normalise_tool(a, &ts->tools[i], tool);
        ts->tools[i].text = arena_text(a, ts->normalised ? tool : NULL, texts[i]);
    }
}

/* The tools as one JSON array, parsed at once; each text must be one value. */
static int parse_list(const char *const *texts, uint32_t n, nd_json **doc, needle_error *err) {
    size_t len = 2;
    for (uint32_t i = 0; i < n; i++) len += strlen(texts[i]) + 1;
    char *joined = malloc(len), *at = joined;
    if (!joined) return nd_fail(err, NEEDLE_E_NOMEM, "out of memory normalising the tools");
    *at++ = '[';
    for (uint32_t i = 0; i < n; i++) at += strlen(strcpy(at, texts[i])), *at++ = ',';
    at[-(n > 0)] = ']'; /* over the last comma */
    needle_error why = {0};
    *doc = nd_json_parse(joined, (size_t)(at - joined) + (n == 0), TOOL_DEPTH, &why);
    free(joined);
    if (*doc && nd_json_root(*doc)->n == n) return NEEDLE_OK;
    nd_json_free(*doc);
    *doc = NULL;
    if (why.code == NEEDLE_E_NOMEM) return nd_fail(err, NEEDLE_E_NOMEM, "out of memory normalising the tools");
    return nd_fail(err, NEEDLE_E_SCHEMA, "the tools are not one JSON value each: %s", why.message);
}

int nd_toolset_new(const char *const *texts, uint32_t n, nd_toolset **out, needle_error *err) {
    nd_json *doc = NULL;
    *out = NULL;
    int status = parse_list(texts, n, &doc, err);
    if (status) return status;
    nd_toolset *ts = calloc(1, sizeof *ts);
    pp_val list;
    if (ts) {
        ts->n = n;
        ts->tools = pp_alloc(&ts->arena, n * sizeof *ts->tools + 1);
        if (ts->tools) memset(ts->tools, 0, n * sizeof *ts->tools);
        if (ts->tools && pp_from_jv(&ts->arena, nd_json_root(doc), &list)) normalise(ts, &list, texts);
    }
    nd_json_free(doc);
    if (!ts || ts->arena.nomem) {
        nd_toolset_free(ts);
        return nd_fail(err, NEEDLE_E_NOMEM, "out of memory normalising the tools");
    }
    *out = ts;
    return NEEDLE_OK;
}

void nd_toolset_free(nd_toolset *ts) {
    if (!ts) return;
    pp_arena_free(&ts->arena);
    free(ts);
}

const char *nd_toolset_text(const nd_toolset *ts, uint32_t i) { return i < ts->n ? ts->tools[i].text.p : NULL; }

const char *nd_toolset_triggers(const nd_toolset *ts, uint32_t i) {
    return i < ts->n && ts->tools[i].triggers.n ? ts->tools[i].triggers.p : NULL;
}

/* ---- calls back in the caller's names ------------------------------------------ */

/* Argument keys back to their declared spelling, at every depth; a key the
 * tool never declared leads to a path no rename has. */
static void restore_keys(const tool_entry *t, pp_val *v, int path) {
    for (size_t i = 0; i < v->n && (v->type == ND_JARRAY || v->type == ND_JOBJECT); i++) {
        int r = v->type == ND_JOBJECT ? find_prop(t, path, v->key[i], 1) : path;
        if (v->type == ND_JOBJECT && r != NOWHERE) v->key[i] = t->props[r].original;
        restore_keys(t, &v->kid[i], r);
    }
}

char *nd_toolset_restore(const nd_toolset *ts, const char *calls, size_t len, size_t *out_len) {
    nd_json *doc = ts->normalised ? nd_json_parse(calls, len, TOOL_DEPTH, NULL) : NULL;
    const nd_jv *root = doc ? nd_json_root(doc) : NULL;
    pp_arena a = {0};
    pp_val list;
    pp_str text = {calls, len}; /* anything but a list comes back as it is */
    if (root && root->type == ND_JARRAY && pp_from_jv(&a, root, &list)) {
        for (size_t i = 0; i < list.n; i++) {
            pp_val *call = &list.kid[i], *name = pp_get(call, "name"), *args = pp_get(call, "arguments");
            uint32_t k = 0;
            while (name && name->type == ND_JSTRING && k < ts->n && !pp_eq(ts->tools[k].name, name->s)) k++;
            if (!name || name->type != ND_JSTRING || k == ts->n) continue; /* not a tool's: left as written */
            name->s = ts->tools[k].original;
            if (args) restore_keys(&ts->tools[k], args, ROOT);
        }
        text = arena_text(&a, &list, NULL);
    }
    char *out = a.nomem ? NULL : malloc(text.n + 1);
    if (out) memcpy(out, text.p, text.n), out[text.n] = 0, *out_len = text.n;
    nd_json_free(doc);
    pp_arena_free(&a);
    return out;
}
#endif /* ND_NEEDLE3 */
