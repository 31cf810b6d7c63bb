/* test_tokenizer.c: unit tests of src/format/tokenizer.c on small hand-made blobs:
 * markers, merge order and ties, byte fallback and unknown runs, decode and
 * streaming decode, and every way a blob can be malformed. (Parity with the
 * real spm_encode on a trained model is in tests/js/tokenizer.test.js.) */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "needle.h"
#include "format/tokenizer.h"

#define SP "\xE2\x96\x81" /* U+2581, SentencePiece's space */

typedef struct {
    const char *surface;
    int type;
    float score;
} piece;

typedef struct {
    uint8_t bytes[8192];
    size_t len;
} blob;

static void put_u32(blob *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b->bytes[b->len++] = (uint8_t)(v >> 8 * i);
}

/* A blob with the four special pieces (pad, eos, bos control; unk) first,
 * then `pieces`, then the 256 byte pieces when with_bytes. */
static blob make_blob(const piece *pieces, size_t n, int dummy, int fallback, int with_bytes) {
    static const piece specials[4] = {{"<pad>", 2, 0}, {"</s>", 2, 0}, {"<s>", 2, 0}, {"<unk>", 1, 0}};
    blob b = {{0}, 0};
    put_u32(&b, (uint32_t)(4 + n + (with_bytes ? 256 : 0)));
    for (uint32_t k = 0; k < 4; k++) put_u32(&b, k == 0 ? 0 : k == 1 ? 1 : k == 2 ? 2 : 3);
    b.bytes[b.len++] = (uint8_t)dummy;
    b.bytes[b.len++] = (uint8_t)fallback;
    b.len += 2;
    for (size_t i = 0; i < 4 + n + (with_bytes ? 256 : 0); i++) {
        char name[8];
        piece p = i < 4 ? specials[i] : i < 4 + n ? pieces[i - 4] : (piece){name, 4, 0};
        if (i >= 4 + n) snprintf(name, sizeof name, "<0x%02X>", (unsigned)(i - 4 - n));
        uint32_t bits;
        memcpy(&bits, &p.score, 4);
        put_u32(&b, bits);
        size_t len = strlen(p.surface);
        b.bytes[b.len++] = (uint8_t)p.type;
        b.bytes[b.len++] = (uint8_t)len;
        b.bytes[b.len++] = (uint8_t)(len >> 8);
        memcpy(b.bytes + b.len, p.surface, len);
        b.len += len;
    }
    return b;
}

/* Pieces 4.. of the main test vocabulary (ids in comments). */
static const piece vocab[] = {
    {"<a>", 3, 0},      /* 4 */
    {"<ab>", 3, 0},     /* 5: longer marker sharing a prefix */
    {SP, 0, -10},       /* 6 */
    {"a", 0, -11},      /* 7 */
    {"b", 0, -12},      /* 8 */
    {"c", 0, -13},      /* 9 */
    {"ab", 0, -3},      /* 10 */
    {"bc", 0, -2},      /* 11: better than ab */
    {"aa", 0, -1},      /* 12 */
    {SP "a", 0, -4},    /* 13 */
    {"caa", 0, -0.5f},  /* 14: reached in two merges, c + aa */
    {"x", 2, 0},        /* 15: a control piece with a one-character surface */
    {"cc", 2, 0},       /* 16: control: never a merge target */
};
#define NVOCAB (sizeof vocab / sizeof vocab[0])

static needle_tokenizer *load(const blob *b) {
    needle_error err;
    needle_tokenizer *tok = needle_tokenizer_load(b->bytes, b->len, &err);
    CHECK(tok != NULL, "load failed: %s", err.message);
    return tok;
}

