
/*
 * mockllm_embed.c: OpenAI's embeddings, the request read and the vectors.
 */

#ifndef _MOCKLLM_EMBED_H_INCLUDED_
#define _MOCKLLM_EMBED_H_INCLUDED_


#include <cJSON.h>

#include "mockllm.h"


/* the members of an embeddings body, after the model: into c->rd */
void mockllm_embed_read(mockllm_conn_t *c, cJSON *root);

/* the answer but its usage and its closing brace, into b */
void mockllm_embed_data(mockllm_conn_t *c, mockllm_buf_t *b);


#endif /* _MOCKLLM_EMBED_H_INCLUDED_ */
