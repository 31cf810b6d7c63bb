/* fuzz_archive.c: libFuzzer target for the .cact validator. Every input is
 * parsed as a whole archive and, at a few cut points, as a streamed prefix;
 * the sanitizers catch any read outside the input, overflow or leak. A parse
 * that succeeds must describe an archive whose records all lie in the input.
 *
 *   ./build.sh fuzz
 *   build/native/test_archive --write-seed build/fuzz-corpus/tiny.cact
 *   build/fuzz_archive -max_total_time=600 build/fuzz-corpus/ */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/archive.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* A private copy so the end of the heap block is the end of the archive. */
    uint8_t *bytes = malloc(size ? size : 1);
    if (!bytes) return 0;
    memcpy(bytes, data, size);
    nd_archive a;
    needle_error err;
    if (nd_archive_parse(bytes, size, &a, &err) == NEEDLE_OK) {
        for (uint32_t i = 0; i < a.geometry.tensor_count; i++)
            if (a.records[i].offset > size || a.records[i].bytes > size - a.records[i].offset) abort();
    } else if (!err.message[0] || (err.code != NEEDLE_E_FORMAT && err.code != NEEDLE_E_NOMEM)) {
        abort(); /* every failure explains itself */
    }
    nd_archive_free(&a);
    /* Streamed prefixes of the same bytes, claimed to be part of a larger file. */
    size_t cuts[3] = {size / 3, size / 2, size};
    for (int k = 0; k < 3; k++) nd_archive_check_prefix(bytes, cuts[k], (uint64_t)size + k, &err);
    free(bytes);
    return 0;
}