/* Encodes text and compares with the expected ids (terminated by -1). */
static void expect_ids(const needle_tokenizer *tok, const char *text, const int32_t *want) {
    int32_t ids[256];
    size_t count = 0, n = 0;
    needle_error err;
    int status = needle_tokenize(tok, text, strlen(text), ids, 256, &count, &err);
    while (want[n] >= 0) n++;
    CHECK(status == NEEDLE_OK, "\"%s\": %s", text, err.message);
    CHECK(count == n, "\"%s\": %zu ids, want %zu", text, count, n);
    for (size_t i = 0; i < n && i < count; i++) CHECK(ids[i] == want[i], "\"%s\" id %zu: %d, want %d", text, i, ids[i], want[i]);
}

#define IDS(...) ((const int32_t[]){__VA_ARGS__, -1})

static void test_markers_are_atomic_longest_first(void) {
    blob b = make_blob(vocab, NVOCAB, 1, 1, 1);
    needle_tokenizer *tok = load(&b);
    if (!tok) return;
    expect_ids(tok, "<ab>", IDS(6, 5));         /* the dummy prefix stays its own symbol */
    expect_ids(tok, "<a>", IDS(6, 4));
    expect_ids(tok, "a<a>a", IDS(13, 4, 7));    /* no merge across a marker */
    expect_ids(tok, "<a><ab>", IDS(6, 4, 5));
    expect_ids(tok, "<a", IDS(6, 4 + NVOCAB + '<', 7));  /* a partial marker is text */
    expect_ids(tok, " <a>", IDS(6, 6, 4));      /* a leading space is one more U+2581 */
    CHECK(needle_tokenizer_piece_id(tok, "<ab>", 4) == 5, "piece_id <ab>");
    CHECK(needle_tokenizer_piece_id(tok, "<abc>", 5) == -1, "piece_id of an absent surface");
    CHECK(needle_tokenizer_piece_id(tok, "", 0) == -1, "piece_id of empty text");
    needle_tokenizer_free(tok);
}

/* Encodes text with per-byte plain flags (nd_tokenize_plain) and compares. */
static void expect_plain_ids(const needle_tokenizer *tok, const char *text, const uint8_t *plain, const int32_t *want) {
    int32_t ids[256];
    size_t count = 0, n = 0;
    needle_error err;
    int status = nd_tokenize_plain(tok, text, strlen(text), plain, ids, 256, &count, &err);
    while (want[n] >= 0) n++;
    CHECK(status == NEEDLE_OK, "\"%s\": %s", text, err.message);
    CHECK(count == n, "\"%s\": %zu ids, want %zu", text, count, n);
    for (size_t i = 0; i < n && i < count; i++) CHECK(ids[i] == want[i], "\"%s\" id %zu: %d, want %d", text, i, ids[i], want[i]);
}

/* Text the caller wrote (plain) is encoded as the characters it is: a
 * marker's surface in it is no marker, one that reaches into it neither, and
 * the runtime's own markers beside it stay markers. */
static void test_plain_text_writes_no_marker(void) {
    blob b = make_blob(vocab, NVOCAB, 1, 1, 1);
    needle_tokenizer *tok = load(&b);
    if (!tok) return;
    const int32_t lt = 4 + NVOCAB + '<', gt = 4 + NVOCAB + '>';
    expect_plain_ids(tok, "a<a>a<ab>", (const uint8_t[]){0, 0, 0, 0, 0, 1, 1, 1, 1}, IDS(13, 4, 7, lt, 10, gt));
    expect_plain_ids(tok, "<a>", (const uint8_t[]){0, 0, 1}, IDS(6, lt, 7, gt));
    expect_plain_ids(tok, "<a><ab>", (const uint8_t[]){0, 0, 0, 0, 0, 0, 0}, IDS(6, 4, 5));
    expect_plain_ids(tok, "<a><ab>", NULL, IDS(6, 4, 5));
    needle_tokenizer_free(tok);
}

