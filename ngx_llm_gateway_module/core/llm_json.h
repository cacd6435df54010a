
/*
 * A read-only JSON parser for request bodies that builds cJSON's tree in a
 * few blocks instead of a node and a string at a time: the tree is the one
 * cJSON_ParseWithLength() builds, node for node, for every body it takes,
 * and what llm_inspect_scan() refuses it does not take.
 *
 * It takes less than cJSON does: only an object with nothing but blanks
 * around it, no byte JSON does not allow, no \u escape that is not four hex
 * digits of a code point other than NUL, no string longer than max_string
 * bytes as sent, nothing nested deeper than max_depth or
 * LLM_JSON_DEPTH_MAX.  NULL then, or when memory runs out: the caller
 * takes cJSON's parse, and its error, instead.
 *
 * The tree must not be changed or given to cJSON_Delete(): llm_json_free()
 * frees all of it.  Plain C, memory from cJSON's hooks.
 */

#ifndef _LLM_JSON_H_INCLUDED_
#define _LLM_JSON_H_INCLUDED_


#include <stddef.h>

#include <cJSON.h>


/* deeper than this, cJSON's parse is taken */
#define LLM_JSON_DEPTH_MAX   128

/* objects with more members are not checked for repeated names */
#define LLM_JSON_PAIRWISE    16


typedef struct llm_json_block_s  llm_json_block_t;

typedef struct {
    char              *text;         /* the strings, each at its offset */
    llm_json_block_t  *blocks;       /* of nodes */
    unsigned           unique:1;     /* no object names a member twice */
} llm_json_t;


cJSON *llm_json_parse(llm_json_t *js, const char *body, size_t len,
    size_t max_depth, size_t max_string);
void llm_json_free(llm_json_t *js);


#endif /* _LLM_JSON_H_INCLUDED_ */
