
/*
 * accountd's keyset.c: the key set pushed to the workers, built once a rewrite.
 */

#ifndef _ACCOUNTD_KEYSET_H_INCLUDED_
#define _ACCOUNTD_KEYSET_H_INCLUDED_


#include "accountd.h"


typedef struct {
    uint64_t   generation;
    uint32_t   count;
    unsigned   refs;
    size_t     len;
    uint8_t   *data;           /* BEGIN, count KEY frames, END */
} acd_keyset_t;

int keyset_publish(PGresult *res, uint64_t generation);
acd_keyset_t *keyset_newest(void);
void keyset_ref(acd_keyset_t *ks);
void keyset_unref(acd_keyset_t *ks);
void keyset_done(void);


#endif /* _ACCOUNTD_KEYSET_H_INCLUDED_ */