static void test_merges_by_score_then_leftmost(void) {
    blob b = make_blob(vocab, NVOCAB, 0, 1, 1);
    needle_tokenizer *tok = load(&b);
    if (!tok) return;
    expect_ids(tok, "abc", IDS(7, 11));   /* bc (-2) beats ab (-3) */
    expect_ids(tok, "caa", IDS(14));      /* aa first, then c + aa */
    expect_ids(tok, "ab", IDS(10));
    expect_ids(tok, "aaa", IDS(12, 7));   /* a tie: the leftmost pair merges first */
    expect_ids(tok, "aaaaa", IDS(12, 12, 7));
    expect_ids(tok, "cc", IDS(9, 9));     /* a control surface is not a merge target */
    expect_ids(tok, "x", IDS(15));        /* ...but a symbol equal to it is that piece, as in spm */
    needle_tokenizer_free(tok);
    /* With ab better than bc, ab merges instead. */
    piece v2[NVOCAB];
    memcpy(v2, vocab, sizeof v2);
    v2[7].score = -5;
    b = make_blob(v2, NVOCAB, 0, 1, 1);
    tok = load(&b);
    if (!tok) return;
    expect_ids(tok, "abc", IDS(10, 9));
    needle_tokenizer_free(tok);
}

static void test_byte_fallback_and_unknown_runs(void) {
    blob b = make_blob(vocab, NVOCAB, 1, 1, 1);
    needle_tokenizer *tok = load(&b);
    if (!tok) return;
    int32_t base = 4 + (int32_t)NVOCAB;
    expect_ids(tok, "a\xC3\xA9", IDS(13, base + 0xC3, base + 0xA9));
    expect_ids(tok, "\xFF", IDS(6, base + 0xEF, base + 0xBF, base + 0xBD)); /* ill-formed: U+FFFD */
    expect_ids(tok, "\xE2\x82" "a", IDS(6, base + 0xEF, base + 0xBF, base + 0xBD, base + 0xEF, base + 0xBF,
                                      base + 0xBD, 7)); /* one U+FFFD per bad byte, like spm */
    needle_tokenizer_free(tok);
    b = make_blob(vocab, NVOCAB, 1, 0, 0);
    tok = load(&b);
    if (!tok) return;
    expect_ids(tok, "a\xC3\xA9\xC3\xA9z", IDS(13, 3));  /* one unknown id for the whole run */
    expect_ids(tok, "\xC3\xA9" "a\xC3\xA9", IDS(6, 3, 7, 3));
    needle_tokenizer_free(tok);
}

static void test_encode_edges(void) {
    blob b = make_blob(vocab, NVOCAB, 1, 1, 1);
    needle_tokenizer *tok = load(&b);
    if (!tok) return;
    size_t count = 99;
    needle_error err;
    CHECK(needle_tokenize(tok, "", 0, NULL, 0, &count, &err) == NEEDLE_OK && count == 0, "encode(\"\") is empty");
    int32_t ids[2];
    int status = needle_tokenize(tok, "a b c", 5, ids, 2, &count, &err);
    CHECK(status == NEEDLE_E_ARGUMENT && count == 5, "cap too small: status %d count %zu", status, count);
    CHECK(ids[0] == 13 && ids[1] == 6, "the first cap ids are written: %d %d", ids[0], ids[1]);
    CHECK(needle_tokenize(tok, NULL, 3, ids, 2, &count, &err) == NEEDLE_E_ARGUMENT, "NULL text");
    /* A long input: the priority queue keeps this O(n log n). */
    size_t n = 200001;
    char *text = malloc(n);
    int32_t *many = malloc(n * sizeof *many);
    if (text && many) {
        memset(text, 'a', n);
        status = needle_tokenize(tok, text, n, many, n, &count, &err);
        /* aa (-1) beats the prefix pair ▁a (-4): ▁, then aa pairs from the left, then one a */
        CHECK(status == NEEDLE_OK && count == n / 2 + 2, "long input: %d, %zu ids", status, count);
        CHECK(many[0] == 6 && many[1] == 12 && many[count - 2] == 12 && many[count - 1] == 7,
              "long input ids %d %d %d", many[0],
              many[1], many[count - 1]);
    }
    free(text);
    free(many);
    needle_tokenizer_free(tok);
}

