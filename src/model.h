/* model.h: the loaded model (immutable after needle_model_load): the
 * validated archive, views of the packed CQ matrices and every dense control
 * tensor converted to f32. Shared by any number of sessions. */
#ifndef ND_MODEL_H
#define ND_MODEL_H

#include "archive.h"
#include "cq.h"
#include "needle.h"

struct needle_model {
    nd_archive archive;        /* geometry and records; first member */
    needle_tokenizer *tokenizer;
    /* weights: filled in by model.c (see the forward pass) */
};

#endif