static void expect_text(const needle_tokenizer *tok, const int32_t *ids, const char *want) {
    size_t n = 0;
    while (ids[n] >= 0) n++;
    char out[256];
    size_t len = needle_detokenize(tok, ids, n, out, sizeof out);
    CHECK(len == strlen(want) && memcmp(out, want, len) == 0, "decoded \"%.*s\", want \"%s\"", (int)len, out, want);
    CHECK(out[len] == '\0', "NUL after the text");
}

static void test_decode(void) {
    blob b = make_blob(vocab, NVOCAB, 1, 1, 1);
    needle_tokenizer *tok = load(&b);
    if (!tok) return;
    int32_t base = 4 + (int32_t)NVOCAB;
    expect_text(tok, IDS(13, 6, 12, 4), "a aa<a>");               /* dummy space dropped, ▁ -> space */
    expect_text(tok, IDS(6, 6, 7), " a");                          /* only one space is dropped */
    expect_text(tok, IDS(2, 3, 0, 7, 1, 15), "a");                 /* control and unknown give nothing */
    expect_text(tok, IDS(base + 0xF0, base + 0x9F, base + 0x98, base + 0x80), "\xF0\x9F\x98\x80");
    expect_text(tok, IDS(base + 0xF0, base + 0x9F, 7), "\xEF\xBF\xBD" "a");   /* one U+FFFD per subpart */
    expect_text(tok, IDS(base + 0xE0, base + 0x80, 7), "\xEF\xBF\xBD\xEF\xBF\xBD" "a");
    expect_text(tok, IDS(base + 0xED, base + 0xA0, base + 0x80), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    expect_text(tok, IDS(7, base + 0xC3), "a\xEF\xBF\xBD");        /* truncated at the end */
    expect_text(tok, IDS(base + ' ', 7), "a");                     /* a leading byte space is dropped too */
    int32_t ids[] = {13, 13, 13};
    char small[3];
    CHECK(needle_detokenize(tok, ids, 3, small, sizeof small) == 5, "full length returned");
    CHECK(memcmp(small, "a a", 3) == 0, "the first cap bytes are written");
    needle_tokenizer_free(tok);
    b = make_blob(vocab, NVOCAB, 0, 1, 1);
    tok = load(&b);
    if (!tok) return;
    expect_text(tok, IDS(13, 6), " a ");                           /* no dummy prefix: no drop */
    needle_tokenizer_free(tok);
}

static void test_streaming_decode(void) {
    blob b = make_blob(vocab, NVOCAB, 1, 1, 1);
    needle_tokenizer *tok = load(&b);
    if (!tok) return;
    int32_t base = 4 + (int32_t)NVOCAB;
    needle_decoder *dec = needle_decoder_new(tok);
    CHECK(dec != NULL, "decoder");
    if (!dec) { needle_tokenizer_free(tok); return; }
    char out[64];
    CHECK(needle_decoder_push(dec, 13, out, sizeof out) == 1 && out[0] == 'a', "first piece, dummy space dropped");
    CHECK(needle_decoder_push(dec, base + 0xF0, out, sizeof out) == 0, "held back");
    CHECK(needle_decoder_push(dec, base + 0x9F, out, sizeof out) == 0, "held back");
    CHECK(needle_decoder_push(dec, base + 0x98, out, sizeof out) == 0, "held back");
    size_t n = needle_decoder_push(dec, base + 0x80, out, sizeof out);
    CHECK(n == 4 && memcmp(out, "\xF0\x9F\x98\x80", 4) == 0, "the emoji comes out whole: %zu", n);
    CHECK(needle_decoder_push(dec, base + 0xE2, out, sizeof out) == 0, "held back");
    n = needle_decoder_push(dec, 6, out, sizeof out);   /* ▁ breaks the sequence */
    CHECK(n == 4 && memcmp(out, "\xEF\xBF\xBD ", 4) == 0, "U+FFFD then space: %zu", n);
    CHECK(needle_decoder_push(dec, base + 0xC3, out, sizeof out) == 0, "held back");
    n = needle_decoder_flush(dec, out, sizeof out);
    CHECK(n == 3 && memcmp(out, "\xEF\xBF\xBD", 3) == 0, "flush: U+FFFD for the incomplete end");
    needle_decoder_free(dec);
    /* A cap too small for a character: it waits and comes out on the next call. */
    dec = needle_decoder_new(tok);
    if (dec) {
        CHECK(needle_decoder_push(dec, 7, out, 0) == 0, "nothing fits");
        CHECK(needle_decoder_push(dec, 12, out, 2) == 2 && memcmp(out, "aa", 2) == 0, "queued text first");
        CHECK(needle_decoder_flush(dec, out, sizeof out) == 1 && out[0] == 'a', "the rest on flush");
        needle_decoder_free(dec);
    }
    needle_tokenizer_free(tok);
}

/* Loads bytes that must be refused; checks the code and a message fragment. */
static void expect_refused(const uint8_t *bytes, size_t len, const char *fragment, const char *what) {
    needle_error err = {0, ""};
    needle_tokenizer *tok = needle_tokenizer_load(bytes, len, &err);
    CHECK(tok == NULL, "%s: accepted", what);
    needle_tokenizer_free(tok);
    CHECK(err.code == NEEDLE_E_TOKENIZER, "%s: code %d (%s)", what, err.code, err.message);
    CHECK(strstr(err.message, fragment) != NULL, "%s: message \"%s\" lacks \"%s\"", what, err.message, fragment);
}

static void test_malformed_blobs(void) {
    static const piece one[] = {{"a", 0, 0}};
    blob good = make_blob(one, 1, 1, 1, 0);   /* 5 pieces, piece 4 "a" at byte 24 + 7*4 + 16 */
    blob b;
    expect_refused(good.bytes, 10, "shorter than its 24-byte header", "short header");
#define MUTATE(off, val, frag, what) (b = good, b.bytes[off] = (uint8_t)(val), expect_refused(b.bytes, b.len, frag, what))
    MUTATE(0, 200, "pieceCount 200 at byte 0 cannot fit", "count too large");
    MUTATE(0, 0, "pieceCount 0", "no pieces");
    MUTATE(16, 5, "unknownId 5 at byte 16", "unknown id out of range");
    MUTATE(8, 9, "eosId 9 at byte 8", "eos id out of range");
    MUTATE(20, 2, "flags at byte 20", "bad flag");
    MUTATE(22, 1, "pad 1", "pad not zero");
    MUTATE(24 + 4, 7, "piece 0 at byte 28: type 7", "bad type");
    MUTATE(24 + 12 + 11 + 10 + 4, 0, "unknownId 3 names a piece of type 0", "unk id not unknown");
    MUTATE(0, 6, "piece 5 at byte 77: record header needs 7 bytes, 0 left", "count fits the size, not the data");
    size_t a = 24 + 7 * 4 + 5 + 4 + 3 + 5;    /* record of piece 4, "a" */
    MUTATE(a + 7, 0xFF, "piece 4 at byte 76: surface is not valid UTF-8", "bad UTF-8");
    MUTATE(a + 5, 0, "piece 4 at byte 74: empty surface", "empty normal piece");
    MUTATE(a + 5, 9, "piece 4 at byte 74: length 9 runs past", "length past end");
    b = good;
    b.bytes[a + 2] = 0xC0, b.bytes[a + 3] = 0xFF;   /* a NaN */
    expect_refused(b.bytes, b.len, "piece 4 at byte 69: score is not finite", "NaN score");
    b.bytes[a + 2] = 0x80, b.bytes[a + 3] = 0x7F;   /* +inf */
    expect_refused(b.bytes, b.len, "piece 4 at byte 69: score is not finite", "infinite score");
    b = good;
    b.bytes[b.len++] = 0;
    expect_refused(b.bytes, b.len, "1 trailing bytes after the last piece at byte 77", "trailing byte");
    expect_refused(good.bytes, good.len - 1, "piece 4 at byte 74: length 1 runs past the blob end (0 bytes left)",
                   "truncated");
    static const piece dup[] = {{"<unk>", 0, 0}};
    b = make_blob(dup, 1, 1, 1, 0);
    expect_refused(b.bytes, b.len, "piece 4 repeats the surface of piece 3", "duplicate of a special");
    static const piece badbyte[][1] = {{{"<0x4g>", 4, 0}}, {{"<0x4a>", 4, 0}}, {{"<0x4A", 4, 0}}, {{"0x4A>>", 4, 0}}};
    for (int i = 0; i < 4; i++) {
        b = make_blob(badbyte[i], 1, 1, 1, 0);
        expect_refused(b.bytes, b.len, "piece 4 at byte 76: byte piece is not of the form <0xXX>", badbyte[i][0].surface);
    }
    static const piece empty_marker[] = {{"", 3, 0}};
    b = make_blob(empty_marker, 1, 1, 1, 0);
    expect_refused(b.bytes, b.len, "empty surface for type 3", "empty user-defined piece");
    static const piece empty_control[] = {{"", 2, 0}, {"", 2, 0}};
    b = make_blob(empty_control, 2, 1, 1, 0);
    needle_tokenizer *tok = needle_tokenizer_load(b.bytes, b.len, NULL);
    CHECK(tok != NULL, "empty control pieces are allowed");
    needle_tokenizer_free(tok);
#undef MUTATE
}

/* Every prefix and every single-byte change of a valid blob loads or is
 * refused cleanly (ASan reports any read out of bounds). */
static void test_truncations_and_flips(void) {
    blob good = make_blob(vocab, NVOCAB, 1, 1, 1);
    int loaded = 0;
    for (size_t len = 0; len < good.len; len++) {
        needle_error err;
        uint8_t *copy = malloc(len ? len : 1);   /* exact size, so ASan sees an overread */
        memcpy(copy, good.bytes, len);
        needle_tokenizer *tok = needle_tokenizer_load(copy, len, &err);
        CHECK(tok == NULL && err.code == NEEDLE_E_TOKENIZER, "prefix of %zu bytes", len);
        needle_tokenizer_free(tok);
        free(copy);
    }
    for (size_t i = 0; i < good.len; i += 3) {
        blob b = good;
        b.bytes[i] ^= (uint8_t)(0x5A + i);
        needle_error err;
        needle_tokenizer *tok = needle_tokenizer_load(b.bytes, b.len, &err);
        if (tok) {
            int32_t ids[64];
            size_t count;
            loaded++;
            needle_tokenize(tok, "a <ab> bc\xC3\xA9", 11, ids, 64, &count, &err);
            needle_tokenizer_free(tok);
        } else {
            CHECK(err.code == NEEDLE_E_TOKENIZER && err.message[0], "flip at %zu: code %d", i, err.code);
        }
    }
    CHECK(loaded > 0, "some flips (in scores) still load");
}

int main(void) {
    RUN(test_markers_are_atomic_longest_first);
    RUN(test_plain_text_writes_no_marker);
    RUN(test_merges_by_score_then_leftmost);
    RUN(test_byte_fallback_and_unknown_runs);
    RUN(test_encode_edges);
    RUN(test_decode);
    RUN(test_streaming_decode);
    RUN(test_malformed_blobs);
    RUN(test_truncations_and_flips);
    return check_report();
}
